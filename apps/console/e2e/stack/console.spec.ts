import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect, test } from '@playwright/test';
import { apiAs, credentials, demoProjectId, ROOT, shot, signIn } from './stack';

/*
 * The console against the whole stack (npm start): gateway, exec-host, sandbox and the scripted
 * model. Run with LEMNISCATE_STACK_URL=http://127.0.0.1:PORT; skipped otherwise.
 */
test.skip(!process.env.LEMNISCATE_STACK_URL, 'needs a running stack: set LEMNISCATE_STACK_URL (npm start prints it)');
test.describe.configure({ mode: 'serial' });

const marker = `console-e2e-${Date.now()}`;

test('an administrator publishes a policy from the console', async ({ page }) => {
  await signIn(page, 'admin');
  await shot(page, 'dashboard-admin');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Policies' }).click();
  // The dashboard's "Sessions by project" also answers to the label until the page has changed.
  await expect(page.getByRole('heading', { level: 1, name: 'Policies' })).toBeVisible();
  await page.getByRole('combobox', { name: 'Project' }).selectOption({ label: 'demo' });
  await expect(page.getByText('The document is valid.')).toBeVisible();
  // `sleep` becomes free so the revocation test below has a long command to interrupt.
  const free = page.getByLabel('Free commands (one per line)');
  const current = await free.inputValue();
  if (!current.split('\n').includes('sleep')) {
    await free.fill(`${current}\nsleep`.trim());
    await free.blur();
  }
  await page.getByLabel('What changed, and why').fill(marker);
  await page.getByRole('button', { name: 'Publish…' }).click();
  const confirm = page.getByRole('region', { name: /^Publish version \d+/ });
  await shot(page, 'policy-publish-confirm');
  await confirm.getByRole('button', { name: /^Publish version \d+$/ }).click();
  await expect(page.getByRole('status').filter({ hasText: /Published version \d+/ })).toBeVisible();
  await shot(page, 'policies-admin');
  await page.getByRole('tab', { name: 'History' }).click();
  await expect(page.getByRole('row', { name: new RegExp(`${marker}.*`) })).toContainText('in force');
  await expect(page.getByRole('row', { name: new RegExp(`${marker}.*`) })).toContainText(credentials('admin').email);
  await shot(page, 'policy-history');

  const projectId = await demoProjectId(page);
  const inForce = (await (await page.request.get(`/api/v1/projects/${projectId}/policy`)).json()) as { comment: string; sourceText: string | null };
  expect(inForce.comment).toBe(marker);
  expect(inForce.sourceText).toContain('sleep');
});

test('a developer approves a diff in the console and the patch carries the change', async ({ page }) => {
  await signIn(page, 'developer');
  const projectId = await demoProjectId(page);
  const { request, csrf } = await apiAs(page);
  // The same session `npm start` leaves for the demo: the scripted model proposes one Edit.
  const created = await request.post('/api/v1/sessions', {
    headers: { 'x-csrf-token': csrf },
    data: { projectId, instruction: `The average test fails (${marker}).`, model: `scripted:${path.join(ROOT, 'scripts/demo/demo-session.json')}`, headless: true, waitForApprovals: true },
  });
  expect(created.status(), await created.text()).toBe(201);
  const session = (await created.json()) as { id: string };

  await page.getByRole('link', { name: 'Approvals' }).click();
  const item = page.getByRole('list', { name: 'Pending approvals' }).getByRole('button').filter({ hasText: session.id }).filter({ hasText: 'File change' });
  await item.click();
  const diff = page.getByRole('region', { name: 'Proposed changes' });
  await expect(diff).toContainText('return total / values.length;');
  // The lines above the hunk come from the session's sandbox, checked against the change first.
  await diff.getByRole('button', { name: /lines 1 to 8 of src\/calc\.js/ }).click();
  await expect(diff.locator('tr.line.context', { hasText: 'function add(a, b) {' }).locator('td.ln')).toHaveText(['4', '4']);
  // The answer also said where the file ends (line 15, the hunk's last): no band is left below it.
  await expect(diff.locator('tr.expander')).toHaveCount(0);
  await shot(page, 'approvals-developer');
  await page.keyboard.press('a');
  await expect(item).toHaveCount(0);

  await expect.poll(async () => ((await (await request.get(`/api/v1/sessions/${session.id}`)).json()) as { status: string }).status, { timeout: 60_000 }).toBe('completed');
  const done = (await (await request.get(`/api/v1/sessions/${session.id}`)).json()) as { finalPatch: string };
  expect(done.finalPatch).toContain('return total / values.length;');
  await page.goto(`/sessions/${session.id}`);
  await expect(page.getByRole('region', { name: 'Approved changes of this session' })).toContainText('return total / values.length;');
  await shot(page, 'session-completed');
});

