import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright';
import { instanceLabel, makeRepository, mintToken, ROOT } from './harness';

/**
 * deploy/compose as an operator runs it (S1, S3, G07; docs/decisions/0010-exec-host-pool.md): the
 * platform image built offline here, PostgreSQL, two gateways behind one nginx address, two exec-hosts
 * registered over mutual TLS, all brought up by Debian's docker-compose. `lemni -p` through the one
 * address succeeds, the console loads in Chromium through it, and `docker-compose down -v` leaves no
 * container (sandboxes included), network or volume behind.
 */
jest.setTimeout(900_000);

const COMPOSE = join(ROOT, 'deploy/compose/docker-compose.yml');
const CLI = join(ROOT, 'apps/cli/bin/lemni.js');
const project = `lemniscate-e2e-${randomBytes(4).toString('hex')}`;
let dir: string;
let shared: string;
let stateRoot: string;
let envFile: string;
let url: string;
let platformImage: string;
const admin = { email: 'admin@compose.invalid', password: 'compose admin password' };

function sh(cmd: string, args: string[], timeoutMs = 120_000): { code: number | null; out: string; stdout: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, stdout: r.stdout ?? '' };
}
const compose = (...args: string[]) => sh('docker-compose', ['-p', project, '--env-file', envFile, '-f', COMPOSE, ...args], 300_000);

