import { expect, test, type Page, type Route } from '@playwright/test';
import * as f from '../harness/fixtures';

/*
 * The real application (pages, queries, API client, router, live stream) against a gateway
 * simulated at the network boundary with the contracts' shapes.
 */
type Handler = (route: Route, url: URL) => unknown;

async function gateway(page: Page, role: 'admin' | 'developer' | 'security_officer', handlers: Record<string, Handler> = {}) {
  const user = { admin: f.users[0]!, developer: f.users[1]!, security_officer: f.users[2]! }[role];
  let signedIn = false;
  const writes: { method: string; path: string; csrf: string | undefined; body: unknown }[] = [];
  await page.route('**/api/v1/**', async (route) => {
    const url = new URL(route.request().url());
    const path = url.pathname.replace('/api/v1', '');
    const method = route.request().method();
    if (method !== 'GET') writes.push({ method, path, csrf: route.request().headers()['x-csrf-token'], body: route.request().postDataJSON() as unknown });
    const key = `${method} ${path}`;
    const handler = Object.entries(handlers).find(([k]) => new RegExp(`^${k}$`).test(key))?.[1];
    if (handler) return handler(route, url);
    if (key === 'POST /auth/login') {
      signedIn = true;
      return route.fulfill({ json: { user, csrfToken: 'csrf-1' } });
    }
    if (key === 'GET /auth/me')
      return signedIn
        ? route.fulfill({ json: { user, csrfToken: 'csrf-1', via: 'cookie' } })
        : route.fulfill({ status: 401, json: { code: 'unauthenticated', message: 'You need to sign in.', requestId: 'r0' } });
    if (key === 'GET /projects') return route.fulfill({ json: f.projects });
    if (key === 'GET /approvals') return route.fulfill({ json: f.approvals });
    if (key === 'GET /sessions') return route.fulfill({ json: f.sessions });
    if (/^GET \/sessions\/[^/]+\/tool-calls$/.test(key)) return route.fulfill({ json: [] });
    return route.fulfill({ status: 404, json: { code: 'route_not_found', message: 'There is no such route on this gateway.', requestId: 'r404' } });
  });
  await page.routeWebSocket('**/api/v1/events', () => {
    // Accepts the connection and stays silent unless a test takes it over.
  });
  return {
    writes,
    signIn: async () => {
      await page.goto('/');
      await page.getByLabel('E-mail').fill(user.email);
      await page.getByLabel('Password').fill('a password long enough');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect(page.getByRole('banner')).toContainText(user.displayName);
    },
  };
}

test('signing in shows who you are; writes carry the CSRF token from the sign-in', async ({ page }) => {
  const gw = await gateway(page, 'developer');
  await gw.signIn();
  await expect(page.getByRole('banner')).toContainText('Developer');
  expect(gw.writes[0]).toMatchObject({ method: 'POST', path: '/auth/login', body: { email: 'dev@example.org', password: 'a password long enough' } });
  await page.getByRole('link', { name: 'Approvals' }).click();
  await page.getByRole('button', { name: 'Approve', exact: true }).click();
  await expect.poll(() => gw.writes.find((w) => w.path === '/approvals/apr_1/approve')).toMatchObject({ csrf: 'csrf-1', body: { rememberCommand: false } });
});

test('a refused sign-in shows the server sentence', async ({ page }) => {
  await gateway(page, 'developer', {
    'POST /auth/login': (route) => route.fulfill({ status: 401, json: { code: 'invalid_credentials', message: 'This e-mail and password do not match an account.', requestId: 'r1' } }),
  });
  await page.goto('/');
  await page.getByLabel('E-mail').fill('dev@example.org');
  await page.getByLabel('Password').fill('wrong');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('alert')).toContainText('This e-mail and password do not match an account.');
  await expect(page.getByRole('alert')).toContainText('request r1');
});

