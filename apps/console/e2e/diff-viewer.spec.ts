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

  test('the chosen layout is remembered for the next diff, on this browser', async ({ page }) => {
    await page.getByRole('button', { name: 'Side by side' }).click();
    await openView(page, { view: 'diff' });
    await expect(page.getByRole('button', { name: 'Side by side' })).toHaveAttribute('aria-pressed', 'true');
    await expect(page.locator('table.diff-table.split').first()).toBeVisible();
    await page.getByRole('button', { name: 'Unified' }).click();
    await openView(page, { view: 'diff' });
    await expect(page.getByRole('button', { name: 'Unified' })).toHaveAttribute('aria-pressed', 'true');
  });

  test('a file folds and unfolds; marking it viewed folds it and counts it', async ({ page }) => {
    const file = page.getByRole('article', { name: 'src/sum.ts' });
    const fold = file.getByRole('button', { name: 'Hide src/sum.ts' });
    await expect(fold).toHaveAttribute('aria-expanded', 'true');
    await fold.click();
    await expect(file.locator('table.diff-table')).toBeHidden();
    await file.getByRole('button', { name: 'Show src/sum.ts' }).click();
    await expect(file.locator('table.diff-table').first()).toBeVisible();
    await file.getByLabel('Viewed src/sum.ts').check();
    await expect(file.locator('table.diff-table')).toBeHidden();
    await expect(page.getByText('4 files, +10 −3, 1 of 4 viewed')).toBeVisible();
    await expect(page.getByRole('navigation', { name: 'Files in this change' }).getByRole('button', { name: /src\/sum\.ts.*viewed/ })).toBeVisible();
    await expectAccessible(page);
  });
});

test.describe('DiffViewer with a large change', () => {
  test('draws the first 400 lines of a huge file, the rest on request, and the page stays as tall as its scroll box', async ({ page }) => {
    // 1,800 highlighted lines laid out, then axe over all of them: about 23 s alone, past a minute
    // beside another worker on a loaded 2-core host.
    test.slow();
    await openView(page, { view: 'diff', variant: 'large' });
    const rows = page.locator('table.diff-table tr.line');
    await expect(rows).toHaveCount(400);
    // The screen-reader labels of hidden rows stay inside the scroll box instead of stretching the page.
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    expect(height).toBeLessThan(1600);
    await page.getByRole('button', { name: /^Show the other 1,400 lines of big\.txt$/ }).click();
    await expect(rows).toHaveCount(1800);
    expect(await page.evaluate(() => document.documentElement.scrollHeight)).toBeLessThan(1600);
    // Drawn in parts the browser lays out only near the screen (200 lines here, as an added file has no
    // unchanged line to cut at after 100); every line is in the page.
    const parts = page.locator('table.diff-table.diff-chunk');
    await expect(parts).toHaveCount(9);
    expect(await parts.evaluateAll((ts) => ts.map((t) => getComputedStyle(t).contentVisibility))).toEqual(Array(9).fill('auto'));
    expect(await parts.nth(8).locator('tr.line').count()).toBe(200);
    await expect(parts.nth(8).locator('tr.line').last().locator('td.ln').nth(1)).toHaveText('1800');
    // Scrolled to the end, the last part is laid out and shows its last line.
    await parts.nth(8).locator('tr.line').last().scrollIntoViewIfNeeded();
    await expect(page.getByText('line 1800 of a generated file', { exact: true })).toBeVisible();
    await expectAccessible(page);
  });

  test('at 390 px the layout is unified, with no choice offered', async ({ page }) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await openView(page, { view: 'diff' });
    await expect(page.getByText('Unified layout on a narrow screen.')).toBeVisible();
    await expect(page.getByRole('button', { name: 'Side by side' })).toHaveCount(0);
    await expect(page.locator('table.diff-table.unified').first()).toBeVisible();
    await expectAccessible(page);
  });
});
