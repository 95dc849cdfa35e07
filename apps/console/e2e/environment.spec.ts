import { expect, test, type Page, type Route } from '@playwright/test';
import type { EnvironmentStatus } from '@lemniscate/contracts';
import * as f from '../harness/fixtures';
import { calls, expectAccessible, openView } from './helpers';

/*
 * A project's environment page in the real application (router, queries, API client, polling)
 * against a gateway simulated at the network boundary with the contracts' shapes.
 */
type Role = 'admin' | 'developer' | 'security_officer';
type Handler = (route: Route, url: URL) => unknown;
type Write = { method: string; path: string; csrf: string | undefined; body: unknown };

const ENV = '/projects/prj_demo/environment';

async function gateway(page: Page, role: Role, handlers: Record<string, Handler>) {
  const user = { admin: f.users[0]!, developer: f.users[1]!, security_officer: f.users[2]! }[role];
  const writes: Write[] = [];
  const reads: string[] = [];
  await page.route('**/api/v1/**', async (route) => {
    const req = route.request();
    const url = new URL(req.url());
    const path = url.pathname.replace('/api/v1', '');
    const key = `${req.method()} ${path}`;
    if (req.method() === 'GET') reads.push(`${path}${url.search}`);
    else writes.push({ method: req.method(), path, csrf: req.headers()['x-csrf-token'], body: req.postDataJSON() as unknown });
    const handler = Object.entries(handlers).find(([k]) => new RegExp(`^${k}$`).test(key))?.[1];
    if (handler) return handler(route, url);
    if (key === 'GET /auth/me') return route.fulfill({ json: { user, csrfToken: 'csrf-1', via: 'cookie' } });
    if (key === 'GET /projects') return route.fulfill({ json: f.projects });
    if (key === 'GET /approvals') return route.fulfill({ json: [] });
    return route.fulfill({ status: 404, json: { code: 'route_not_found', message: 'There is no such route on this gateway.', requestId: 'r404' } });
  });
  await page.routeWebSocket('**/api/v1/events', () => {
    // Accepts the connection and stays silent: the environment page polls.
  });
  return { writes, reads };
}

/** The log route of a finished job: all of `text` from the offset asked, complete. */
const finishedLog = (jobId: string, text: string) => (route: Route, url: URL) => route.fulfill({ json: f.environmentLogFrom(jobId, text, Number(url.searchParams.get('offset') ?? 0), true) });

const logOf = (jobId: string) => `GET ${ENV}/jobs/${jobId}/log`;
/** The state in words: the heading of the banner at the top of the page. */
const heading = (page: Page) => page.locator('#env-state-title');
const logBox = (page: Page) => page.getByRole('region', { name: 'Log' });

test('ready: the state in words, what it was prepared from, the latest job and its log, reached from the navigation', async ({ page }) => {
  const readyLog = f.environmentLogParts.join('');
  const gw = await gateway(page, 'admin', {
    [`GET ${ENV}`]: (route) => route.fulfill({ json: f.environmentReady }),
    [logOf('envjob_7c1d')]: finishedLog('envjob_7c1d', readyLog),
    'GET /projects/prj_payments/environment': (route) => route.fulfill({ json: f.environmentBase }),
  });
  await page.goto('/');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Environment' }).click();
  await expect(page).toHaveURL(/\/projects\/prj_demo\/environment$/);
  await expect(page.getByRole('link', { name: 'Environment' })).toHaveAttribute('aria-current', 'page');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Environment');
  await expect(heading(page)).toHaveText('Ready — sessions start from this environment');
  await expect(page.getByText(f.environmentReady.message)).toBeVisible();

  const definition = page.getByRole('region', { name: 'Definition' });
  await expect(definition).toContainText('main');
  await expect(definition).toContainText('4f1c2a9e7b3d');
  await expect(definition).not.toContainText(f.environmentReady.commit!);
  await expect(definition).toContainText('sha256:9b2e41c7d05a');
  await expect(definition).toContainText('built from .devcontainer/Dockerfile');
  await expect(definition.getByRole('table', { name: 'Set-up commands, in the order they run' }).getByRole('row')).toHaveText([
    /Step\s*Command/,
    /1\s*npm ci/,
    /2\s*pip install -r requirements-dev.txt/,
  ]);
  await expect(definition.getByRole('list', { name: 'Not applied from the devcontainer' }).getByRole('listitem')).toHaveText(f.environmentReady.devcontainer!.warnings);

  const job = page.getByRole('region', { name: 'Latest preparation' });
  await expect(job.getByRole('progressbar', { name: '5 of 5: done' })).toHaveAttribute('value', '5');
  await expect(job).toContainText('succeeded');
  await expect(job).toContainText('2 min 15 s');
  await expect(job).toContainText(f.environmentReady.job!.message!);
  await expect(logBox(page)).toContainText('[done] prepared in 2 min 15 s');
  // Terminal colours are removed, not shown as codes.
  await expect(logBox(page)).toContainText('\nfound 0 vulnerabilities\n');
  // The finished log is read once from the start, then once more to see that nothing follows.
  const bytes = new TextEncoder().encode(readyLog).length;
  await expect.poll(() => gw.reads.filter((r) => r.includes('/log'))).toEqual([`${ENV}/jobs/envjob_7c1d/log?offset=0`, `${ENV}/jobs/envjob_7c1d/log?offset=${bytes}`]);
  await expect(page.getByRole('button', { name: 'Prepare again' })).toBeVisible();
  await expectAccessible(page);

  // The project selector opens another project's environment.
  await page.getByLabel('Project').selectOption('prj_payments');
  await expect(page).toHaveURL(/\/projects\/prj_payments\/environment$/);
  await expect(heading(page)).toHaveText('No devcontainer — sessions use the standard sandbox image');
  expect(gw.writes).toEqual([]);
});

