import { expect, test } from '@playwright/test';
import { calls, openView } from './helpers';

test.describe('Content-Security-Policy without unsafe-eval', () => {
  // Scripts evaluated by the test runner are exempt from the page's policy, so the policy itself is
  // checked here; a zod parser compiled with eval shows up as a violation in openView.
  test('the harness page declares a policy with no eval and no inline script', async ({ page }) => {
    await openView(page, { view: 'signin' });
    const csp = await page.locator('meta[http-equiv="Content-Security-Policy"]').getAttribute('content');
    expect(csp).toContain("default-src 'self'");
    expect(csp).not.toContain('unsafe-eval');
    expect(csp).not.toMatch(/(default|script)-src[^;]*unsafe-inline/);
  });

  test('contract validation and the validator of the policy library (both zod) run without eval', async ({ page }) => {
    await openView(page, { view: 'signin' });
    await page.evaluate(() => ((window as unknown as { __csp: string[] }).__csp = []));
    await page.getByLabel('E-mail').fill('dev@example.org');
    await page.getByLabel('Password').fill('a password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await calls(page, 'signIn')).toHaveLength(1);
    await openView(page, { view: 'policies', variant: 'invalid' });
    await expect(page.locator('#yaml-problems').getByRole('listitem')).toHaveCount(2);
    expect(await page.evaluate(() => (window as unknown as { __csp: string[] }).__csp)).toEqual([]);
  });
});
