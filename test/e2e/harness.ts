import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve as resolvePath } from 'node:path';
import { Client } from 'pg';
import { startPgProxy, testPostgresUrl, withDatabaseName, type PgProxy } from '../../apps/gateway/test/support/pg-server';

/**
 * The whole platform for end-to-end tests, as real processes: the exec-host driving the machine's
 * Docker engine, the gateway on a fresh PGlite directory (or, with `database: 'postgres'`, a fresh
 * database on the PostgreSQL server of LEMNISCATE_TEST_PG_URL, optionally reached through a proxy
 * that can cut it), and the `lemni` CLI spawned per command.
 * Nothing is mocked; the model is the scripted provider of DESIGN.md.
 */

/** The repository's root: found upwards, so a compiled copy of this file (bench/) finds it too. */
export const ROOT = findRoot(__dirname);

function findRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'apps/cli/bin/lemni.js'))) return dir;
    if (dirname(dir) === dir) throw new Error(`No Lemniscate checkout above ${start}`);
  }
}
const CLI = join(ROOT, 'apps/cli/bin/lemni.js');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 60_000, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child && child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode} before it answered`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not answer within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function git(cwd: string, ...args: string[]): string {
  const r = spawnSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.invalid', ...args], { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** A small project repository: a library with a failing test, a CI file and a secret that must stay out. */
export function makeRepository(dir: string): string {
  mkdirSync(join(dir, 'src'), { recursive: true });
  mkdirSync(join(dir, 'test'), { recursive: true });
  mkdirSync(join(dir, '.github/workflows'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'e2e-demo', version: '1.0.0', private: true, scripts: { test: 'node --test' } }, null, 2) + '\n');
  writeFileSync(join(dir, 'src/calc.js'), "'use strict';\nfunction average(v) {\n  return v.reduce((a, b) => a + b, 0) / (v.length - 1);\n}\nmodule.exports = { average };\n");
  writeFileSync(
    join(dir, 'test/calc.test.js'),
    "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\nconst { average } = require('../src/calc');\ntest('average', () => assert.equal(average([1, 2, 3]), 2));\n",
  );
  writeFileSync(join(dir, '.github/workflows/ci.yml'), 'on: push\njobs: {}\n');
  writeFileSync(join(dir, '.env'), 'E2E_SECRET=must-not-reach-the-sandbox\n');
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'add', '-A', '-f');
  git(dir, 'commit', '-q', '-m', 'initial');
  return dir;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface Stack {
  dir: string;
  gatewayUrl: string;
  projectId: string;
  repository: string;
  tokens: { admin: string; developer: string; security: string };
  execHostUrl: string;
  execHostToken: string;
  api(token: string, method: string, route: string, body?: unknown): Promise<{ status: number; json: any }>;
  cli(args: string[], options?: { token?: string; cwd?: string; env?: Record<string, string>; input?: string }): Promise<CliResult>;
  spawnCli(args: string[], options?: { token?: string; cwd?: string; env?: Record<string, string> }): ChildProcess;
  script(name: string, turns: unknown[]): string;
  publishPolicy(document: unknown): Promise<void>;
  /** Ends the gateway with `signal` (SIGKILL unless told: a crash) and waits for it to exit. */
  stopGateway(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Starts the gateway again on the same port and data directory. */
  startGateway(): Promise<void>;
  /** The exec-host's state directory (its sandboxes' working copies live under `sandboxes/`). */
  execHostStateDir: string;
  /** The `lemniscate.exec-host` label this exec-host puts on its containers. */
  execHostInstance: string;
  /** Ends the exec-host with `signal` (SIGKILL unless told) and waits for it to exit. */
  stopExecHost(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the exec-host again on the same port and state directory. */
  startExecHost(): Promise<void>;
  /** Everything the gateway and the exec-host have written so far. */
  logs(): string;
  /** The running gateway's process id (for its memory), while it runs. */
  gatewayPid(): number | undefined;
  /** The running exec-host's process id (for its CPU time), while it runs. */
  execHostPid(): number | undefined;
  /** Which database the gateway runs on; on PostgreSQL, its URL and the proxy in front of it, if any. */
  database: { kind: 'pglite' } | { kind: 'postgres'; url: string; proxy: PgProxy | null };
  stop(): Promise<void>;
}

/** The label value the exec-host derives from its state directory (apps/exec-host/src/config.ts, `instanceLabel`). */
export function instanceLabel(stateDir: string): string {
  return createHash('sha256').update(resolvePath(stateDir)).digest('hex').slice(0, 16);
}

export interface StackOptions {
  /** Extra environment for the gateway (a model configuration, a log level). */
  gatewayEnv?: Record<string, string>;
  /** Extra environment for the exec-host (`DOCKER_HOST`, `LEMNISCATE_EXEC_HOST_REAPER_SECONDS`). */
  execHostEnv?: Record<string, string>;
  /** `postgres`: a fresh database (created here, dropped by `stop`) instead of PGlite. */
  database?: 'pglite' | 'postgres';
  /** With `postgres`: the gateway reaches it through a proxy the test can cut (apps/gateway/test/support/db.ts). */
  proxy?: boolean;
}

/** A new, empty database on the test server; the gateway migrates it at start-up. */
export async function createPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const adminUrl = testPostgresUrl();
  const name = `lemniscate_e2e_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabaseName(adminUrl, name),
    async drop() {
      const c = new Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), 'lemniscate-e2e-'));
  const pg = options.database === 'postgres' ? await createPostgresDatabase() : null;
  const proxy = pg && options.proxy ? await startPgProxy(pg.url) : null;
  const databaseEnv: Record<string, string> = pg ? { DATABASE_URL: proxy?.url ?? pg.url } : {};
  const execHostPort = await freePort();
  const gatewayPort = await freePort();
  const execHostToken = randomBytes(24).toString('base64url');
  const execHostUrl = `http://127.0.0.1:${execHostPort}`;
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const admin = { email: 'admin@e2e.invalid', password: randomBytes(12).toString('base64url') };
  const logs: string[] = [];
  const scriptedModels = join(dir, 'models.yaml');
  writeFileSync(scriptedModels, 'scripted:\n  enabled: true\n');
  // BENCH_NODE_OPTIONS reaches the gateway and the exec-host only (a benchmark's profiler, `--require …`).
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: join(dir, 'home'),
    LEMNISCATE_LOG_LEVEL: 'warn',
    ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
  };
  mkdirSync(env.HOME, { recursive: true });

  const execHostStateDir = join(dir, 'exec-host');
  let execHost: ChildProcess | null = null;
  const startExecHost = async () => {
    const child = spawn(process.execPath, [join(ROOT, 'apps/exec-host/bin/lemni-exec-host.js')], {
      env: {
        ...env,
        LEMNISCATE_EXEC_HOST_TOKEN: execHostToken,
        LEMNISCATE_EXEC_HOST_PORT: String(execHostPort),
        LEMNISCATE_EXEC_HOST_STATE_DIR: execHostStateDir,
        LEMNISCATE_EXEC_HOST_WARM_POOL: '0',
        LEMNISCATE_SANDBOX_IMAGE: process.env.LEMNISCATE_SANDBOX_IMAGE ?? 'lemniscate/sandbox:current',
        ...options.execHostEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    execHost = child;
    child.stdout?.on('data', (d) => logs.push(`[exec-host] ${d}`));
    child.stderr?.on('data', (d) => logs.push(`[exec-host] ${d}`));
    await waitUntil(async () => (await fetch(`${execHostUrl}/v1/health`, { headers: { authorization: `Bearer ${execHostToken}` } })).ok, 'the exec-host', 60_000, child);
  };
  const stopExecHost = async (signal: NodeJS.Signals = 'SIGKILL') => {
    const child = execHost;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill(signal);
    });
  };
  await startExecHost();

  let gateway: ChildProcess | null = null;
  const startGateway = async () => {
    gateway = spawn(process.execPath, [join(ROOT, 'apps/gateway/bin/lemni-gateway.js')], {
      env: {
        ...env,
        LEMNISCATE_GATEWAY_PORT: String(gatewayPort),
        LEMNISCATE_DATA_DIR: join(dir, 'gateway-data'),
        LEMNISCATE_EXEC_HOST_URL: execHostUrl,
        LEMNISCATE_EXEC_HOST_TOKEN: execHostToken,
        LEMNISCATE_ADMIN_EMAIL: admin.email,
        LEMNISCATE_ADMIN_PASSWORD: admin.password,
        // Short, so a test that kills the gateway sees its sessions ended as orphans within seconds.
        LEMNISCATE_LOOP_LEASE_SECONDS: '4',
        // The scripted model answers only when the configuration turns it on.
        LEMNISCATE_MODELS_CONFIG: scriptedModels,
        ...databaseEnv,
        ...options.gatewayEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gateway.stdout?.on('data', (d) => logs.push(`[gateway] ${d}`));
    gateway.stderr?.on('data', (d) => logs.push(`[gateway] ${d}`));
    await waitUntil(async () => (await fetch(`${gatewayUrl}/healthz`)).ok, 'the gateway', 60_000, gateway);
  };
  const stopGateway = async (signal: NodeJS.Signals = 'SIGKILL') => {
    const g = gateway;
    if (!g) return { code: null, signal: null };
    if (g.exitCode !== null || g.signalCode !== null) return { code: g.exitCode, signal: g.signalCode };
    return new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      g.once('exit', (code, sig) => resolve({ code, signal: sig }));
      g.kill(signal);
    });
  };
  await startGateway();

  const api = async (token: string, method: string, route: string, body?: unknown) => {
    const res = await fetch(`${gatewayUrl}/api/v1${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  };
  const tokenFor = (email: string, password: string) => mintToken(gatewayUrl, email, password);

  const adminToken = await tokenFor(admin.email, admin.password);
  const repository = makeRepository(join(dir, 'repo'));
  const project = await api(adminToken, 'POST', '/projects', { name: 'demo', repositorySource: repository, defaultRef: 'main' });
  if (project.status !== 201) throw new Error(`project: ${project.status} ${JSON.stringify(project.json)}`);
  const projectId = project.json.id as string;
  const users: Record<string, string> = {};
  for (const [key, role] of [
    ['developer', 'developer'],
    ['security', 'security_officer'],
  ] as const) {
    const email = `${key}@e2e.invalid`;
    const password = randomBytes(12).toString('base64url');
    const created = await api(adminToken, 'POST', '/users', { email, displayName: key, role, password, projectIds: [projectId] });
    if (created.status !== 201) throw new Error(`user ${key}: ${created.status} ${JSON.stringify(created.json)}`);
    users[key] = await tokenFor(email, password);
  }
  const tokens = { admin: adminToken, developer: users.developer!, security: users.security! };

  const cliEnv = (token: string | undefined, extra: Record<string, string> = {}) => ({
    ...env,
    LEMNISCATE_GATEWAY: gatewayUrl,
    ...(token ? { LEMNISCATE_TOKEN: token } : {}),
    LEMNISCATE_PROJECT: 'demo',
    NO_COLOR: '1',
    ...extra,
  });
  const spawnCli: Stack['spawnCli'] = (args, options = {}) =>
    spawn(process.execPath, [CLI, ...args], { cwd: options.cwd ?? dir, env: cliEnv(options.token ?? tokens.developer, options.env), stdio: ['pipe', 'pipe', 'pipe'] });
  const cli: Stack['cli'] = (args, options = {}) =>
    new Promise((resolve) => {
      const started = Date.now();
      const child = spawnCli(args, options);
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (d) => (stdout += d));
      child.stderr!.on('data', (d) => (stderr += d));
      if (options.input !== undefined) child.stdin!.end(options.input);
      else child.stdin!.end();
      child.on('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - started }));
    });

  let scripts = 0;
  return {
    dir,
    gatewayUrl,
    projectId,
    repository,
    tokens,
    execHostUrl,
    execHostToken,
    api,
    cli,
    spawnCli,
    script(name, turns) {
      const file = join(dir, `${name}-${++scripts}.json`);
      writeFileSync(file, JSON.stringify({ turns }));
      return file;
    },
    async publishPolicy(document) {
      const r = await api(tokens.admin, 'POST', `/projects/${projectId}/policy`, { document, comment: 'e2e' });
      if (r.status !== 201 && r.status !== 200) throw new Error(`policy: ${r.status} ${JSON.stringify(r.json)}`);
    },
    stopGateway,
    startGateway,
    execHostStateDir,
    execHostInstance: instanceLabel(execHostStateDir),
    stopExecHost,
    startExecHost,
    logs: () => logs.join(''),
    gatewayPid: () => (gateway as ChildProcess | null)?.pid,
    execHostPid: () => (execHost as ChildProcess | null)?.pid,
    database: pg ? { kind: 'postgres', url: pg.url, proxy } : { kind: 'pglite' },
    async stop() {
      await stopGateway();
      // An exec-host a test killed, or one whose sandboxes outlived a failed destroy, is started
      // again: its first reaper pass clears what is left.
      await stopExecHost('SIGTERM');
      let left = 0;
      try {
        left = readdirSync(join(execHostStateDir, 'sandboxes')).length;
      } catch {
        // never started
      }
      if (left > 0) {
        await startExecHost().catch(() => undefined);
        await stopExecHost('SIGTERM');
      }
      await proxy?.close();
      await pg?.drop();
      if (process.env.LEMNISCATE_E2E_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
      if (process.env.LEMNISCATE_E2E_LOGS === '1') process.stderr.write(logs.join(''));
    },
  };
}

/** Signs in to the gateway at `gatewayUrl` as a person and creates an API token for them (as `lemni login` does). */
export async function mintToken(gatewayUrl: string, email: string, password: string, name = 'e2e'): Promise<string> {
  const login = await fetch(`${gatewayUrl}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
  if (!login.ok) throw new Error(`login ${email}: ${login.status} ${await login.text()}`);
  const { csrfToken } = (await login.json()) as { csrfToken: string };
  const cookie = login.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
  const res = await fetch(`${gatewayUrl}/api/v1/auth/tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': csrfToken },
    body: JSON.stringify({ name }),
  });
  if (!res.ok) throw new Error(`token ${email}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

/** Containers of the platform still present for a session (the label every sandbox carries). */
export function containersOf(sessionId: string): string[] {
  const r = spawnSync('docker', ['ps', '-aq', '--filter', `label=lemniscate.session=${sessionId}`], { encoding: 'utf8' });
  return r.stdout.split('\n').filter(Boolean);
}
