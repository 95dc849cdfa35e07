import { expect, test } from '@playwright/test';
import { calls, expectAccessible, openView } from './helpers';

const VIEWS = ['dashboard', 'approvals', 'sessions', 'session', 'policies', 'environment', 'projects', 'users', 'audit'] as const;

test.describe('every page has loading, error and ready states, all accessible', () => {
  for (const view of VIEWS) {
    test(`${view}: loading`, async ({ page }) => {
      await openView(page, { view, state: 'loading' });
      await expect(
        page
          .getByRole('status')
          .filter({ hasText: /Loading/ })
          .first(),
      ).toBeVisible();
      await expectAccessible(page);
    });
    test(`${view}: error shows the server's sentence and request id`, async ({ page }) => {
      await openView(page, { view, state: 'error' });
      const alert = page.getByRole('alert').filter({ hasText: 'Your role does not allow publishing a policy' }).first();
      await expect(alert).toBeVisible();
      await expect(alert).toContainText('req_7f3a9c');
      await expect(alert).toContainText('forbidden');
      await expectAccessible(page);
    });
    test(`${view}: ready`, async ({ page }) => {
      await openView(page, { view });
      await expect(page.getByRole('heading', { level: 1 })).toBeVisible();
      await expectAccessible(page);
    });
  }
});

test.describe('header and navigation', () => {
  test('shows who you are and your role', async ({ page }) => {
    await openView(page, { view: 'dashboard', role: 'developer' });
    const header = page.getByRole('banner');
    await expect(header).toContainText('Dana Developer');
    await expect(header).toContainText('Developer');
  });

  const offered = {
    admin: ['Dashboard', 'Approvals', 'Sessions', 'Policies', 'Environment', 'Projects', 'Users', 'Audit', 'Exec-hosts'],
    developer: ['Dashboard', 'Approvals', 'Sessions', 'Policies', 'Environment'],
    security_officer: ['Dashboard', 'Sessions', 'Policies', 'Environment', 'Audit', 'Exec-hosts'],
  };
  for (const [role, labels] of Object.entries(offered)) {
    test(`${role} is offered only ${labels.join(', ')}`, async ({ page }) => {
      await openView(page, { view: 'dashboard', role });
      await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link')).toHaveText(labels);
    });
  }

  test('the skip link and every control are reachable by keyboard, with visible focus', async ({ page }) => {
    await openView(page, { view: 'dashboard', role: 'admin' });
    await page.keyboard.press('Tab');
    const skip = page.getByRole('link', { name: 'Skip to content' });
    await expect(skip).toBeFocused();
    await expect(skip).toBeInViewport();
    await page.keyboard.press('Tab');
    const first = page.getByRole('navigation', { name: 'Main' }).getByRole('link').first();
    await expect(first).toBeFocused();
    const outline = await first.evaluate((el) => getComputedStyle(el).outlineStyle);
    expect(outline).toBe('solid');
  });
});

test.describe('sign-in', () => {
  test('checks the fields with the contract before sending', async ({ page }) => {
    await openView(page, { view: 'signin' });
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByText('Enter your e-mail address')).toBeVisible();
    await expect(page.getByLabel('E-mail')).toHaveAttribute('aria-invalid', 'true');
    expect(await calls(page, 'signIn')).toEqual([]);
    await page.getByLabel('E-mail').fill('dev@example.org');
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByLabel('Password').press('Enter');
    expect((await calls(page, 'signIn'))[0]!.args).toEqual([{ email: 'dev@example.org', password: 'correct horse battery staple' }]);
    await expectAccessible(page);
  });

  test("shows the server's refusal", async ({ page }) => {
    await openView(page, { view: 'signin', variant: 'error' });
    await expect(page.getByRole('alert')).toContainText('This e-mail and password do not match an account.');
  });
});