test('a developer reads the policy in force but is offered nothing to publish, and writes nothing', async ({ page }) => {
  const gw = await gateway(page, 'developer', {
    'GET /projects/prj_demo/policy/versions': (route) => route.fulfill({ json: f.versions }),
    'GET /projects/prj_demo/policy/versions/\\d+': (route) => route.fulfill({ json: { ...f.versions[0], sourceText: f.policyText, document: {} } }),
  });
  await gw.signIn();
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Policies' }).click();
  await expect(page.getByRole('tab')).toHaveText(['Policy in force', 'History', 'MCP servers']);
  await expect(page.getByRole('button', { name: 'Publish' })).toHaveCount(0);
  await expect(page.getByText('only administrators publish or roll back')).toBeVisible();
  expect(gw.writes.filter((w) => w.path.includes('/policy'))).toEqual([]);
});

test('a sign-in that expires brings the sign-in page back', async ({ page }) => {
  let expired = false;
  const gw = await gateway(page, 'admin', {
    'GET /sessions': (route) =>
      expired ? route.fulfill({ status: 401, json: { code: 'unauthenticated', message: 'Your sign-in has expired.', requestId: 'r2' } }) : route.fulfill({ json: f.sessions }),
    'GET /auth/me': (route) =>
      expired
        ? route.fulfill({ status: 401, json: { code: 'unauthenticated', message: 'Your sign-in has expired.', requestId: 'r3' } })
        : route.fulfill({ json: { user: f.users[0], csrfToken: 'csrf-1', via: 'cookie' } }),
  });
  // Already signed in: the console opens on the dashboard.
  void gw;
  await page.goto('/');
  await expect(page.getByRole('banner')).toContainText('Ada Admin');
  expired = true;
  // Navigate inside the application (no reload), as following a link does.
  await page.evaluate(() => {
    history.pushState({}, '', '/sessions');
    dispatchEvent(new PopStateEvent('popstate'));
  });
  await expect(page.getByRole('button', { name: 'Sign in' })).toBeVisible();
  await expect(page.getByRole('alert')).toHaveText('You were signed out. Your sign-in has expired.');
});

test('a person whose account an administrator revoked is told so on the sign-in page; a first visit is told nothing', async ({ page }) => {
  let revoked = false;
  const revokedSentence = 'This account has been revoked by an administrator; ask one of them if you think it should not have been.';
  await gateway(page, 'developer', {
    'GET /approvals': (route) => (revoked ? route.fulfill({ status: 401, json: { code: 'unauthenticated', message: revokedSentence, requestId: 'r9' } }) : route.fulfill({ json: f.approvals })),
    'GET /sessions': (route) => (revoked ? route.fulfill({ status: 401, json: { code: 'unauthenticated', message: revokedSentence, requestId: 'r11' } }) : route.fulfill({ json: f.sessions })),
    'GET /auth/me': (route) =>
      revoked
        ? route.fulfill({ status: 401, json: { code: 'unauthenticated', message: revokedSentence, requestId: 'r10' } })
        : route.fulfill({ json: { user: f.users[1], csrfToken: 'csrf-1', via: 'cookie' } }),
  });
  await page.goto('/approvals');
  await expect(page.getByRole('banner')).toContainText('Dana Developer');
  revoked = true;
  // The next page the person opens asks the gateway, which refuses the revoked account.
  await page.evaluate(() => {
    history.pushState({}, '', '/sessions');
    dispatchEvent(new PopStateEvent('popstate'));
  });
  await expect(page.getByRole('button', { name: 'Sign in' })).toBeVisible();
  await expect(page.getByRole('alert')).toHaveText(`You were signed out. ${revokedSentence}`);

  // A first visit: the gateway's "You need to sign in" is not repeated as news.
  const fresh = await page.context().newPage();
  await gateway(fresh, 'developer');
  await fresh.goto('/');
  await expect(fresh.getByRole('button', { name: 'Sign in' })).toBeVisible();
  await expect(fresh.getByRole('alert')).toHaveCount(0);
});

