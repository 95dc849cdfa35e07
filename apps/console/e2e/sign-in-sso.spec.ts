import { expect, test } from '@playwright/test';
import { expectAccessible, openView } from './helpers';

/**
 * Single sign-on on the sign-in page: the provider's button beside the password form, the only way
 * in when the deployment turned passwords off, and the gateway's sentence when a sign-in failed.
 */
test.describe('Sign-in with single sign-on', () => {
  test('the button leads to the gateway, which sends the browser to the provider', async ({ page }) => {
    await openView(page, { view: 'signin', variant: 'sso' });
    const button = page.getByRole('link', { name: 'Sign in with Corp SSO' });
    await expect(button).toHaveAttribute('href', '/api/v1/auth/oidc/start?returnTo=%2F');
    await expect(page.getByLabel('Password')).toBeVisible();
    await expect(page.getByText('or with your e-mail and password')).toBeVisible();
    await expectAccessible(page);
  });

  for (const width of [1440, 390]) {
    test(`at ${width} px, with passwords off, only the button is offered`, async ({ page }) => {
      await page.setViewportSize({ width, height: 800 });
      await openView(page, { view: 'signin', variant: 'sso-only' });
      await expect(page.getByRole('link', { name: 'Sign in with Corp SSO' })).toBeVisible();
      await expect(page.getByLabel('Password')).toHaveCount(0);
      await expect(page.getByText('This deployment signs people in through single sign-on only.')).toBeVisible();
      await expectAccessible(page);
      await page.screenshot({ path: `../../artifacts/console/sign-in-sso-only-${width}.png`, fullPage: true });
    });
  }

  test("a sign-in the provider's groups did not allow says why", async ({ page }) => {
    await openView(page, { view: 'signin', variant: 'sso-error' });
    const alert = page.getByRole('alert');
    await expect(alert).toContainText('Single sign-on did not sign you in.');
    await expect(alert).toContainText('is in no group this deployment gives a role to (your groups: marketing)');
    await expectAccessible(page);
  });
});
