import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { createPostgresDatabase, freePort, instanceLabel, makeRepository, mintToken, ROOT } from './harness';

/**
 * Beyond one host (S1, S3, S6, G07; docs/decisions/0010-exec-host-pool.md), end to end: a pair of
 * gateways on one PostgreSQL database and three exec-hosts, each its own process and state
 * directory on this machine's engine, registered over mutual TLS. Twelve `lemni -p` runs spread over
 * the three; one exec-host is killed while their commands run: its sessions end `sandbox_lost`
 * (exit 1, a sentence, the approved change kept), the others finish, new sessions avoid it, and
 * once it starts again nothing of its sandboxes is left. Drain and undrain through `lemni admin`.
 */
jest.setTimeout(600_000);

const HOSTS = ['exec-host-a', 'exec-host-b', 'exec-host-c'] as const;
type HostId = (typeof HOSTS)[number];
const LOST_SECONDS = 6;
const CLI = join(ROOT, 'apps/cli/bin/lemni.js');

interface Run {
  session: string | null;
  code: number | null;
  stdout: string;
  stderr: string;
  done: Promise<void>;
}

let dir: string;
let db: { url: string; drop(): Promise<void> };
let pg: Client;
let certs: string;
let token: string;
const gateways: { url: string; child: ChildProcess }[] = [];
const hosts = new Map<HostId, { port: number; stateDir: string; child: ChildProcess | null }>();
const logs: string[] = [];
let admin: string;
let developer: string;
let repository: string;
const env = () => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: join(dir, 'home'), LEMNISCATE_LOG_LEVEL: 'warn' });

/** Thrown by a probe when waiting longer cannot help. */
class GaveUp extends Error {}

/**
 * Waits for `probe` (its errors count as "not yet", except GaveUp); on a timeout, the error carries
 * `explain()` (what the runs and the database show) and the logs' tail.
 */
async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 60_000, explain?: () => Promise<string>): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe().catch((e: unknown) => {
      if (e instanceof GaveUp) throw e;
      return null;
    });
    if (v) return v;
    if (Date.now() > end) {
      const state = explain ? await explain().catch((e: Error) => `(could not describe the state: ${e.message})`) : '';
      throw new Error(`timed out waiting for ${what}\n${state}\n${logs.join('').slice(-4000)}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Each run's exit and output tail, each root session's row and its tool calls, the approvals by state and the hosts. */
async function describe(runs: readonly Run[]): Promise<string> {
  const tail = (s: string) => s.trim().split('\n').slice(-3).join(' | ');
  const lines = runs.map((r, i) => `run ${i}: ${r.code === null ? 'running' : `exit ${r.code}`}; stdout: ${tail(r.stdout)}; stderr: ${tail(r.stderr)}`);
  const sessions = await pg.query(
    `SELECT s.id, s.status, s.stop_reason, s.exec_host, s.sandbox_id IS NOT NULL AS sandbox, s.runner_seen_at,
            (SELECT string_agg(t.name || CASE WHEN t.result IS NULL THEN ':open' ELSE ':done' END, ',' ORDER BY t.seq) FROM tool_calls t WHERE t.session_id = s.id) AS calls
       FROM sessions s WHERE s.parent_session_id IS NULL ORDER BY s.started_at`,
  );
  const approvals = await pg.query(`SELECT state, count(*)::int AS n FROM approvals GROUP BY state`);
  return [...lines, ...sessions.rows.map((r) => `session ${JSON.stringify(r)}`), `approvals ${JSON.stringify(approvals.rows)}`, `hosts ${JSON.stringify(await listHosts())}`].join('\n');
}

async function api(gateway: number, bearer: string, method: string, route: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${gateways[gateway]!.url}/api/v1${route}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

function startGateway(port: number): ChildProcess {
  const child = spawn(process.execPath, [join(ROOT, 'apps/gateway/bin/lemni-gateway.js')], {
    env: {
      ...env(),
      DATABASE_URL: db.url,
      LEMNISCATE_GATEWAY_PORT: String(port),
      LEMNISCATE_EXEC_HOST_POOL: 'true',
      LEMNISCATE_EXEC_HOST_TOKEN: token,
      LEMNISCATE_EXEC_HOST_LOST_SECONDS: String(LOST_SECONDS),
      LEMNISCATE_EXEC_HOST_CA: join(certs, 'ca.pem'),
      LEMNISCATE_EXEC_HOST_CLIENT_CERT: join(certs, 'gateway.pem'),
      LEMNISCATE_EXEC_HOST_CLIENT_KEY: join(certs, 'gateway-key.pem'),
      LEMNISCATE_ADMIN_EMAIL: 'admin@pool.invalid',
      LEMNISCATE_ADMIN_PASSWORD: 'pool admin password 1234',
      LEMNISCATE_LOOP_LEASE_SECONDS: '4',
      LEMNISCATE_MODELS_CONFIG: join(dir, 'models.yaml'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d) => logs.push(`[gateway:${port}] ${d}`));
  child.stderr?.on('data', (d) => logs.push(`[gateway:${port}] ${d}`));
  return child;
}

function startHost(id: HostId): ChildProcess {
  const h = hosts.get(id)!;
  // Each registers through one of the two gateways; the pool is the same whichever it reaches.
  const gateway = gateways[HOSTS.indexOf(id) % 2]!.url;
  const child = spawn(process.execPath, [join(ROOT, 'apps/exec-host/bin/lemni-exec-host.js')], {
    env: {
      ...env(),
      LEMNISCATE_EXEC_HOST_TOKEN: token,
      LEMNISCATE_EXEC_HOST_ID: id,
      LEMNISCATE_EXEC_HOST_PORT: String(h.port),
      LEMNISCATE_EXEC_HOST_STATE_DIR: h.stateDir,
      LEMNISCATE_EXEC_HOST_WARM_POOL: '0',
      LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: '6',
      LEMNISCATE_EXEC_HOST_TLS_CERT: join(certs, `${id}.pem`),
      LEMNISCATE_EXEC_HOST_TLS_KEY: join(certs, `${id}-key.pem`),
      LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA: join(certs, 'ca.pem'),
      LEMNISCATE_EXEC_HOST_ADVERTISE_URL: `https://localhost:${h.port}`,
      LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS: '1',
      LEMNISCATE_GATEWAY_URL: gateway,
      LEMNISCATE_SANDBOX_IMAGE: process.env.LEMNISCATE_SANDBOX_IMAGE ?? 'lemniscate/sandbox:current',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d) => logs.push(`[${id}] ${d}`));
  child.stderr?.on('data', (d) => logs.push(`[${id}] ${d}`));
  h.child = child;
  return child;
}