test('an error from the gateway shows its sentence and request id on the page', async ({ page }) => {
  const gw = await gateway(page, 'admin', {
    'GET /sessions': (route) =>
      route.fulfill({ status: 503, json: { code: 'exec_host_unavailable', message: 'No exec-host is answering; sessions cannot be listed right now.', requestId: 'req_503' } }),
  });
  await gw.signIn();
  await page.getByRole('link', { name: 'Sessions', exact: true }).click();
  const alert = page.getByRole('alert');
  await expect(alert).toContainText('No exec-host is answering');
  await expect(alert).toContainText('req_503');
});

test('the dashboard shows the figures the gateway serves for the projects of the person signed in', async ({ page }) => {
  const asked: string[] = [];
  const gw = await gateway(page, 'admin', {
    'GET /stats/dashboard': (route, url) => {
      asked.push(url.search);
      return route.fulfill({ json: f.stats });
    },
  });
  await gw.signIn();
  await expect(page.locator('.big-number')).toHaveText(String(f.stats.pendingApprovals));
  await expect(page.getByRole('group', { name: /Sessions per day/ })).toBeVisible();
  expect(asked.length).toBeGreaterThan(0);
});

/** A gateway whose sessions list records each query it is asked. */
async function sessionsGateway(page: Page, role: 'admin' | 'developer') {
  const asked: URLSearchParams[] = [];
  const gw = await gateway(page, role, {
    'GET /sessions': (route, url) => {
      asked.push(url.searchParams);
      return route.fulfill({ json: f.sessions });
    },
    'GET /stats/dashboard': (route) => route.fulfill({ json: f.stats }),
  });
  const last = () => Object.fromEntries(asked.at(-1) ?? []);
  return { ...gw, asked, last };
}

test.describe('dashboard figures drill down to their sessions', () => {
  test('a project, a person, a day and the waiting sessions each open the sessions list filtered to them', async ({ page }) => {
    const gw = await sessionsGateway(page, 'admin');
    await gw.signIn();
    const byProject = page.getByRole('list', { name: 'Sessions by project' });
    await expect(byProject.getByRole('listitem')).toHaveCount(2);
    await byProject.getByRole('link', { name: 'payments' }).click();
    await expect(page).toHaveURL(/\/sessions\?projectId=prj_payments&from=/);
    await expect(page.getByRole('heading', { name: 'Sessions', level: 1 })).toBeVisible();
    await expect.poll(() => gw.last()).toMatchObject({ projectId: 'prj_payments' });
    await expect(page.getByText(/Showing sessions started from .*, in payments\./)).toBeVisible();
    await expect(page.getByLabel('Project')).toHaveValue('prj_payments');

    await page.getByRole('link', { name: 'Dashboard' }).click();
    await page.getByRole('list', { name: 'Sessions by person' }).getByRole('link', { name: 'dev@example.org' }).click();
    await expect.poll(() => gw.last()).toMatchObject({ userId: 'usr_dev' });
    await expect(page.getByLabel('Owner')).toHaveValue('usr_dev');
    await expect(page.getByText(/by dev@example\.org\./)).toBeVisible();

    await page.getByRole('link', { name: 'Dashboard' }).click();
    const day = f.stats.sessionsPerDay[3]!;
    await page.getByRole('link', { name: `${day.day}: ${day.count} sessions` }).click();
    await expect.poll(() => gw.last()).toMatchObject({ from: `${day.day}T00:00:00.000Z` });
    const to = gw.last().to!;
    expect(Date.parse(to) - Date.parse(`${day.day}T00:00:00Z`)).toBe(86_400_000);
    await expect(page.getByText(/Showing sessions started on /)).toBeVisible();

    await page.getByRole('link', { name: 'Dashboard' }).click();
    await page.getByRole('link', { name: 'Sessions waiting' }).click();
    await expect.poll(() => gw.last()).toMatchObject({ waiting: 'true' });
    await expect(page.getByLabel('Waiting for a person')).toBeChecked();
  });
});