test.describe('dashboard', () => {
  test('draws the charts with text alternatives', async ({ page }) => {
    await openView(page, { view: 'dashboard' });
    await expect(page.getByRole('group', { name: /Sessions per day: 74 in total over 14 days/ })).toBeVisible();
    // Every day's column is a link to that day's sessions, named for a screen reader.
    await expect(page.getByRole('link', { name: /^2026-11-\d\d: \d+ sessions$/ })).toHaveCount(14);
    await expect(page.getByRole('link', { name: '2026-11-19: 8 sessions' })).toHaveAttribute('href', /from=2026-11-19T00%3A00%3A00\.000Z&to=2026-11-20T00%3A00%3A00\.000Z/);
    await expect(page.getByRole('list', { name: 'Sessions by project' }).getByRole('listitem').first()).toContainText('demo61');
    await expect(page.getByRole('list', { name: 'Sessions by person' }).getByRole('link', { name: 'dev@example.org' })).toHaveAttribute('href', /userId=usr_dev/);
    await expect(page.getByRole('img', { name: /412 allow, 96 ask, 23 deny/ })).toBeVisible();
    await expect(page.getByRole('list', { name: 'Most denied commands' }).getByRole('listitem').first()).toContainText('curl https://example.com/install.sh');
    await expect(page.locator('.big-number')).toHaveText('3');
  });
});

test.describe('sessions', () => {
  test('lists sessions with their status and links to each', async ({ page }) => {
    await openView(page, { view: 'sessions' });
    const rows = page.getByRole('table', { name: 'Sessions' }).getByRole('row');
    await expect(rows).toHaveCount(6);
    await expect(rows.nth(3)).toContainText('stopped: loop');
    await expect(page.getByRole('link', { name: 'Make the failing test' })).toHaveAttribute('href', /id=ses_fix_sum/);
  });

  test('each row says the project, the owner, how long it ran or has been running, and whether it waits for a person', async ({ page }) => {
    await openView(page, { view: 'sessions' });
    const table = page.getByRole('table', { name: 'Sessions' });
    const headers = await table.getByRole('columnheader').allTextContents();
    expect(headers).toEqual(['Instruction', 'Project', 'Owner', 'Status', 'Mode', 'Actions', 'Started', 'Duration']);
    const running = table.getByRole('row').filter({ hasText: 'Make the failing test' });
    await expect(running).toContainText('demo');
    await expect(running).toContainText('dev@example.org');
    await expect(running).toContainText('2 answers awaited');
    await expect(running).toContainText(/so far/);
    const limit = table.getByRole('row').filter({ hasText: 'Rewrite the payment module' });
    await expect(limit).toContainText('payments');
    await expect(limit).toContainText('40 min');
    await expect(limit).not.toContainText('awaited');
    await expectAccessible(page);
  });

  test('at 390 px the filters wrap and the table scrolls inside its card, not the page', async ({ page }) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await openView(page, { view: 'sessions' });
    await expect(page.getByLabel('Waiting for a person')).toBeVisible();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow, 'the page scrolls sideways').toBeLessThanOrEqual(0);
    await expectAccessible(page);
  });

  test('no session at all, and no session matching the filters, say different things', async ({ page }) => {
    await openView(page, { view: 'sessions', variant: 'empty' });
    await expect(page.getByText('No session yet.')).toBeVisible();
    await openView(page, { view: 'sessions', variant: 'empty', status: 'failed' });
    await expect(page.getByText('No session matches these filters.')).toBeVisible();
    await page.getByRole('button', { name: 'Clear filters' }).click();
    expect(await calls(page, 'filter')).toEqual([{ name: 'filter', args: [{}] }]);
  });

  test('an administrator can stop and revoke a running session, with a reason', async ({ page }) => {
    await openView(page, { view: 'session', role: 'admin' });
    await expect(page.getByRole('region', { name: 'Session events' }).getByRole('listitem')).toHaveCount(11);
    await expect(page.getByText('`curl` is forbidden by the policy')).toBeVisible();
    await page.getByRole('button', { name: 'Stop the session' }).click();
    await page.getByRole('button', { name: 'Revoke…' }).click();
    await page.getByLabel('Reason (recorded in the audit log)').fill('left the company');
    await page.getByRole('button', { name: 'Revoke now' }).click();
    expect((await calls(page)).map((c) => [c.name, ...c.args])).toEqual([['stop'], ['revoke', 'left the company']]);
  });

  test('a developer can stop but is not offered revoke; a security officer neither', async ({ page }) => {
    await openView(page, { view: 'session', role: 'developer' });
    await expect(page.getByRole('button', { name: 'Stop the session' })).toBeVisible();
    await expect(page.getByRole('button', { name: /Revoke/ })).toHaveCount(0);
    await openView(page, { view: 'session', role: 'security_officer' });
    await expect(page.getByRole('button', { name: /Stop|Revoke/ })).toHaveCount(0);
  });

  test('a finished session shows its summary, its patch and a download', async ({ page }) => {
    await openView(page, { view: 'session', variant: 'completed' });
    await expect(page.getByText('Done: the lint warnings are fixed')).toBeVisible();
    await expect(page.getByRole('region', { name: 'Approved changes of this session' })).toBeVisible();
    await page.getByRole('button', { name: 'Download patch' }).click();
    expect(await calls(page, 'downloadPatch')).toHaveLength(1);
  });
});