async function listHosts(gateway = 0): Promise<{ id: string; state: string; liveSessions: number; capacity: number }[]> {
  return (await api(gateway, admin, 'GET', '/admin/exec-hosts')).json;
}

const stateOf = async (id: HostId) => (await listHosts()).find((h) => h.id === id)?.state;

function cli(gateway: number, args: string[], bearer = developer): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], {
    cwd: dir,
    env: { ...env(), LEMNISCATE_GATEWAY: gateways[gateway]!.url, LEMNISCATE_TOKEN: bearer, LEMNISCATE_PROJECT: 'pool', NO_COLOR: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

function run(gateway: number, args: string[], bearer = developer): Run {
  const child = cli(gateway, args, bearer);
  child.stdin!.end();
  const r: Run = { session: null, code: null, stdout: '', stderr: '', done: Promise.resolve() };
  child.stdout!.on('data', (d) => (r.stdout += d));
  child.stderr!.on('data', (d) => (r.stderr += d));
  r.done = new Promise((resolve) => child.on('close', (code) => ((r.code = code), resolve())));
  return r;
}

function script(name: string, turns: unknown[]): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ turns }));
  return file;
}

/** Every pending approval, approved (as a person would, from the console). */
async function approveAll(): Promise<void> {
  const pending = await api(0, developer, 'GET', '/approvals?state=pending');
  for (const a of pending.json ?? []) await api(1, developer, 'POST', `/approvals/${a.id}/approve`, {});
}

async function placements(): Promise<Map<string, { host: string | null; status: string }>> {
  const rows = await pg.query<{ id: string; exec_host: string | null; status: string }>('SELECT id, exec_host, status FROM sessions WHERE parent_session_id IS NULL');
  return new Map(rows.rows.map((r) => [r.id, { host: r.exec_host, status: r.status }]));
}