test.describe('the sessions list filters on the server and keeps its filters in the address', () => {
  test('status, project, owner and waiting travel to the gateway; the address reopens the same list; Clear filters empties it', async ({ page }) => {
    const gw = await sessionsGateway(page, 'admin');
    await gw.signIn();
    await page.getByRole('link', { name: 'Sessions', exact: true }).click();
    await expect(page.getByRole('columnheader', { name: 'Owner' })).toBeVisible();
    await page.getByLabel('Status').selectOption('running');
    await page.getByLabel('Project').selectOption('prj_demo');
    await page.getByLabel('Owner').selectOption({ label: 'Me' });
    await page.getByLabel('Waiting for a person').check();
    await expect.poll(() => gw.last()).toEqual({ status: 'running', projectId: 'prj_demo', userId: 'usr_ada', waiting: 'true' });
    const address = page.url();
    expect(new URL(address).searchParams.get('waiting')).toBe('1');
    await page.goto(address);
    await expect(page.getByLabel('Status')).toHaveValue('running');
    await expect(page.getByLabel('Waiting for a person')).toBeChecked();
    await expect.poll(() => gw.last()).toEqual({ status: 'running', projectId: 'prj_demo', userId: 'usr_ada', waiting: 'true' });
    await page.getByRole('button', { name: 'Clear filters' }).click();
    await expect.poll(() => gw.last()).toEqual({});
    await expect(page.getByRole('button', { name: 'Clear filters' })).toHaveCount(0);
  });

  test('a date in the address that does not parse is dropped, not sent', async ({ page }) => {
    const gw = await sessionsGateway(page, 'admin');
    await gw.signIn();
    await page.goto('/sessions?from=yesterday&status=bogus&projectId=prj_demo');
    await expect.poll(() => gw.last()).toEqual({ projectId: 'prj_demo' });
  });

  test('a developer, who only sees their own sessions, is offered no owner column or filter', async ({ page }) => {
    const gw = await sessionsGateway(page, 'developer');
    await gw.signIn();
    await page.getByRole('link', { name: 'Sessions', exact: true }).click();
    await expect(page.getByRole('columnheader', { name: 'Project' })).toBeVisible();
    await expect(page.getByRole('columnheader', { name: 'Owner' })).toHaveCount(0);
    await expect(page.getByLabel('Owner')).toHaveCount(0);
  });
});

test('the approvals inbox follows the live stream', async ({ page }) => {
  let list = f.approvals.slice(0, 1);
  const gw = await gateway(page, 'developer', { 'GET /approvals': (route) => route.fulfill({ json: list }) });
  let push: ((msg: unknown) => void) | undefined;
  const subscribed: unknown[] = [];
  await page.routeWebSocket('**/api/v1/events', (ws) => {
    push = (msg) => ws.send(JSON.stringify(msg));
    ws.onMessage((m) => subscribed.push(JSON.parse(String(m))));
  });
  await gw.signIn();
  await page.getByRole('link', { name: 'Approvals' }).click();
  await expect(page.getByText('Live: new requests appear here')).toBeVisible();
  await expect.poll(() => subscribed).toContainEqual({ type: 'subscribe', projectId: 'prj_demo' });
  const items = page.getByRole('list', { name: 'Pending approvals' }).getByRole('listitem');
  await expect(items).toHaveCount(1);
  list = f.approvals;
  push!({ type: 'event', event: { seq: 7, type: 'approval_requested', sessionId: 'ses_fix_sum', projectId: 'prj_demo', at: new Date().toISOString(), approvalId: 'apr_3' } });
  await expect(items).toHaveCount(3);
});