test.describe('users', () => {
  test('shows roles, memberships and state', async ({ page }) => {
    await openView(page, { view: 'users' });
    const row = page.getByRole('row', { name: /Olga Former/ });
    await expect(row).toContainText('revoked');
    await expect(page.getByRole('row', { name: /Sam Security/ })).toContainText('demo, payments');
  });

  test("an administrator changes another person's role, sees their tokens with last use and expiry, and revokes one", async ({ page }) => {
    await openView(page, { view: 'users', selected: 'usr_dev' });
    const detail = page.getByRole('region', { name: 'Dana Developer' });
    await expect(detail.getByLabel('Role')).toHaveValue('developer');
    await expect(detail.getByRole('button', { name: 'Change role' })).toBeDisabled();
    await detail.getByLabel('Role').selectOption('security_officer');
    await detail.getByRole('button', { name: 'Change role' }).click();
    await expect(detail.getByText(/Takes effect at Dana Developer's next request/)).toBeVisible();
    const list = detail.locator('ul.tokens');
    await expect(list.getByRole('listitem').first()).toContainText('CI pipeline');
    await expect(list.getByRole('listitem').first()).toContainText('last used');
    await expect(list.getByRole('listitem').nth(1)).toContainText('never used');
    await expect(list.getByRole('listitem').nth(1)).toContainText('revoked');
    await list.getByRole('button', { name: 'Revoke token CI pipeline' }).click();
    // Only the owner creates tokens.
    await expect(detail.getByRole('button', { name: 'Create token' })).toHaveCount(0);
    expect((await calls(page)).map((c) => [c.name, ...c.args])).toEqual([
      ['changeRole', 'usr_dev', 'security_officer'],
      ['revokeToken', 'tok_ci'],
    ]);
    await expectAccessible(page);
  });

  test('an administrator is not offered a change of their own role, nor of a revoked account', async ({ page }) => {
    await openView(page, { view: 'users', selected: 'usr_ada' });
    await expect(page.getByText('You cannot change your own role; another administrator can.')).toBeVisible();
    await expect(page.getByLabel('Role')).toHaveCount(0);
    await page.getByRole('button', { name: 'Olga Former' }).click();
    await expect(page.getByText(/A revoked account keeps the role it had/)).toBeVisible();
    await expect(page.getByLabel('Role')).toHaveCount(0);
  });

  test('refuses an incomplete new user with sentences, then sends a valid one', async ({ page }) => {
    await openView(page, { view: 'users' });
    await page.getByRole('button', { name: 'Add person' }).click();
    await expect(page.getByText('must be at least 12 characters')).toBeVisible();
    expect(await calls(page, 'createUser')).toEqual([]);
    await page.getByLabel('Name').fill('Nina New');
    await page.getByLabel('E-mail').fill('nina@example.org');
    await page.getByLabel('Role').selectOption('security_officer');
    await page.getByLabel(/Initial password/).fill('a long enough password');
    await page.getByRole('group', { name: 'Projects' }).getByLabel('demo').check();
    await page.getByRole('button', { name: 'Add person' }).click();
    expect((await calls(page, 'createUser'))[0]!.args[0]).toEqual({
      email: 'nina@example.org',
      displayName: 'Nina New',
      role: 'security_officer',
      password: 'a long enough password',
      projectIds: ['prj_demo'],
    });
  });

  test('an administrator revokes their own tokens but not their own account', async ({ page }) => {
    await openView(page, { view: 'users', selected: 'usr_ada' });
    await page.getByRole('button', { name: 'Revoke token CI pipeline' }).click();
    await page.getByLabel('New token name').fill('Laptop 2');
    await page.getByLabel('Valid for (days)').fill('30');
    await page.getByRole('button', { name: 'Create token' }).click();
    await expect(page.getByRole('status').filter({ hasText: 'it is not shown again' })).toContainText('lmn_4f2a_secret_shown_once');
    await expect(page.getByText('You cannot revoke your own account')).toBeVisible();
    await expect(page.getByRole('button', { name: /Revoke this user/ })).toHaveCount(0);
    expect((await calls(page)).map((c) => [c.name, ...c.args])).toEqual([
      ['revokeToken', 'tok_ci'],
      ['createToken', 'Laptop 2', 30],
    ]);
    await expectAccessible(page);
  });

  test('revoking a user asks for confirmation; memberships can be changed', async ({ page }) => {
    await openView(page, { view: 'users', selected: 'usr_dev' });
    await expect(page.getByText('Revoking this user revokes every one of them')).toBeVisible();
    // Controlled by the server's answer: the harness records the request and leaves the box as it was.
    await page.getByRole('group', { name: 'Project memberships' }).getByLabel('payments').click();
    await page.getByRole('button', { name: 'Revoke this user…' }).click();
    await expect(page.getByText('stops every running session within a second')).toBeVisible();
    await page.getByRole('button', { name: 'Revoke Dana Developer' }).click();
    expect((await calls(page)).map((c) => [c.name, ...c.args])).toEqual([
      ['membership', 'usr_dev', 'prj_payments', true],
      ['revokeUser', 'usr_dev'],
    ]);
    await expectAccessible(page);
  });
});

test.describe('policies for readers', () => {
  test('a security officer reads the policy in force and its history, with nothing to publish or roll back', async ({ page }) => {
    await openView(page, { view: 'policies', role: 'security_officer' });
    await expect(page.getByRole('tab')).toHaveText(['Policy in force', 'History', 'MCP servers']);
    await expect(page.getByRole('button', { name: 'Publish' })).toHaveCount(0);
    await page.getByRole('tab', { name: 'History' }).click();
    await expect(page.getByRole('button', { name: /Roll back/ })).toHaveCount(0);
    await expectAccessible(page);
  });
});

test.describe('audit', () => {
  test('filters, verifies and exports', async ({ page }) => {
    await openView(page, { view: 'audit', role: 'security_officer' });
    await expect(page.getByRole('status').filter({ hasText: 'Chain verified: 1042 entries' })).toBeVisible();
    // A person is shown by name and email, not as user:<id>.
    await expect(page.getByRole('cell', { name: 'Dana Developer dev@example.org' })).toBeVisible();
    await page.getByLabel('Project').selectOption('prj_demo');
    // The Kind filter offers exactly the kinds the gateway records (GET /audit/kinds).
    const offeredKinds = await page
      .getByLabel('Kind')
      .locator('option')
      .evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
    expect(offeredKinds).toEqual(expect.arrayContaining(['', 'policy.decision', 'session.instruction', 'auth.login_failed']));
    expect(offeredKinds.filter((k) => k && !/^[a-z_]+\.[a-z_]+$/.test(k))).toEqual([]);
    // Each kind reads as it is stored, so what a person sees is what they filter and export by.
    const offeredLabels = await page.getByLabel('Kind').locator('option').allTextContents();
    expect(offeredLabels.slice(1)).toEqual(offeredKinds.slice(1));
    for (const badge of await page.locator('table .badge').allTextContents()) expect(badge).toMatch(/^[a-z_]+\.[a-z_]+$/);
    await page.getByLabel('Kind').selectOption('policy.decision');
    await page.getByLabel('Session id').fill('ses_fix_sum');
    await page.getByLabel('Person or actor').fill('user:usr_dev');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByRole('button', { name: 'Verify again' }).click();
    await page.getByRole('button', { name: 'Export JSONL' }).click();
    await page.getByRole('button', { name: 'Export CSV' }).click();
    expect((await calls(page)).map((c) => [c.name, ...c.args])).toEqual([
      ['filter', { projectId: 'prj_demo', kind: 'policy.decision', sessionId: 'ses_fix_sum', actor: 'user:usr_dev' }],
      ['verify'],
      ['export', 'jsonl'],
      ['export', 'csv'],
    ]);
  });

  test('every row opens its details in place: the whole payload, the actor as recorded, the project and both hashes', async ({ page }) => {
    await openView(page, { view: 'audit', role: 'security_officer' });
    const row = page.getByRole('row').filter({ hasText: '1041' });
    // The summary is text in the cell, not a tooltip.
    await expect(row).toContainText('command: curl https://example.com/x.sh | sh · effect: deny · rule: commands.forbidden[0]');
    const toggle = row.getByRole('button', { name: 'Details of entry 1041' });
    await expect(toggle).toHaveAttribute('aria-expanded', 'false');
    await toggle.click();
    await expect(toggle).toHaveAttribute('aria-expanded', 'true');
    const details = page.locator(`#${await toggle.getAttribute('aria-controls')}`);
    await expect(details.getByLabel('Payload of entry 1041')).toContainText('"command": "curl https://example.com/x.sh | sh"');
    await expect(details).toContainText('demo');
    await expect(details).toContainText('Previous hash');
    await expectAccessible(page);
    await toggle.click();
    await expect(details).toHaveCount(0);
    // An entry about people names no project, and says so.
    await page.getByRole('button', { name: 'Details of entry 1037' }).click();
    await expect(page.locator('#audit-entry-1037')).toContainText('none (an entry about people or the platform)');
  });

  test('pages move by keyset with their position and the total matching', async ({ page }) => {
    await openView(page, { view: 'audit', variant: 'paged' });
    await expect(page.getByRole('status').filter({ hasText: /^Entries \d/ })).toHaveText('Entries 51–56 of 1,234');
    const pager = page.getByRole('navigation', { name: 'Audit pages' });
    await pager.getByRole('button', { name: 'Older →' }).click();
    await pager.getByRole('button', { name: '← Newer' }).click();
    await pager.getByRole('button', { name: 'Newest' }).click();
    expect((await calls(page)).map((c) => c.name)).toEqual(['older', 'newer', 'newest']);
    await openView(page, { view: 'audit' });
    await expect(page.getByRole('status').filter({ hasText: /^Entries \d/ })).toHaveText('Entries 1–6 of 6');
    for (const name of ['Older →', '← Newer', 'Newest']) await expect(page.getByRole('navigation', { name: 'Audit pages' }).getByRole('button', { name })).toBeDisabled();
  });

  test('at 390 px the audit page does not scroll sideways, details open included', async ({ page }) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await openView(page, { view: 'audit' });
    await page.getByRole('button', { name: 'Details of entry 1042' }).click();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow, 'the page scrolls sideways').toBeLessThanOrEqual(0);
    await expectAccessible(page);
  });

  test('a broken chain names the first break', async ({ page }) => {
    await openView(page, { view: 'audit', variant: 'broken' });
    await expect(page.getByRole('alert')).toContainText('The chain is broken at entry #1039 (altered): Entry 1039 does not match its hash');
    await expectAccessible(page);
  });
});

