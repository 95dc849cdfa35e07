import * as fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, test, type Page } from '@playwright/test';
import type { UserRole } from '@lemniscate/contracts';
import { calls, expectAccessible, openView } from './helpers';
import { startPoolGateway, type PoolGateway } from './support/pool-gateway';

const SHOTS = fileURLToPath(new URL('../../../artifacts/console/exec-hosts/', import.meta.url));

async function shot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}${name}.png`, fullPage: true });
}

/*
 * The Exec-hosts page (docs/decisions/0010-exec-host-pool.md): first its view with sample data (every
 * state, a fixed exec-host, an empty pool), then the application against a real gateway in pool mode
 * whose exec-hosts register by heartbeat.
 */

test.describe('the Exec-hosts view', () => {
  test('an administrator sees each state in words, drains with a reason after confirming, and undrains', async ({ page }) => {
    await openView(page, { view: 'exec-hosts', role: 'admin' });
    const row = (id: string) => page.getByRole('row', { name: new RegExp(`^${id}\\b`) });
    await expect(row('exec-host-1')).toContainText('active');
    await expect(row('exec-host-1')).toContainText('3 s ago');
    await expect(row('exec-host-1')).toContainText('7 / 20');
    await expect(row('exec-host-2')).toContainText('draining');
    await expect(row('exec-host-2')).toContainText('no new session; its 3 live sessions finish');
    await expect(row('exec-host-2')).toContainText('Ada Admin');
    await expect(row('exec-host-2')).toContainText('“kernel upgrade on Thursday”');
    await expect(row('exec-host-3')).toContainText('lost');
    await expect(row('exec-host-3')).toContainText(/no heartbeat since/);
    // The warm pool: ready / wanted, or "off" for a host that keeps none.
    await expect(page.getByRole('columnheader', { name: 'Warm' })).toBeVisible();
    await expect(row('exec-host-1')).toContainText('2 / 2');
    await expect(row('exec-host-2')).toContainText('off');
    await expectAccessible(page);
    await shot(page, 'view-admin');

    await page.getByRole('button', { name: 'Drain… exec-host-1' }).click();
    const form = page.getByRole('region', { name: 'Drain exec-host-1' });
    await expect(form).toContainText('No new session will be placed on exec-host-1; its 7 live sessions finish.');
    await form.getByLabel(/Reason/).fill('  disk replacement  ');
    await expectAccessible(page);
    await shot(page, 'view-admin-drain-form');
    await form.getByRole('button', { name: 'Drain exec-host-1' }).click();
    expect((await calls(page, 'drain')).map((c) => c.args)).toEqual([['exec-host-1', 'disk replacement']]);
    await expect(page.getByRole('status')).toHaveText('Drained. No new session will be placed on exec-host-1; its 7 live sessions finish.');
    await expect(row('exec-host-1')).toContainText('draining');

    // Cancelling sends nothing; an empty reason is no reason.
    await page.getByRole('button', { name: 'Drain… exec-host-3' }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await expect(page.getByRole('region', { name: /^Drain / })).toHaveCount(0);
    await page.getByRole('button', { name: 'Undrain exec-host-2' }).click();
    expect((await calls(page, 'undrain')).map((c) => c.args)).toEqual([['exec-host-2']]);
    await expect(row('exec-host-2')).toContainText('active');
    await page.getByRole('button', { name: 'Drain… exec-host-2' }).click();
    await page.getByRole('button', { name: 'Drain exec-host-2' }).click();
    expect((await calls(page, 'drain')).map((c) => c.args)[1]).toEqual(['exec-host-2', undefined]);
  });

  test('a security officer reads the list: no Drain, no Undrain', async ({ page }) => {
    await openView(page, { view: 'exec-hosts', role: 'security_officer' });
    await expect(page.getByRole('row', { name: /^exec-host-2\b/ })).toContainText('draining');
    await expect(page.getByRole('button', { name: /Drain|Undrain/ })).toHaveCount(0);
    await shot(page, 'view-officer');
  });

  test('a fixed exec-host is explained and cannot be drained; an empty pool says how an exec-host registers; a refusal is its sentence', async ({ page }) => {
    await openView(page, { view: 'exec-hosts', role: 'admin', variant: 'fixed' });
    await expect(page.getByRole('note')).toContainText('This gateway has one configured exec-host (LEMNISCATE_EXEC_HOST_URL), not a pool, so it cannot be drained');
    await expect(page.getByRole('row', { name: /^fixed\b/ })).toContainText('cannot be drained');
    await expect(page.getByRole('button', { name: /Drain/ })).toHaveCount(0);
    await shot(page, 'view-fixed');

    await openView(page, { view: 'exec-hosts', role: 'admin', variant: 'empty' });
    await expect(page.getByText('No exec-host has registered yet.')).toBeVisible();
    await expect(page.locator('.state.empty')).toContainText('LEMNISCATE_GATEWAY_URL');
    await shot(page, 'view-empty');

    await openView(page, { view: 'exec-hosts', role: 'admin', variant: 'drain-error' });
    await expect(page.getByRole('alert')).toContainText('As a security officer you may not update exec-hosts.');
  });
});

test.describe('the Exec-hosts page against a gateway in pool mode', () => {
  test.describe.configure({ mode: 'serial' });
  let gateway: PoolGateway;

  test.beforeAll(async () => {
    test.setTimeout(120_000);
    gateway = await startPoolGateway();
    await gateway.addExecHost('exec-host-1', { load: 1 });
    await gateway.addExecHost('exec-host-2', { runtimes: ['runc'], capacity: 4 });
  });
  test.afterAll(async () => {
    await gateway?.stop();
  });
  test.afterEach(async ({}, info) => {
    if (info.status !== info.expectedStatus) await info.attach('gateway.log', { body: gateway.logs(), contentType: 'text/plain' });
  });

  async function signIn(page: Page, role: UserRole): Promise<void> {
    await page.goto(`${gateway.url}/`);
    await page.getByLabel('E-mail').fill(gateway.people[role].email);
    await page.getByLabel('Password').fill(gateway.people[role].password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('button', { name: 'Sign out' })).toBeVisible();
  }

  const hostState = async (id: string) => ((await gateway.asAdmin('GET', '/admin/exec-hosts')).json as { id: string; state: string; drainReason: string | null }[]).find((h) => h.id === id);

  test('an administrator sees the registered hosts, drains one with a reason, and undrains it', async ({ page }) => {
    await signIn(page, 'admin');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Exec-hosts' }).click();
    await expect(page).toHaveURL(/\/admin\/exec-hosts$/);
    const row = (id: string) => page.getByRole('row', { name: new RegExp(`^${id}\\b`) });
    await expect(row('exec-host-1')).toContainText('active');
    await expect(row('exec-host-1')).toContainText('0 / 8');
    await expect(row('exec-host-1')).toContainText(/\d+ s ago/);
    await expect(row('exec-host-2')).toContainText('0 / 4');
    await expect(row('exec-host-2')).toContainText(/http:\/\/127\.0\.0\.1:\d+/);
    await shot(page, 'gateway-admin');

    await page.getByRole('button', { name: 'Drain… exec-host-2' }).click();
    await page.getByLabel(/Reason/).fill('kernel upgrade');
    await page.getByRole('button', { name: 'Drain exec-host-2' }).click();
    await expect(page.getByRole('status')).toHaveText('Drained. No new session will be placed on exec-host-2; it has no live session.');
    await expect(row('exec-host-2').locator('.badge')).toHaveText('draining');
    await expect(row('exec-host-2')).toContainText('“kernel upgrade”');
    await expect(row('exec-host-2')).toContainText('you');
    expect(await hostState('exec-host-2')).toMatchObject({ state: 'draining', drainReason: 'kernel upgrade' });
    // Heartbeats go on: a drained host stays drained.
    await page.waitForTimeout(2_500);
    await page.reload();
    await expect(row('exec-host-2').locator('.badge')).toHaveText('draining');
    await shot(page, 'gateway-admin-drained');

    await page.getByRole('button', { name: 'Undrain exec-host-2' }).click();
    await expect(page.getByRole('status')).toHaveText('Sessions may be placed on exec-host-2 again.');
    await expect(row('exec-host-2').locator('.badge')).toHaveText('active');
    expect(await hostState('exec-host-2')).toMatchObject({ state: 'active', drainReason: null });
  });

  test('a security officer sees the list without Drain or Undrain buttons', async ({ page }) => {
    expect((await gateway.asAdmin('POST', '/admin/exec-hosts/exec-host-1/drain', { reason: 'disk replacement' })).status).toBe(200);
    await signIn(page, 'security_officer');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Exec-hosts' }).click();
    const row = (id: string) => page.getByRole('row', { name: new RegExp(`^${id}\\b`) });
    await expect(row('exec-host-1').locator('.badge')).toHaveText('draining');
    await expect(row('exec-host-1')).toContainText('“disk replacement”');
    // The officer cannot list users: the drainer is named by role, not by a bare id.
    await expect(row('exec-host-1')).toContainText('an administrator');
    await expect(row('exec-host-2').locator('.badge')).toHaveText('active');
    await expect(page.getByRole('button', { name: /Drain|Undrain/ })).toHaveCount(0);
    await shot(page, 'gateway-officer');
    // The gateway refuses what the page does not offer.
    const csrf = ((await (await page.request.get(`${gateway.url}/api/v1/auth/me`)).json()) as { csrfToken: string }).csrfToken;
    const refused = await page.request.post(`${gateway.url}/api/v1/admin/exec-hosts/exec-host-1/undrain`, { headers: { 'x-csrf-token': csrf } });
    expect(refused.status()).toBe(403);
    expect((await gateway.asAdmin('POST', '/admin/exec-hosts/exec-host-1/undrain')).status).toBe(200);
  });

  test('a developer has no Exec-hosts entry, and the address says the page is not for their role', async ({ page }) => {
    await signIn(page, 'developer');
    await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Exec-hosts' })).toHaveCount(0);
    await page.goto(`${gateway.url}/admin/exec-hosts`);
    await expect(page.getByRole('alert')).toContainText('The Exec-hosts page is for other roles. Ask an administrator if you need access.');
    await shot(page, 'gateway-developer');
    const listed = await page.request.get(`${gateway.url}/api/v1/admin/exec-hosts`);
    expect(listed.status()).toBe(403);
    expect(((await listed.json()) as { message: string }).message).toMatch(/may not read exec-hosts/);
  });
});
