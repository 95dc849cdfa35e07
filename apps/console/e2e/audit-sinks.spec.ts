import { expect, test } from '@playwright/test';
import { expectAccessible, openView } from './helpers';

/**
 * T2 in the console: the Audit page shows where the log is streamed and whether each sink keeps up;
 * a sink that cannot take entries is an alert saying since when, how many entries wait and why, and
 * the refusal mode says what it refuses.
 */
test.describe('Audit sinks', () => {
  for (const width of [1440, 390]) {
    test(`at ${width} px a failing sink is an alert with since when, what waits and why`, async ({ page }) => {
      await page.setViewportSize({ width, height: 900 });
      await openView(page, { view: 'audit', variant: 'sinks-failing' });
      const panel = page.getByRole('region', { name: 'Audit sinks' });
      const alert = panel.getByRole('alert');
      await expect(alert).toContainText('siem cannot take entries since');
      await expect(alert).toContainText('124 entries wait for it (connect ECONNREFUSED 10.20.0.14:6514)');
      await expect(alert).toContainText('hook cannot take entries');
      await expect(alert).toContainText('answered 503: upstream unavailable');
      await expect(alert).toContainText('this deployment refuses new actions until one does');
      await expect(panel.getByRole('row').filter({ hasText: 'siem' })).toContainText('tls://siem.corp.example:6514');
      await expect(panel.getByRole('row').filter({ hasText: 'siem' })).toContainText('failing');
      await expectAccessible(page);
      await page.screenshot({ path: `../../artifacts/console/audit-sinks-failing-${width}.png`, fullPage: true });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect(overflow, 'the page scrolls sideways').toBeLessThanOrEqual(0);
    });
  }

  test('healthy sinks are listed without an alert', async ({ page }) => {
    await openView(page, { view: 'audit', variant: 'sinks' });
    const panel = page.getByRole('region', { name: 'Audit sinks' });
    await expect(panel.getByRole('row').filter({ hasText: 'archive' })).toContainText('up to date');
    await expect(panel.getByRole('row').filter({ hasText: 'archive' })).toContainText('/var/log/lemniscate/audit.jsonl');
    await expect(panel.getByRole('alert')).toHaveCount(0);
  });

  test('a deployment without sinks says the log is not streamed anywhere', async ({ page }) => {
    await openView(page, { view: 'audit', variant: 'sinks-none' });
    await expect(page.getByText('The audit log is not streamed to any other system')).toBeVisible();
    await expect(page.getByRole('region', { name: 'Audit sinks' })).toHaveCount(0);
  });
});