const last = (out: string) => JSON.parse(out.trim().split('\n').at(-1) as string);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lemniscate-pool-'));
  mkdirSync(join(dir, 'home'), { recursive: true });
  writeFileSync(join(dir, 'models.yaml'), 'scripted:\n  enabled: true\n');
  certs = join(dir, 'certs');
  const made = spawnSync('bash', [join(ROOT, 'deploy/certs/make-certs.sh'), certs, ...HOSTS], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`make-certs.sh: ${made.stderr}`);
  token = randomBytes(24).toString('base64url');
  db = await createPostgresDatabase();
  pg = new Client({ connectionString: db.url });
  for (let i = 0; i < 2; i++) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    // The second waits for the first to have migrated the database.
    const child = startGateway(port);
    gateways.push({ url, child });
    await until(`gateway ${i + 1}`, async () => (await fetch(`${url}/healthz`)).ok);
  }
  await pg.connect();
  admin = await mintToken(gateways[0]!.url, 'admin@pool.invalid', 'pool admin password 1234', 'pool');
  repository = makeRepository(join(dir, 'repo'));
  const project = await api(0, admin, 'POST', '/projects', { name: 'pool', repositorySource: repository, defaultRef: 'main' });
  expect(project.status).toBe(201);
  const policy = await api(1, admin, 'POST', `/projects/${project.json.id}/policy`, { document: { version: 1, commands: { free: ['sleep', 'echo', 'cat'] } }, comment: 'pool' });
  expect(policy.status).toBe(201);
  const dev = await api(0, admin, 'POST', '/users', { email: 'dev@pool.invalid', displayName: 'dev', role: 'developer', password: 'pool developer password', projectIds: [project.json.id] });
  expect(dev.status).toBe(201);
  developer = await mintToken(gateways[1]!.url, 'dev@pool.invalid', 'pool developer password', 'pool');

  for (const id of HOSTS) {
    hosts.set(id, { port: await freePort(), stateDir: join(dir, id), child: null });
    startHost(id);
  }
  await until('three exec-hosts registered', async () => {
    const list = await listHosts();
    return list.length === 3 && list.every((h) => h.state === 'active');
  });
}, 300_000);

afterAll(async () => {
  for (const h of hosts.values()) if (h.child && h.child.exitCode === null) h.child.kill('SIGTERM');
  await Promise.all([...hosts.values()].map((h) => (h.child && h.child.exitCode === null ? new Promise((r) => h.child!.once('exit', r)) : undefined)));
  for (const g of gateways) g.child.kill('SIGTERM');
  await Promise.all(gateways.map((g) => (g.child.exitCode === null ? new Promise((r) => g.child.once('exit', r)) : undefined)));
  await pg?.end();
  await db?.drop();
  if (process.env.LEMNISCATE_E2E_LOGS === '1') process.stderr.write(logs.join(''));
  rmSync(dir, { recursive: true, force: true });
});