test("a developer answers the agent's question in the console and the session goes on with it", async ({ page }) => {
  await signIn(page, 'developer');
  const projectId = await demoProjectId(page);
  const { request, csrf } = await apiAs(page);
  const script = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-e2e-')), 'question.json');
  const question = `Round the average to two decimals? (${marker})`;
  fs.writeFileSync(
    script,
    JSON.stringify({ turns: [{ tool_calls: [{ name: 'Question', arguments: { question, options: ['yes, two decimals', 'no, keep it exact'] } }] }, { text: 'Kept it exact, as asked.' }] }),
  );
  const created = await request.post('/api/v1/sessions', {
    headers: { 'x-csrf-token': csrf },
    data: { projectId, instruction: `Tidy the average (${marker}).`, model: `scripted:${script}`, headless: true, waitForApprovals: true },
  });
  expect(created.status(), await created.text()).toBe(201);
  const session = (await created.json()) as { id: string };

  await page.getByRole('link', { name: 'Approvals' }).click();
  const item = page.getByRole('list', { name: 'Pending approvals' }).getByRole('button').filter({ hasText: session.id }).filter({ hasText: question });
  await item.click();
  await expect(page.getByRole('heading', { name: 'Question' })).toBeVisible();
  await page.getByRole('radio', { name: 'no, keep it exact' }).check();
  await shot(page, 'approvals-question');
  await page.getByRole('button', { name: 'Answer' }).click();
  await expect(item).toHaveCount(0);

  await expect.poll(async () => ((await (await request.get(`/api/v1/sessions/${session.id}`)).json()) as { status: string }).status, { timeout: 60_000 }).toBe('completed');
  const approvals = (await (await request.get(`/api/v1/approvals?sessionId=${session.id}`)).json()) as { kind: string; state: string; response: string | null }[];
  expect(approvals.map((a) => [a.kind, a.state, a.response])).toEqual([['question', 'approved', 'no, keep it exact']]);
  const calls = (await (await request.get(`/api/v1/sessions/${session.id}/tool-calls`)).json()) as { name: string; result: { summary: string } }[];
  expect(calls.map((c) => [c.name, c.result.summary])).toEqual([['Question', 'The developer answered your question.']]);
});

test('an administrator revokes a running session and the CLI exits 3 within a second', async ({ page }) => {
  const script = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-e2e-')), 'sleep.json');
  fs.writeFileSync(script, JSON.stringify({ turns: [{ tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 120' } }] }, { text: 'slept' }] }));
  const cli = spawn(
    'node',
    [
      path.join(ROOT, 'apps/cli/bin/lemni.js'),
      '-p',
      `sleep for a while (${marker})`,
      '--project',
      'demo',
      '--profile',
      'developer',
      '--model',
      `scripted:${script}`,
      '--output-format',
      'json',
      '--no-apply',
    ],
    { cwd: ROOT },
  );
  let stdout = '';
  cli.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => cli.on('exit', (code) => resolve({ code, at: Date.now() })));

  await signIn(page, 'admin');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Sessions' }).click();
  const link = page.getByRole('link', { name: new RegExp(`sleep for a while \\(${marker}\\)`) });
  await link.click();
  await expect(page.getByRole('region', { name: 'Session events' })).toContainText('sleep 120', { timeout: 30_000 });
  await shot(page, 'session-running');
  await page.getByRole('button', { name: 'Revoke…' }).click();
  await page.getByLabel('Reason (recorded in the audit log)').fill(marker);
  const [response] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/revoke') && r.request().method() === 'POST'), page.getByRole('button', { name: 'Revoke now' }).click()]);
  expect(response.status()).toBe(200);
  const revokedAt = Date.now();
  const { code, at } = await exited;
  expect(code).toBe(3);
  expect(at - revokedAt).toBeLessThanOrEqual(1000);
  expect(JSON.parse(stdout)).toMatchObject({ status: 'stopped', stop_reason: 'revoked', exit_code: 3 });
  await expect(page.getByText('stopped: revoked', { exact: true })).toBeVisible();
});

test('a security officer filters the audit log, sees it verified and exports it', async ({ page }) => {
  await signIn(page, 'security');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit' }).click();
  await expect(page.getByRole('status').filter({ hasText: /Chain verified: \d+ entries/ })).toBeVisible();
  await page.getByLabel('Project').selectOption({ label: 'demo' });
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await expect(page.getByRole('table', { name: /Audit entries/ })).toContainText(marker);
  await shot(page, 'audit-security');
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export JSONL' }).click()]);
  const file = await download.path();
  const lines = fs
    .readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { hash: string; prevHash: string });
  expect(lines.length).toBeGreaterThan(0);
  expect(lines.every((l) => typeof l.hash === 'string' && typeof l.prevHash === 'string')).toBe(true);
  const [csv] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
  expect(fs.readFileSync(await csv.path(), 'utf8').split('\r\n')[0]).toBe(
    'seq,at,actor,actor_email,actor_name,kind,project_id,session_id,tool,command,path,decision,rule,reason,approval_id,answer,exit_code,details,prev_hash,hash',
  );
});

test('a developer reads the policy but is offered no editor, and the API refuses a publish too', async ({ page }) => {
  await signIn(page, 'developer');
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Policies' }).click();
  await expect(page.getByRole('tab')).toHaveText(['Policy in force', 'History', 'MCP servers']);
  await expect(page.getByRole('button', { name: 'Publish' })).toHaveCount(0);
  await shot(page, 'policies-developer-read-only');
  const projectId = await demoProjectId(page);
  const { request, csrf } = await apiAs(page);
  const res = await request.post(`/api/v1/projects/${projectId}/policy`, { headers: { 'x-csrf-token': csrf }, data: { sourceText: 'version: 1\ncommands:\n  default: allow\n' } });
  expect(res.status()).toBe(403);
  const body = (await res.json()) as { code: string; message: string; requestId?: string };
  expect(body.message.length).toBeGreaterThan(10);
  expect(body.requestId).toBeTruthy();
});

test('screenshots of the remaining pages', async ({ page }) => {
  await signIn(page, 'admin');
  for (const [name, link] of [
    ['sessions', 'Sessions'],
    ['users', 'Users'],
    ['audit-admin', 'Audit'],
    ['dashboard', 'Dashboard'],
  ] as const) {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: link }).click();
    await expect(page.getByRole('heading', { level: 1 })).toBeVisible();
    await expect(page.getByRole('status').filter({ hasText: /^Loading/ })).toHaveCount(0);
    await shot(page, name);
  }
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page.getByRole('button', { name: 'Sign in' })).toBeVisible();
  await shot(page, 'signin');
});
