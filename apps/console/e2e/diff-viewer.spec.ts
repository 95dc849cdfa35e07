import { expect, test } from '@playwright/test';
import { expectAccessible, openView } from './helpers';

test.describe('DiffViewer', () => {
  test.beforeEach(async ({ page }) => openView(page, { view: 'diff' }));

  test('lists every file with its counts and highlights the code', async ({ page }) => {
    const nav = page.getByRole('navigation', { name: 'Files in this change' });
    await expect(nav.getByRole('button')).toHaveText([/src\/sum\.ts/, /test\/sum\.test\.ts/, /package\.json/, /\.github\/workflows\/ci\.yml/]);
    await expect(page.getByText('4 files, +10 −3')).toBeVisible();
    // highlight.js ran: the TypeScript keyword is a token, not plain text.
    await expect(page.locator('.diff-file').first().locator('.hljs-keyword').first()).toHaveText('export');
  });

  test('flags third-party files in the list and on the file itself', async ({ page }) => {
    const nav = page.getByRole('navigation', { name: 'Files in this change' });
    await expect(nav.getByRole('button', { name: /package\.json.*third-party/ })).toBeVisible();
    await expect(nav.getByRole('button', { name: /src\/sum\.ts.*third-party/ })).toHaveCount(0);
    const pkg = page.getByRole('article', { name: 'package.json' });
    await expect(pkg.getByRole('note')).toContainText('Third-party file (dependencies)');
  });

  test('switches between unified and side-by-side layouts', async ({ page }) => {
    const unified = page.getByRole('button', { name: 'Unified' });
    const split = page.getByRole('button', { name: 'Side by side' });
    await expect(unified).toHaveAttribute('aria-pressed', 'true');
    await expect(page.locator('table.diff-table.unified').first()).toBeVisible();
    await split.click();
    await expect(split).toHaveAttribute('aria-pressed', 'true');
    await expect(page.locator('table.diff-table.split').first()).toBeVisible();
    await expect(page.locator('table.diff-table.unified')).toHaveCount(0);
    // The replaced line sits next to its replacement on one row.
    const row = page.locator('table.diff-table.split tr', { has: page.locator('td.code.del') }).filter({ hasText: 'return a - b;' });
    await expect(row.locator('td.code.add')).toContainText('// The old code subtracted');
  });

  test('moves from file to file with the buttons and the file list', async ({ page }) => {
    const nav = page.getByRole('navigation', { name: 'Files in this change' });
    await expect(nav.getByRole('button', { name: /src\/sum\.ts/ })).toHaveAttribute('aria-current', 'true');
    await page.getByRole('button', { name: 'Next file' }).click();
    await expect(nav.getByRole('button', { name: /test\/sum\.test\.ts/ })).toHaveAttribute('aria-current', 'true');
    await expect(page.getByRole('article', { name: 'test/sum.test.ts' })).toBeFocused();
    await nav.getByRole('button', { name: /ci\.yml/ }).click();
    await expect(page.getByRole('button', { name: 'Next file' })).toBeDisabled();
    await page.getByRole('button', { name: 'Previous file' }).click();
    await expect(nav.getByRole('button', { name: /package\.json/ })).toHaveAttribute('aria-current', 'true');
  });

  test('is accessible in both layouts', async ({ page }) => {
    await expectAccessible(page);
    await page.getByRole('button', { name: 'Side by side' }).click();
    await expectAccessible(page);
  });
});