test('the approvals inbox reads the list again once the live stream is subscribed, so a request made in between is not missed', async ({ page }) => {
  let list = f.approvals.slice(0, 1);
  const gw = await gateway(page, 'developer', { 'GET /approvals': (route) => route.fulfill({ json: list }) });
  let ack: (() => void) | undefined;
  await page.routeWebSocket('**/api/v1/events', (ws) => {
    ws.onMessage((m) => {
      const msg = JSON.parse(String(m)) as { projectId?: string };
      ack = () => ws.send(JSON.stringify({ type: 'subscribed', sessionId: null, projectId: msg.projectId ?? null, replayed: 0 }));
    });
  });
  await gw.signIn();
  await page.getByRole('link', { name: 'Approvals' }).click();
  const items = page.getByRole('list', { name: 'Pending approvals' }).getByRole('listitem');
  await expect(items).toHaveCount(1);
  // Two requests arrive after the list was read and before the subscription took effect: no event
  // announces them, only the subscription's acknowledgement.
  list = f.approvals;
  await expect.poll(() => ack !== undefined).toBe(true);
  ack!();
  await expect(items).toHaveCount(3);
});

test('the audit page reads 50 entries a page by keyset, counts what matches, and starts again from the newest when the filter changes', async ({ page }) => {
  const all = Array.from({ length: 120 }, (_, i) => ({ ...f.auditEntries[1]!, seq: 120 - i, hash: `h${120 - i}`, prevHash: `h${119 - i}` }));
  const asked: Record<string, string>[] = [];
  const counted: Record<string, string>[] = [];
  const gw = await gateway(page, 'security_officer', {
    'GET /audit': (route, url) => {
      const q = Object.fromEntries(url.searchParams);
      asked.push(q);
      const after = q.after ? Number(q.after) : Infinity;
      return route.fulfill({ json: all.filter((e) => e.seq < after).slice(0, Number(q.limit)) });
    },
    'GET /audit/count': (route, url) => {
      counted.push(Object.fromEntries(url.searchParams));
      return route.fulfill({ json: { count: all.length } });
    },
    'GET /audit/kinds': (route) => route.fulfill({ json: { kinds: ['policy.decision', 'session.instruction'] } }),
    'GET /audit/verify': (route) => route.fulfill({ json: f.verified }),
  });
  await gw.signIn();
  await page.getByRole('link', { name: 'Audit' }).click();
  const position = page.getByRole('status').filter({ hasText: /^Entries \d/ });
  await expect(position).toHaveText('Entries 1–50 of 120');
  expect(asked.at(-1)).toEqual({ limit: '51' });
  const older = page.getByRole('button', { name: 'Older →' });
  await older.click();
  await expect(position).toHaveText('Entries 51–100 of 120');
  expect(asked.at(-1)).toEqual({ limit: '51', after: '71' });
  await older.click();
  await expect(position).toHaveText('Entries 101–120 of 120');
  await expect(older).toBeDisabled();
  await page.getByRole('button', { name: '← Newer' }).click();
  await expect(position).toHaveText('Entries 51–100 of 120');
  await page.getByLabel('Kind').selectOption('policy.decision');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await expect(position).toHaveText('Entries 1–50 of 120');
  expect(asked.at(-1)).toEqual({ limit: '51', kind: 'policy.decision' });
  expect(counted.at(-1)).toEqual({ kind: 'policy.decision' });
});