it('twelve sessions spread over three exec-hosts; one killed mid-command loses only its own, which keep their approved change', async () => {
  const runs: Run[] = [];
  for (let i = 0; i < 12; i++) {
    const turns = [
      { tool_calls: [{ name: 'Write', arguments: { path: `notes/run-${i}.md`, content: `run ${i}\n` } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 45' } }] },
      { text: `Run ${i} done.` },
    ];
    runs.push(run(i % 2, ['-p', `note run ${i}`, '--model', `scripted:${script(`run-${i}`, turns)}`, '--output-format', 'json', '--no-apply', '--wait-for-approvals']));
  }
  // Every run has proposed its note; the notes are approved together, so that the twelve commands
  // start together and none has ended before the last one starts, however slowly the sandboxes came.
  await until(
    'twelve notes waiting for approval',
    async () => {
      const ended = runs.findIndex((r) => r.code !== null);
      if (ended >= 0) throw new GaveUp(`run ${ended} ended (exit ${runs[ended]!.code}) before its note was approved:\n${await describe(runs)}`);
      return ((await api(0, developer, 'GET', '/approvals?state=pending')).json ?? []).length === 12;
    },
    240_000,
    () => describe(runs),
  );
  // Every run has written its note (approved) and is in its command.
  await until(
    'twelve sessions in their command',
    async () => {
      await approveAll();
      const rows = await pg.query<{ n: string }>(
        `SELECT count(*) AS n FROM tool_calls t JOIN sessions s ON s.id = t.session_id WHERE t.name = 'Bash' AND s.status = 'running' AND s.parent_session_id IS NULL`,
      );
      return Number(rows.rows[0]?.n) === 12;
    },
    240_000,
  );
  const placed = await placements();
  const perHost = new Map<string, string[]>();
  for (const [id, p] of placed) if (p.host) perHost.set(p.host, [...(perHost.get(p.host) ?? []), id]);
  expect([...perHost.keys()].sort()).toEqual([...HOSTS]);
  for (const host of HOSTS) expect(perHost.get(host)).toHaveLength(4);

  const victim: HostId = 'exec-host-b';
  const victimSessions = new Set(perHost.get(victim));
  hosts.get(victim)!.child!.kill('SIGKILL');
  await Promise.all(runs.map((r) => r.done));

  for (const r of runs) {
    const out = last(r.stdout);
    const notes = (out.patch as string).match(/^diff --git a\/notes\/run-\d+\.md/gm) ?? [];
    expect(notes).toHaveLength(1);
    if (victimSessions.has(out.session_id)) {
      expect({ code: r.code, status: out.status }).toEqual({ code: 1, status: 'failed' });
      expect(`${r.stderr}\n${r.stdout}`).toMatch(/sandbox (is|was) lost|exec-host .*lost/i);
    } else {
      expect({ code: r.code, status: out.status, stderr: r.stderr }).toMatchObject({ code: 0, status: 'completed' });
    }
  }

  // The pool declares it lost; a new session goes elsewhere.
  await until(`${victim} lost`, async () => (await stateOf(victim)) === 'lost', (LOST_SECONDS + 10) * 1000);
  const after = run(1, [
    '-p',
    'after the loss',
    '--model',
    `scripted:${script('after', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'echo hello' } }] }, { text: 'ok' }])}`,
    '--output-format',
    'json',
    '--no-apply',
  ]);
  await after.done;
  expect(after.code).toBe(0);
  const afterSession = last(after.stdout).session_id as string;
  expect((await placements()).get(afterSession)?.host).not.toBe(victim);

  // Started again, it comes back, and its start-up reap has left nothing of its former sandboxes.
  startHost(victim);
  await until(`${victim} back`, async () => (await stateOf(victim)) === 'active');
  const { stateDir } = hosts.get(victim)!;
  const containers = spawnSync('docker', ['ps', '-aq', '--filter', `label=lemniscate.exec-host=${instanceLabel(stateDir)}`], { encoding: 'utf8' }).stdout.trim();
  expect(containers).toBe('');
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l.includes(stateDir));
  expect(mounts).toEqual([]);
  const loops = spawnSync('losetup', ['-a'], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => l.includes(stateDir));
  expect(loops).toEqual([]);
});

it('drain and undrain with `lemni admin exec-hosts`: a drained host takes no new session', async () => {
  const drain = spawnSync(process.execPath, [CLI, 'admin', 'exec-hosts', 'drain', 'exec-host-a', '--reason', 'maintenance'], {
    env: { ...env(), LEMNISCATE_GATEWAY: gateways[1]!.url, LEMNISCATE_TOKEN: admin, NO_COLOR: '1' },
    encoding: 'utf8',
  });
  expect(drain.status).toBe(0);
  expect(drain.stdout).toMatch(/exec-host-a/);
  expect(await stateOf('exec-host-a')).toBe('draining');
  const started: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = run(i % 2, ['-p', `drained ${i}`, '--model', `scripted:${script(`drained-${i}`, [{ text: 'ok' }])}`, '--output-format', 'json', '--no-apply']);
    await r.done;
    if (r.code !== 0) throw new Error(`the session ended with ${String(r.code)}\nstdout: ${r.stdout.slice(-2000)}\nstderr: ${r.stderr.slice(-2000)}\n${logs.join('').slice(-4000)}`);
    started.push(last(r.stdout).session_id);
  }
  const placed = await placements();
  for (const id of started) expect(placed.get(id)?.host).not.toBe('exec-host-a');

  const listed = spawnSync(process.execPath, [CLI, 'admin', 'exec-hosts', 'list', '--json'], {
    env: { ...env(), LEMNISCATE_GATEWAY: gateways[0]!.url, LEMNISCATE_TOKEN: admin, NO_COLOR: '1' },
    encoding: 'utf8',
  });
  expect(listed.status).toBe(0);
  expect(JSON.parse(listed.stdout)).toContainEqual(expect.objectContaining({ id: 'exec-host-a', state: 'draining', drainReason: 'maintenance' }));

  const undrain = spawnSync(process.execPath, [CLI, 'admin', 'exec-hosts', 'undrain', 'exec-host-a'], {
    env: { ...env(), LEMNISCATE_GATEWAY: gateways[0]!.url, LEMNISCATE_TOKEN: admin, NO_COLOR: '1' },
    encoding: 'utf8',
  });
  expect(undrain.status).toBe(0);
  expect(await stateOf('exec-host-a')).toBe('active');
});

it('an exec-host with a wrong token or a certificate from another CA is refused and audited', async () => {
  // A fourth exec-host with the wrong token.
  const port = await freePort();
  const stateDir = join(dir, 'intruder');
  const foreign = join(dir, 'foreign-certs');
  const made = spawnSync('bash', [join(ROOT, 'deploy/certs/make-certs.sh'), foreign, 'exec-host-z'], { encoding: 'utf8' });
  expect(made.status).toBe(0);
  const attempts: [string, Record<string, string>][] = [
    ['wrong token', { LEMNISCATE_EXEC_HOST_TOKEN: `${token}-wrong`, LEMNISCATE_EXEC_HOST_TLS_CERT: join(certs, 'exec-host-a.pem'), LEMNISCATE_EXEC_HOST_TLS_KEY: join(certs, 'exec-host-a-key.pem') }],
    [
      'certificate of another CA',
      { LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_TLS_CERT: join(foreign, 'exec-host-z.pem'), LEMNISCATE_EXEC_HOST_TLS_KEY: join(foreign, 'exec-host-z-key.pem') },
    ],
  ];
  for (const [label, over] of attempts) {
    const child = spawn(process.execPath, [join(ROOT, 'apps/exec-host/bin/lemni-exec-host.js')], {
      env: {
        ...env(),
        LEMNISCATE_EXEC_HOST_ID: 'exec-host-z',
        LEMNISCATE_EXEC_HOST_PORT: String(port),
        LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir,
        LEMNISCATE_EXEC_HOST_WARM_POOL: '0',
        LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA: join(certs, 'ca.pem'),
        LEMNISCATE_EXEC_HOST_ADVERTISE_URL: `https://localhost:${port}`,
        LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS: '1',
        LEMNISCATE_GATEWAY_URL: gateways[0]!.url,
        LEMNISCATE_SANDBOX_IMAGE: process.env.LEMNISCATE_SANDBOX_IMAGE ?? 'lemniscate/sandbox:current',
        ...over,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout?.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (out += d));
    try {
      const refused = await until(
        `${label}: refusal audited`,
        async () => {
          const entries = (await api(0, admin, 'GET', '/audit?kind=exec_host.registration_refused&limit=1000')).json as { payload: { hostId: string; reason: string } }[];
          const mine = entries.filter(
            (e) => e.payload.hostId === 'exec-host-z' && (label === 'wrong token' ? /token/.test(e.payload.reason) : /could not verify exec-host exec-host-z/.test(e.payload.reason)),
          );
          return mine.length > 0 ? mine : null;
        },
        30_000,
      );
      expect(refused.length).toBeGreaterThan(0);
      expect((await listHosts()).map((h) => h.id)).not.toContain('exec-host-z');
      expect(out).toMatch(/refus|401|403/i);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  }
});

it('with every exec-host drained, a session start fails with a sentence and exit 1', async () => {
  for (const id of HOSTS) expect((await api(0, admin, 'POST', `/admin/exec-hosts/${id}/drain`, { reason: 'full stop' })).status).toBe(200);
  try {
    const r = run(0, ['-p', 'nowhere to run', '--model', `scripted:${script('nowhere', [{ text: 'x' }])}`, '--output-format', 'json', '--no-apply']);
    await r.done;
    expect(r.code).toBe(1);
    expect(`${r.stderr}${r.stdout}`).toMatch(/No exec-host can take a new runc sandbox now: exec-host-a is drained; exec-host-b is drained; exec-host-c is drained/);
  } finally {
    for (const id of HOSTS) await api(1, admin, 'POST', `/admin/exec-hosts/${id}/undrain`);
  }
});