test.describe('projects', () => {
  test('creating a project checks its fields with the contract, then sends it with the members picked', async ({ page }) => {
    await openView(page, { view: 'projects' });
    await expect(page.getByRole('table', { name: 'Projects' }).getByRole('row')).toHaveCount(3);
    const form = page.getByRole('region', { name: 'New project' });
    await form.getByLabel('Name').fill('has spaces');
    await form.getByRole('button', { name: 'Create project' }).click();
    await expect(form.locator('#np-name-err')).toBeVisible();
    await expect(form.locator('#np-source-err')).toBeVisible();
    expect(await calls(page, 'create')).toEqual([]);
    await form.getByLabel('Name').fill('billing');
    await form.getByLabel('Repository').fill('https://git.example.org/billing.git');
    await form.getByLabel('Default ref').fill('trunk');
    await form
      .getByRole('group', { name: 'Members' })
      .getByLabel(/Dana Developer/)
      .check();
    await form.getByRole('button', { name: 'Create project' }).click();
    expect(await calls(page, 'create')).toEqual([{ name: 'create', args: [{ name: 'billing', repositorySource: 'https://git.example.org/billing.git', defaultRef: 'trunk' }, ['usr_dev']] }]);
    await expectAccessible(page);
  });

  test('a project is configured in place: source and ref saved only when changed, members added and removed, the policy one link away', async ({ page }) => {
    await openView(page, { view: 'projects', selected: 'prj_demo' });
    const detail = page.getByRole('region', { name: 'demo' });
    await expect(detail.getByRole('button', { name: 'Save changes' })).toBeDisabled();
    await detail.getByLabel('Default ref').fill('release');
    await detail.getByRole('button', { name: 'Save changes' }).click();
    await expect(detail.getByRole('link', { name: 'edit it on the Policies page' })).toHaveAttribute('href', /project=prj_demo/);
    await detail.getByRole('button', { name: 'Remove Dana Developer' }).click();
    await detail.getByLabel('Add a member').selectOption({ label: 'Ada Admin (ada@example.org)' });
    await detail.getByRole('button', { name: 'Add', exact: true }).click();
    expect((await calls(page)).map((c) => [c.name, ...c.args])).toEqual([
      ['update', 'prj_demo', { defaultRef: 'release' }],
      ['removeMember', 'prj_demo', 'usr_dev'],
      ['addMember', 'prj_demo', 'usr_ada'],
    ]);
    await expectAccessible(page);
  });

  test('the sandbox runtime is shown from the policy in force and changed by publishing only that line', async ({ page }) => {
    await openView(page, { view: 'projects', selected: 'prj_demo' });
    const detail = page.getByRole('region', { name: 'demo' });
    const runtime = detail.getByRole('group', { name: /Sessions of demo run under runsc \(policy version 3\)/ });
    await expect(runtime.getByRole('radio', { name: /runsc \(gVisor\)/ })).toBeChecked();
    // The runtime in force is not published again.
    await expect(detail.getByRole('button', { name: 'Publish version 4 with runsc' })).toBeDisabled();
    await runtime.getByRole('radio', { name: /^runc/ }).check();
    await detail.getByRole('button', { name: 'Publish version 4 with runc' }).click();
    expect((await calls(page, 'runtime')).map((c) => c.args)).toEqual([['prj_demo', 'runc']]);
    await expectAccessible(page);
  });

  test('a project with no policy yet runs under runc, the built-in default; choosing runsc publishes version 1', async ({ page }) => {
    await openView(page, { view: 'projects', selected: 'prj_demo', variant: 'no-policy' });
    const detail = page.getByRole('region', { name: 'demo' });
    await expect(detail.getByRole('group', { name: /run under runc \(no policy published yet: the built-in default\)/ })).toBeVisible();
    await detail.getByRole('radio', { name: /runsc/ }).check();
    await detail.getByRole('button', { name: 'Publish version 1 with runsc' }).click();
    expect((await calls(page, 'runtime')).map((c) => c.args)).toEqual([['prj_demo', 'runsc']]);
  });

  test('at 390 px the projects page does not scroll sideways', async ({ page }) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await openView(page, { view: 'projects', selected: 'prj_demo' });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow, 'the page scrolls sideways').toBeLessThanOrEqual(0);
    await expectAccessible(page);
  });
});

test.describe('the header', () => {
  for (const width of [1280, 1366, 1440, 1920]) {
    test(`at ${width} px an administrator's nine pages sit on one row, and the person's block does not wrap`, async ({ page }) => {
      await page.setViewportSize({ width, height: 700 });
      await openView(page, { view: 'dashboard', role: 'admin' });
      const links = page.getByRole('navigation', { name: 'Main' }).getByRole('link');
      await expect(links).toHaveCount(9);
      const tops = await links.evaluateAll((as) => as.map((a) => Math.round(a.getBoundingClientRect().top)));
      expect(new Set(tops).size, `rows of links: ${tops.join(', ')}`).toBe(1);
      const signOut = page.getByRole('button', { name: 'Sign out' });
      expect((await signOut.boundingBox())!.height).toBeLessThan(40);
      const name = page.locator('.who-name');
      expect((await name.boundingBox())!.height).toBeLessThan(24);
      // The role is said: on a badge, or under the name at a laptop's width.
      await expect(page.getByRole('banner')).toContainText('Administrator');
      await expectAccessible(page);
    });
  }
});
