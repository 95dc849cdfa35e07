import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExecHostHealth, ExecHostHeartbeat, UserRole } from '@lemniscate/contracts';

/*
 * A real gateway in pool mode (LEMNISCATE_EXEC_HOST_POOL=true) for the console's browser tests: its own
 * process on a fresh PGlite directory, serving the console's test build (the one the Playwright web
 * server builds), with an administrator, a security officer and a developer. Exec-hosts are played at
 * the network boundary: each is a loopback HTTP server answering the gateway's call-back to
 * `/v1/health` with the exec-host token, and registers (then keeps heartbeating) by POSTing
 * ExecHostHeartbeat bodies to /api/v1/exec-hosts/heartbeat, as an exec-host started with
 * LEMNISCATE_GATEWAY_URL does. No container engine is needed: no session is started.
 */

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
/** Where the Playwright web server writes the console's test build (vite.config.ts, `testBuildDir`). */
const CONSOLE_BUILD = path.join(ROOT, 'node_modules/.cache/lemniscate-console-test');
const GATEWAY_BIN = path.join(ROOT, 'apps/gateway/bin/lemni-gateway.js');

export interface Person {
  email: string;
  password: string;
}

export interface PoolGateway {
  url: string;
  people: Record<UserRole, Person>;
  /** Registers an exec-host (a loopback server that answers the gateway's health check) and keeps it heartbeating. */
  addExecHost(id: string, over?: Partial<ExecHostHeartbeat>): Promise<void>;
  /** The REST API as the administrator (cookie and CSRF token of an API sign-in). */
  asAdmin(method: string, route: string, body?: unknown): Promise<{ status: number; json: unknown }>;
  logs(): string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

async function until(what: string, check: () => Promise<boolean>, child: ChildProcess, logs: string[], ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${what}: the gateway exited with ${child.exitCode}\n${logs.join('')}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`${what} within ${ms / 1000} s\n${logs.join('')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const health = (sandboxes: number): ExecHostHealth => ({
  status: 'ok',
  engine: { reachable: true, version: '27.3.1' },
  runtimes: { runc: true, runsc: true },
  image: { name: 'lemniscate/sandbox:current', present: true },
  seccomp: { path: '/etc/lemniscate/seccomp.json', valid: true },
  apparmor: { state: 'unavailable', profile: 'lemniscate-sandbox' },
  diskCap: { mechanism: 'ext4-loop', available: true },
  cgroups: { layout: 'v2' },
  sandboxes,
});

export async function startPoolGateway(): Promise<PoolGateway> {
  if (!fs.existsSync(path.join(ROOT, 'apps/gateway/dist/main.js'))) throw new Error('The gateway is not built: run `npx tsc -b tsconfig.build.json` first.');
  if (!fs.existsSync(path.join(CONSOLE_BUILD, 'index.html'))) throw new Error(`The console's test build is missing at ${CONSOLE_BUILD} (the Playwright web server writes it).`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemniscate-console-pool-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const token = randomBytes(24).toString('base64url');
  const people: Record<UserRole, Person> = {
    admin: { email: 'admin@pool.invalid', password: randomBytes(12).toString('base64url') },
    security_officer: { email: 'officer@pool.invalid', password: randomBytes(12).toString('base64url') },
    developer: { email: 'developer@pool.invalid', password: randomBytes(12).toString('base64url') },
  };
  const logs: string[] = [];
  fs.mkdirSync(path.join(dir, 'home'));
  const gateway = spawn(process.execPath, [GATEWAY_BIN], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: path.join(dir, 'home'),
      LEMNISCATE_LOG_LEVEL: 'warn',
      LEMNISCATE_GATEWAY_PORT: String(port),
      LEMNISCATE_DATA_DIR: path.join(dir, 'data'),
      LEMNISCATE_EXEC_HOST_POOL: 'true',
      LEMNISCATE_EXEC_HOST_TOKEN: token,
      // The test's hosts heartbeat every 2 s; none is declared lost while a test looks at it.
      LEMNISCATE_EXEC_HOST_LOST_SECONDS: '3600',
      LEMNISCATE_ADMIN_EMAIL: people.admin.email,
      LEMNISCATE_ADMIN_PASSWORD: people.admin.password,
      LEMNISCATE_CONSOLE_DIR: CONSOLE_BUILD,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  gateway.stdout?.on('data', (d) => logs.push(`[gateway] ${d}`));
  gateway.stderr?.on('data', (d) => logs.push(`[gateway] ${d}`));
  const servers: Server[] = [];
  const beats: NodeJS.Timeout[] = [];
  const stop = async () => {
    for (const b of beats) clearInterval(b);
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    if (gateway.exitCode === null && gateway.signalCode === null) {
      await new Promise<void>((resolve) => {
        gateway.once('exit', () => resolve());
        gateway.kill('SIGTERM');
      });
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };

  try {
    await until('The gateway did not answer /healthz', async () => (await fetch(`${url}/healthz`)).ok, gateway, logs);

    // The administrator's API sign-in: its cookie and CSRF token.
    const login = await fetch(`${url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(people.admin) });
    if (!login.ok) throw new Error(`admin sign-in: ${login.status} ${await login.text()}`);
    const { csrfToken } = (await login.json()) as { csrfToken: string };
    const cookie = login.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const asAdmin: PoolGateway['asAdmin'] = async (method, route, body) => {
      const res = await fetch(`${url}/api/v1${route}`, {
        method,
        headers: { cookie, 'x-csrf-token': csrfToken, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? (JSON.parse(text) as unknown) : null };
    };
    for (const [role, name] of [
      ['security_officer', 'Sam Officer'],
      ['developer', 'Dana Developer'],
    ] as const) {
      const created = await asAdmin('POST', '/users', { ...people[role], displayName: name, role, projectIds: [] });
      if (created.status !== 201) throw new Error(`user ${role}: ${created.status} ${JSON.stringify(created.json)}`);
    }

    const addExecHost: PoolGateway['addExecHost'] = async (id, over = {}) => {
      const server = createServer((req, res) => {
        if (req.headers.authorization !== `Bearer ${token}`) return void res.writeHead(401).end();
        if (req.method === 'GET' && req.url === '/v1/health') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(health(over.load ?? 0)));
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'not_found', message: 'This test exec-host only answers its health check.' }));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      servers.push(server);
      const beat: ExecHostHeartbeat = {
        id,
        address: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        runtimes: ['runc', 'runsc'],
        images: ['lemniscate/sandbox:current'],
        environments: [],
        capacity: 8,
        load: 0,
        version: '0.1.0',
        ...over,
      };
      const send = () => fetch(`${url}/api/v1/exec-hosts/heartbeat`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(beat) });
      const first = await send();
      if (first.status !== 200) throw new Error(`registration of ${id}: ${first.status} ${await first.text()}`);
      beats.push(setInterval(() => void send().catch(() => undefined), 2_000));
    };

    return { url, people, addExecHost, asAdmin, logs: () => logs.join(''), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
