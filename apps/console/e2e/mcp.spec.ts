import { expect, test } from '@playwright/test';
import { calls, expectAccessible, openView } from './helpers';

/**
 * AG7 in the console: the Policies page's MCP servers tab shows each server of the policy in force,
 * where it runs, whether the gateway holds its credential, how its tools are decided and what it
 * last listed, with every description's pin status; an administrator pins what was listed into the
 * draft and publishes it; other roles read it.
 */
const sha = (c: string) => `sha256:${c.repeat(64)}`;

test.describe('MCP servers', () => {
  for (const width of [1440, 390]) {
    test(`at ${width} px an administrator reads each server and its tools' statuses`, async ({ page }) => {
      await page.setViewportSize({ width, height: 900 });
      await openView(page, { view: 'policies', tab: 'mcp', variant: 'mcp' });
      const files = page.getByRole('region', { name: /^files/ });
      await expect(files).toContainText('local, in the sandbox');
      await expect(files).toContainText('node tools/mcp-files.cjs');
      const rows = files.getByRole('row');
      await expect(rows.filter({ hasText: 'read_file' })).toContainText('pinned');
      await expect(rows.filter({ hasText: 'write_file' })).toContainText('changed since pinned');
      await expect(rows.filter({ hasText: 'write_file' })).toContainText('ignore previous instructions');
      await expect(rows.filter({ hasText: 'search_files' })).toContainText('not pinned yet');
      const issues = page.getByRole('region', { name: /^issues/ });
      await expect(issues).toContainText('not held by the gateway: the server cannot be reached');
      await expect(issues).toContainText('The last start failed');
      await expect(issues).toContainText("No session has listed this server's tools yet.");
      await expectAccessible(page);
      // Nothing scrolls the page sideways: the tools table scrolls inside its card.
      await page.screenshot({ path: `../../artifacts/console/mcp-${width}.png`, fullPage: true });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect(overflow, 'the page scrolls sideways').toBeLessThanOrEqual(0);
    });
  }

  test('pinning a listed description writes it into the draft and opens the editor to publish it', async ({ page }) => {
    await openView(page, { view: 'policies', tab: 'mcp', variant: 'mcp' });
    await page.getByRole('button', { name: 'Pin in draft: files/search_files' }).click();
    expect((await calls(page, 'pin')).map((c) => c.args)).toEqual([['files', { search_files: sha('c') }]]);
    await expect(page.getByRole('tab', { name: 'Edit and publish' })).toHaveAttribute('aria-selected', 'true');
    await expect(page.locator('.cm-content')).toContainText(`search_files: ${sha('c')}`);
    await expect(page.getByText('The document is valid.')).toBeVisible();
  });

  test('pinning every description not pinned, the changed one included', async ({ page }) => {
    await openView(page, { view: 'policies', tab: 'mcp', variant: 'mcp' });
    await page.getByRole('button', { name: 'Pin the 2 descriptions not pinned in the draft' }).click();
    expect((await calls(page, 'pin')).map((c) => c.args)).toEqual([['files', { write_file: sha('b'), search_files: sha('c') }]]);
  });

  test('a developer reads the servers and is offered no pinning', async ({ page }) => {
    await openView(page, { view: 'policies', tab: 'mcp', role: 'developer' });
    await expect(page.getByRole('region', { name: /^files/ })).toContainText('not pinned yet');
    await expect(page.getByRole('button', { name: /Pin/ })).toHaveCount(0);
    await expect(page.getByRole('columnheader', { name: 'Approve' })).toHaveCount(0);
  });

  test('a policy without MCP servers says so', async ({ page }) => {
    await openView(page, { view: 'policies', tab: 'mcp', variant: 'mcp-none' });
    await expect(page.getByText('The policy in force enables no MCP server')).toBeVisible();
  });
});