test('an administrator creates a project with its members from the Projects page, then configures it', async ({ page }) => {
  const created = { id: 'prj_new', name: 'billing', repositorySource: '/srv/git/billing.git', defaultRef: 'main', createdAt: new Date().toISOString() };
  let list = [...f.projects];
  const gw = await gateway(page, 'admin', {
    'GET /projects': (route) => route.fulfill({ json: list }),
    'POST /projects': (route) => {
      list = [...list, created];
      return route.fulfill({ status: 201, json: created });
    },
    'POST /projects/prj_new/members': (route) => route.fulfill({ status: 201, json: { ok: true } }),
    'GET /projects/prj_new/members': (route) =>
      route.fulfill({ json: [{ userId: 'usr_dev', email: 'dev@example.org', displayName: 'Dana Developer', role: 'developer', addedAt: created.createdAt }] }),
    'POST /projects/prj_new': (route) => route.fulfill({ json: { ...created, defaultRef: 'release' } }),
    'GET /users': (route) => route.fulfill({ json: f.users }),
  });
  await gw.signIn();
  await page.getByRole('link', { name: 'Projects' }).click();
  const form = page.getByRole('region', { name: 'New project' });
  await form.getByLabel('Name').fill('billing');
  await form.getByLabel('Repository').fill('/srv/git/billing.git');
  await form
    .getByRole('group', { name: 'Members' })
    .getByLabel(/Dana Developer/)
    .check();
  await form.getByRole('button', { name: 'Create project' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Project billing was created with one member' })).toBeVisible();
  // The new project opens for configuration, its members read from the gateway.
  const detail = page.getByRole('region', { name: 'billing' });
  await expect(detail).toContainText('Dana Developer');
  await detail.getByLabel('Default ref').fill('release');
  await detail.getByRole('button', { name: 'Save changes' }).click();
  await expect(page.getByRole('status').filter({ hasText: 'Saved: billing starts sessions from /srv/git/billing.git at release.' })).toBeVisible();
  expect(gw.writes.filter((w) => w.path.startsWith('/projects')).map((w) => [w.method, w.path, w.body])).toEqual([
    ['POST', '/projects', { name: 'billing', repositorySource: '/srv/git/billing.git', defaultRef: 'main' }],
    ['POST', '/projects/prj_new/members', { userId: 'usr_dev' }],
    ['POST', '/projects/prj_new', { defaultRef: 'release' }],
  ]);
});

test('an unpublished draft is not lost without a word: switching project asks, and keeping it keeps it; leaving the page asks too', async ({ page }) => {
  const gw = await gateway(page, 'admin', {
    'GET /projects/[^/]+/policy/versions': (route) => route.fulfill({ json: f.versions }),
    'GET /projects/[^/]+/policy/versions/\\d+': (route) => route.fulfill({ json: { ...f.versions[0], sourceText: f.policyText, document: {} } }),
    'GET /projects/[^/]+/policy': (route) => route.fulfill({ json: { ...f.versions[0], sourceText: f.policyText, document: {} } }),
  });
  await gw.signIn();
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Policies' }).click();
  const free = page.getByLabel('Free commands (one per line)');
  await free.fill(`${await free.inputValue()}\nmake check`);
  await free.press('Tab');
  // Leaving the page while the draft is unpublished asks (the browser's own question).
  const leaving = () =>
    page.evaluate(() => {
      const e = new Event('beforeunload', { cancelable: true });
      window.dispatchEvent(e);
      return e.defaultPrevented;
    });
  await expect.poll(leaving).toBe(true);
  const asked: string[] = [];
  page.once('dialog', (d) => {
    asked.push(d.message());
    void d.dismiss();
  });
  await page.getByLabel('Project').selectOption('prj_payments');
  await expect.poll(() => asked).toEqual(['Your draft of this policy is not published. Switch project and discard it?']);
  // Dismissed: the same project and the draft stay.
  await expect(page.getByLabel('Project')).toHaveValue('prj_demo');
  await expect(free).toHaveValue(/make check/);
  expect(await leaving()).toBe(true);
  // Accepted: the project changes and the draft is gone.
  page.once('dialog', (d) => void d.accept());
  await page.getByLabel('Project').selectOption('prj_payments');
  await expect(page.getByLabel('Project')).toHaveValue('prj_payments');
  await expect(free).not.toHaveValue(/make check/);
  expect(await leaving()).toBe(false);
});