test('preparing: progress and a log that grow across polls until the job is over, then the state turns ready', async ({ page }) => {
  const parts = f.environmentLogParts;
  const jobId = 'envjob_8a2f';
  let written = 1; // parts of the log the job has written; the test lets it write the next one
  const status = (): EnvironmentStatus =>
    written < parts.length
      ? { ...f.environmentPreparing, job: { ...f.environmentPreparing.job!, progress: { done: written, total: parts.length, label: `step ${written + 1}` } } }
      : { ...f.environmentReady, job: { ...f.environmentReady.job!, jobId, progress: { done: parts.length, total: parts.length, label: 'done' } } };
  let statusReads = 0;
  const gw = await gateway(page, 'developer', {
    [`GET ${ENV}`]: (route) => {
      statusReads += 1;
      return route.fulfill({ json: status() });
    },
    [logOf(jobId)]: (route, url) => route.fulfill({ json: f.environmentLogFrom(jobId, parts.slice(0, written).join(''), Number(url.searchParams.get('offset')), written === parts.length) }),
  });
  const lastLine = (part: string) =>
    part
      .trimEnd()
      .split('\n')
      .at(-1)!
      .replace(/\u001b\[\d+m/g, '');
  await page.goto(ENV);
  const job = page.getByRole('region', { name: 'Latest preparation' });
  await expect(heading(page)).toHaveText('Being prepared');
  await expect(job).toContainText('Following it as it runs');
  await expect(job.locator('#env-progress-label')).toHaveAttribute('aria-live', 'polite');
  await expect(page.getByRole('button', { name: /Prepare/ })).toHaveCount(0);
  await expect(job.getByRole('progressbar', { name: '1 of 5: step 2' })).toBeVisible();
  await expect(logBox(page)).toContainText(lastLine(parts[0]!));
  await expect(logBox(page)).not.toContainText(lastLine(parts[1]!));

  // Each part the job writes appears at the end of the log, and the progress follows.
  for (let i = 1; i < parts.length - 1; i++) {
    written = i + 1;
    await expect(logBox(page)).toContainText(lastLine(parts[i]!));
    await expect(job.getByRole('progressbar', { name: `${i + 1} of 5: step ${i + 2}` })).toBeVisible();
    await expect(heading(page)).toHaveText('Being prepared');
  }
  // The job writes its last part and is over: the state turns ready.
  written = parts.length;
  await expect(logBox(page)).toContainText('[done] prepared in 2 min 15 s');
  await expect(heading(page)).toHaveText('Ready — sessions start from this environment');
  await expect(job.getByRole('progressbar', { name: '5 of 5: done' })).toBeVisible();
  await expect(job).toContainText('Finished: succeeded');

  // Each read asked from where the previous one ended: the text is whole, nothing is repeated, and
  // the last read asked from the end and found nothing more.
  expect(await logBox(page).textContent()).toBe(parts.join('').replace(/\u001b\[\d+m/g, ''));
  const ends = parts.map((_, i) => new TextEncoder().encode(parts.slice(0, i + 1).join('')).length);
  const logOffsets = () => gw.reads.filter((r) => r.includes('/log')).map((r) => Number(new URL(r, 'http://x').searchParams.get('offset')));
  await expect.poll(() => logOffsets().at(-1)).toBe(ends.at(-1));
  const offsets = logOffsets();
  expect(offsets[0]).toBe(0);
  expect(offsets.every((o, i) => i === 0 || o >= offsets[i - 1]!)).toBe(true);
  expect(offsets.every((o) => o === 0 || ends.includes(o))).toBe(true);
  // The status was read again while the job ran.
  expect(statusReads).toBeGreaterThanOrEqual(parts.length);
  expect(gw.writes).toEqual([]);
});

test('failed: the message, the warnings and the log of the failed job; Prepare again is offered', async ({ page }) => {
  await gateway(page, 'admin', {
    [`GET ${ENV}`]: (route) => route.fulfill({ json: f.environmentFailed }),
    [logOf('envjob_5e9b')]: finishedLog('envjob_5e9b', f.environmentFailedLog),
  });
  await page.goto(ENV);
  await expect(heading(page)).toHaveText('Preparation failed');
  await expect(page.getByText(f.environmentFailed.message)).toBeVisible();
  const job = page.getByRole('region', { name: 'Latest preparation' });
  await expect(job).toContainText('No matching distribution found for internal-lib==2.4.0 (the mirror');
  await expect(job.getByRole('progressbar', { name: '3 of 5: pip install -r requirements-dev.txt failed' })).toBeVisible();
  await expect(job.getByRole('list', { name: 'Warnings' })).toContainText('The npm mirror answered slowly');
  await expect(logBox(page)).toContainText('[setup] exited with status 1');
  await expect(page.getByRole('button', { name: 'Prepare again' })).toBeVisible();
});

test('base: no devcontainer, nothing to prepare and no log', async ({ page }) => {
  const gw = await gateway(page, 'admin', { [`GET ${ENV}`]: (route) => route.fulfill({ json: f.environmentBase }) });
  await page.goto(ENV);
  await expect(heading(page)).toHaveText('No devcontainer — sessions use the standard sandbox image');
  const definition = page.getByRole('region', { name: 'Definition' });
  await expect(definition).toContainText('the standard sandbox image');
  await expect(page.getByText('Nothing to prepare: the project has no devcontainer.')).toBeVisible();
  await expect(page.getByRole('button', { name: /Prepare/ })).toHaveCount(0);
  await expect(logBox(page)).toHaveCount(0);
  expect(gw.reads.filter((r) => r.includes('/log'))).toEqual([]);
});

test('a developer presses Prepare: the request carries the CSRF token, and the page follows the preparation it started', async ({ page }) => {
  let current: EnvironmentStatus = f.environmentNotPrepared;
  const started: EnvironmentStatus = {
    ...f.environmentNotPrepared,
    state: 'preparing',
    job: { ...f.environmentPreparing.job!, jobId: 'envjob_new', progress: { done: 0, total: 4, label: 'queued' }, phase: 'queued' },
    message: 'A session started now waits until the preparation is over.',
  };
  const gw = await gateway(page, 'developer', {
    [`GET ${ENV}`]: (route) => route.fulfill({ json: current }),
    [`POST ${ENV}/prepare`]: (route) => {
      current = started;
      return route.fulfill({ status: 202, json: started });
    },
    [logOf('envjob_new')]: (route, url) => route.fulfill({ json: f.environmentLogFrom('envjob_new', '[queued] waiting for a worker\n', Number(url.searchParams.get('offset')), false) }),
  });
  await page.goto(ENV);
  await expect(heading(page)).toHaveText('Not prepared for the current devcontainer and lock files');
  await expect(page.getByText('These inputs have not been prepared yet.')).toBeVisible();
  const prepare = page.getByRole('button', { name: 'Prepare', exact: true });
  await expect(prepare).toHaveAccessibleDescription(/package mirrors only/);
  await prepare.click();
  await expect.poll(() => gw.writes).toEqual([{ method: 'POST', path: `${ENV}/prepare`, csrf: 'csrf-1', body: { force: false } }]);
  await expect(heading(page)).toHaveText('Being prepared');
  await expect(page.getByRole('status').filter({ hasText: 'Preparation started. This page follows it as it runs.' })).toBeVisible();
  await expect(page.getByRole('progressbar', { name: '0 of 4: queued' })).toBeVisible();
  await expect(logBox(page)).toContainText('[queued] waiting for a worker');
  await expect(page.getByRole('button', { name: /Prepare/ })).toHaveCount(0);
});

test('Prepare again on a ready environment asks the gateway to force it', async ({ page }) => {
  const gw = await gateway(page, 'admin', {
    [`GET ${ENV}`]: (route) => route.fulfill({ json: f.environmentReady }),
    [logOf('envjob_7c1d')]: finishedLog('envjob_7c1d', ''),
    [`POST ${ENV}/prepare`]: (route) => route.fulfill({ status: 202, json: f.environmentPreparing }),
    [logOf('envjob_8a2f')]: (route, url) => route.fulfill({ json: f.environmentLogFrom('envjob_8a2f', '', Number(url.searchParams.get('offset')), false) }),
  });
  await page.goto(ENV);
  await page.getByRole('button', { name: 'Prepare again' }).click();
  await expect.poll(() => gw.writes).toEqual([{ method: 'POST', path: `${ENV}/prepare`, csrf: 'csrf-1', body: { force: true } }]);
});

test('a security officer follows the environment but is offered no Prepare, and the page writes nothing', async ({ page }) => {
  const gw = await gateway(page, 'security_officer', {
    [`GET ${ENV}`]: (route) => route.fulfill({ json: f.environmentFailed }),
    [logOf('envjob_5e9b')]: finishedLog('envjob_5e9b', f.environmentFailedLog),
  });
  await page.goto('/');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Environment' }).click();
  await expect(heading(page)).toHaveText('Preparation failed');
  await expect(logBox(page)).toContainText('[setup] exited with status 1');
  await expect(page.getByText('Administrators and developers of this project prepare its environment')).toBeVisible();
  await expect(page.getByRole('button', { name: /Prepare/ })).toHaveCount(0);
  expect(gw.writes).toEqual([]);
});

for (const [status, code, message] of [
  [409, 'environment_busy', 'A preparation of these inputs is already running; wait for it to finish.'],
  [403, 'forbidden', 'Only administrators and developers of project demo may prepare its environment.'],
] as const) {
  test(`a ${status} refusal to prepare shows the gateway's sentence and request id`, async ({ page }) => {
    const gw = await gateway(page, 'developer', {
      [`GET ${ENV}`]: (route) => route.fulfill({ json: f.environmentNotPrepared }),
      [`POST ${ENV}/prepare`]: (route) => route.fulfill({ status, json: { code, message, requestId: `req_env${status}` } }),
    });
    await page.goto(ENV);
    await page.getByRole('button', { name: 'Prepare', exact: true }).click();
    const alert = page.getByRole('alert');
    await expect(alert).toContainText(message);
    await expect(alert).toContainText(`req_env${status}`);
    await expect(alert).toContainText(code);
    await expect(heading(page)).toHaveText('Not prepared for the current devcontainer and lock files');
    expect(gw.writes).toHaveLength(1);
  });
}

test("an error reading the environment shows the gateway's sentence and request id", async ({ page }) => {
  await gateway(page, 'admin', {
    [`GET ${ENV}`]: (route) =>
      route.fulfill({ status: 503, json: { code: 'exec_host_unavailable', message: 'No exec-host is answering; the environment cannot be read right now.', requestId: 'req_env503' } }),
  });
  await page.goto(ENV);
  const alert = page.getByRole('alert');
  await expect(alert).toContainText('No exec-host is answering; the environment cannot be read right now.');
  await expect(alert).toContainText('req_env503');
});

test('at 390 px wide the page fits the screen and its log scrolls inside its box', async ({ page }) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await gateway(page, 'developer', {
    [`GET ${ENV}`]: (route) => route.fulfill({ json: f.environmentFailed }),
    [logOf('envjob_5e9b')]: finishedLog('envjob_5e9b', f.environmentFailedLog.repeat(8)),
  });
  await page.goto(ENV);
  await expect(logBox(page)).toContainText('[setup] exited with status 1');
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
  const box = await logBox(page).evaluate((el) => ({ scroll: el.scrollHeight, client: el.clientHeight, top: el.scrollTop }));
  expect(box.scroll).toBeGreaterThan(box.client);
  // The box shows the end of the log, where a preparation's last lines are.
  expect(box.top + box.client).toBeGreaterThanOrEqual(box.scroll - 2);
  await expectAccessible(page);
});

test.describe('the environment view with sample data', () => {
  for (const variant of ['', 'preparing', 'failed', 'not-prepared', 'base', 'prepare-error']) {
    test(`${variant || 'ready'}: accessible`, async ({ page }) => {
      await openView(page, { view: 'environment', variant });
      await expect(page.getByRole('heading', { level: 1 })).toHaveText('Environment');
      await expectAccessible(page);
    });
  }

  test('Prepare records the forced choice; a reader is offered nothing', async ({ page }) => {
    await openView(page, { view: 'environment', variant: 'failed', role: 'developer' });
    await page.getByRole('button', { name: 'Prepare again' }).click();
    expect((await calls(page, 'prepare')).map((c) => c.args)).toEqual([[true]]);
    await expect(page.getByRole('heading', { name: 'Being prepared' })).toBeVisible();
    await openView(page, { view: 'environment', variant: 'failed', role: 'security_officer' });
    await expect(page.getByRole('button', { name: /Prepare/ })).toHaveCount(0);
  });
});