async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 180_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${compose('logs', '--tail', '40').out}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function api(token: string, method: string, route: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${url}/api/v1${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/** `lemni` through the one address, as the user whose token it is. */
function lemni(token: string, args: string[]) {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: dir,
      LEMNISCATE_GATEWAY: url,
      LEMNISCATE_TOKEN: token,
      LEMNISCATE_PROJECT: 'compose',
      LEMNISCATE_FOLLOW_RECONNECT_SECONDS: '5',
      NO_COLOR: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done };
}

const tokenFor = (email: string, password: string) => mintToken(url, email, password, 'compose');

beforeAll(async () => {
  // Reused when this build's output has not changed (setup --tests builds it once).
  const built = sh(process.execPath, [join(ROOT, 'scripts/platform-image.mjs')], 900_000);
  if (built.code !== 0) throw new Error(`the platform image: ${built.out}`);
  platformImage = built.stdout.trim().split('\n').at(-1) as string;
  dir = mkdtempSync('/tmp/lemniscate-compose-');
  chmodSync(dir, 0o755);
  shared = join(dir, 'shared');
  stateRoot = join(dir, 'state');
  mkdirSync(shared, { recursive: true });
  mkdirSync(join(stateRoot, 'exec-host-1'), { recursive: true });
  mkdirSync(join(stateRoot, 'exec-host-2'), { recursive: true });
  // The exec-hosts' mounts must reach the engine: the state root is made a shared mount (a host whose
  // / is already shared, as under systemd, needs nothing; docs/operator-guide.md, "Compose").
  expect(sh('mount', ['--bind', stateRoot, stateRoot]).code).toBe(0);
  expect(sh('mount', ['--make-rshared', stateRoot]).code).toBe(0);
  const certs = join(dir, 'certs');
  const made = sh('bash', [join(ROOT, 'deploy/certs/make-certs.sh'), certs, 'exec-host-1', 'exec-host-2']);
  expect(made).toMatchObject({ code: 0 });
  // The gateways run as the image's user 10100 (docs/operator-guide.md): their key is theirs to read.
  chmodSync(certs, 0o755);
  for (const f of ['gateway.pem', 'gateway-key.pem']) chownSync(join(certs, f), 10100, 10100);
  writeFileSync(join(shared, 'models.yaml'), 'scripted:\n  enabled: true\n');
  makeRepository(join(shared, 'repo'));
  const port = 17000 + Math.floor(Math.random() * 2000);
  url = `http://127.0.0.1:${port}`;
  envFile = join(dir, 'compose.env');
  writeFileSync(
    envFile,
    [
      `LEMNISCATE_PLATFORM_IMAGE=${platformImage}`,
      `LEMNISCATE_DB_PASSWORD=${randomBytes(12).toString('hex')}`,
      `LEMNISCATE_EXEC_HOST_TOKEN=${randomBytes(24).toString('hex')}`,
      `LEMNISCATE_SECRET_KEY=${randomBytes(32).toString('base64')}`,
      `LEMNISCATE_ADMIN_EMAIL=${admin.email}`,
      `LEMNISCATE_ADMIN_PASSWORD=${admin.password}`,
      `LEMNISCATE_CERTS_DIR=${certs}`,
      `LEMNISCATE_SHARED_DIR=${shared}`,
      `LEMNISCATE_STATE_ROOT=${stateRoot}`,
      `LEMNISCATE_MODELS_CONFIG=${join(shared, 'models.yaml')}`,
      `LEMNISCATE_SANDBOX_IMAGE=${process.env.LEMNISCATE_SANDBOX_IMAGE ?? 'lemniscate/sandbox:current'}`,
      `LEMNISCATE_PORT=${port}`,
      '',
    ].join('\n'),
  );
  const up = compose('up', '-d');
  if (up.code !== 0) throw new Error(`docker-compose up: ${up.out}\n${compose('logs', '--tail', '60').out}`);
}, 900_000);

afterAll(async () => {
  if (envFile) compose('down', '-v', '--remove-orphans');
  if (stateRoot) sh('umount', ['-l', stateRoot]);
  if (dir && process.env.LEMNISCATE_E2E_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
});

it('comes up from images built here; `lemni -p` through the one address succeeds; the console loads in Chromium; down leaves nothing running', async () => {
  await until('the gateways behind the one address', async () => (await fetch(`${url}/readyz`)).ok);
  const adminToken = await tokenFor(admin.email, admin.password);
  const hosts = await until('both exec-hosts registered over mutual TLS', async () => {
    const list = await api(adminToken, 'GET', '/admin/exec-hosts');
    const active = (list.json as { id: string; state: string; address: string }[]).filter((h) => h.state === 'active');
    return active.length === 2 ? active : null;
  });
  expect(hosts.map((h) => h.address).sort()).toEqual(['https://exec-host-1:7071', 'https://exec-host-2:7071']);

  const created = await api(adminToken, 'POST', '/projects', { name: 'compose', repositorySource: join(shared, 'repo'), defaultRef: 'main' });
  expect(created.status).toBe(201);
  expect((await api(adminToken, 'POST', `/projects/${created.json.id}/policy`, { document: { version: 1, commands: { free: ['echo', 'cat', 'sleep'] } }, comment: 'compose' })).status).toBe(201);
  const devPassword = 'compose developer password';
  expect((await api(adminToken, 'POST', '/users', { email: 'dev@compose.invalid', displayName: 'Dev', role: 'developer', password: devPassword, projectIds: [created.json.id] })).status).toBe(201);
  const developer = await tokenFor('dev@compose.invalid', devPassword);

  const script = join(shared, 'hello.json');
  writeFileSync(
    script,
    JSON.stringify({
      turns: [
        { tool_calls: [{ name: 'Bash', arguments: { command: 'echo hello from compose' } }] },
        { tool_calls: [{ name: 'Write', arguments: { path: 'NOTES.md', content: 'Said hello through compose.\n' } }] },
        { text: 'Said hello.' },
      ],
    }),
  );
  // The write waits for a person: the developer approves it through the one address (either gateway
  // may answer, whichever one drives the session), as they would in the console.
  const hello = lemni(developer, ['-p', 'say hello', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply', '--wait-for-approvals']);
  let finished = false;
  void hello.done.then(() => (finished = true));
  let approved = 0;
  const approveUntil = Date.now() + 300_000;
  while (!finished && Date.now() < approveUntil) {
    await new Promise((r) => setTimeout(r, 300));
    const pending = await api(developer, 'GET', '/approvals?state=pending');
    for (const a of (pending.json ?? []) as { id: string }[]) {
      if ((await api(developer, 'POST', `/approvals/${a.id}/approve`, {})).status === 200) approved += 1;
    }
  }
  if (!finished) hello.child.kill('SIGKILL');
  const run = await hello.done;
  expect(approved).toBe(1);
  expect({ code: run.code, stderr: run.stderr }).toMatchObject({ code: 0 });
  const out = JSON.parse(run.stdout.trim().split('\n').at(-1) as string);
  expect(out).toMatchObject({ status: 'completed', exit_code: 0, summary: 'Said hello.' });
  expect(out.tool_calls[0].result.stdout).toContain('hello from compose');
  expect(out.patch).toContain('+++ b/NOTES.md');
  expect(out.patch).toContain('+Said hello through compose.');
  const session = await api(developer, 'GET', `/sessions/${out.session_id}`);
  expect(['exec-host-1', 'exec-host-2']).toContain(session.json.execHost);

  // The console, through the same address, in Chromium: the developer's sessions list follows the
  // live events over a WebSocket through nginx ("Live"); the administrator sees both exec-hosts.
  const shots = join(ROOT, 'artifacts/compose');
  mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  try {
    for (const [who, email, password] of [
      ['developer', 'dev@compose.invalid', devPassword],
      ['administrator', admin.email, admin.password],
    ] as const) {
      const page = await (await browser.newContext()).newPage();
      try {
        await page.goto(url);
        await page.getByLabel('E-mail').fill(email);
        await page.getByLabel('Password').fill(password);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('banner').waitFor({ timeout: 30_000 });
        if (who === 'developer') {
          await page.goto(`${url}/sessions`);
          await page.getByText('say hello').first().waitFor({ timeout: 30_000 });
          await page.getByText('Live', { exact: true }).waitFor({ timeout: 30_000 });
          await page.screenshot({ path: join(shots, 'console-sessions.png'), fullPage: true });
        } else {
          await page.goto(`${url}/admin/exec-hosts`);
          await page.getByText('exec-host-2').first().waitFor({ timeout: 30_000 });
          await page.screenshot({ path: join(shots, 'console-exec-hosts.png'), fullPage: true });
        }
      } catch (e) {
        await page.screenshot({ path: join(shots, `console-failed-${who}.png`), fullPage: true });
        throw e;
      }
    }
  } finally {
    await browser.close();
  }

  // A session still running at `down`: its sandbox is there when the exec-hosts are stopped, and each
  // exec-host destroys its sandboxes on SIGTERM, warm ones included (compose stops them first: they
  // depend on the rest).
  const sandboxes = () =>
    ['exec-host-1', 'exec-host-2'].flatMap((host) =>
      sh('docker', ['ps', '-aq', '--filter', `label=lemniscate.exec-host=${instanceLabel(join(stateRoot, host))}`])
        .stdout.split('\n')
        .filter(Boolean),
    );
  const waiting = join(shared, 'wait.json');
  writeFileSync(waiting, JSON.stringify({ turns: [{ tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 600' } }] }, { text: 'Slept.' }] }));
  const live = lemni(developer, ['-p', 'sleep', '--model', `scripted:${waiting}`, '--output-format', 'json', '--no-apply']);
  try {
    await until('a live sandbox', async () => {
      const running = (await api(developer, 'GET', '/sessions?status=running')).json as { id: string }[];
      // The exec-hosts also keep warm sandboxes: the session's is the one running its command.
      return running.length === 1 && sandboxes().filter((id) => sh('docker', ['top', id]).stdout.includes('sleep 600')).length === 1;
    });
  } catch (e) {
    live.child.kill('SIGKILL');
    throw e;
  }

  // Down: nothing of the project is left, and no sandbox of its exec-hosts.
  const started = Date.now();
  const down = compose('down', '-v', '--remove-orphans');
  live.child.kill('SIGKILL');
  expect({ code: down.code, out: down.out }).toMatchObject({ code: 0 });
  process.stderr.write(`docker-compose down took ${Math.round((Date.now() - started) / 1000)} s\n`);
  expect(sandboxes()).toEqual([]);
  expect(sh('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${project}`]).out.trim()).toBe('');
  expect(sh('docker', ['network', 'ls', '-q', '--filter', `name=${project}_`]).out.trim()).toBe('');
  expect(sh('docker', ['volume', 'ls', '-q', '--filter', `name=${project}_`]).out.trim()).toBe('');
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.includes(`${stateRoot}/`));
  expect(mounts).toEqual([]);
});
