import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { ADMIN_EMAIL, ADMIN_PASSWORD } from '../support/harness';

jest.setTimeout(240_000);

const root = path.resolve(__dirname, '..', '..', '..', '..');
const bin = path.join(__dirname, '..', '..', 'bin', 'lemni-gateway.js');
const child = path.join(__dirname, '..', 'support', 'fixtures', 'gateway-child.js');

interface Running {
  proc: ChildProcessWithoutNullStreams;
  url: string;
  /** The next stdout line that starts with `prefix`. */
  line(prefix: string): Promise<string>;
}

async function start(dataDir: string): Promise<Running> {
  const proc = spawn(process.execPath, [child], {
    env: {
      ...process.env,
      LEMNISCATE_DATA_DIR: dataDir,
      LEMNISCATE_GATEWAY_PORT: '0',
      LEMNISCATE_ADMIN_EMAIL: ADMIN_EMAIL,
      LEMNISCATE_ADMIN_PASSWORD: ADMIN_PASSWORD,
      LEMNISCATE_LOG_LEVEL: 'warn',
      DATABASE_URL: '',
    },
  });
  let buffer = '';
  const lines: string[] = [];
  let wake: (() => void) | undefined;
  proc.stdout.on('data', (d: Buffer) => {
    buffer += d.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    lines.push(...parts);
    wake?.();
  });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<never>((_, reject) => proc.on('exit', (code) => reject(new Error(`gateway exited (${code}): ${stderr}`))));
  const line = async (prefix: string): Promise<string> => {
    for (;;) {
      const i = lines.findIndex((l) => l.startsWith(prefix));
      if (i >= 0) return lines.splice(i, 1)[0] as string;
      await Promise.race([new Promise<void>((resolve) => (wake = resolve)), exited]);
    }
  };
  const listening = await line('Lemniscate gateway listening on ');
  const url = /listening on (\S+)/.exec(listening)?.[1] ?? '';
  return { proc, url, line };
}

async function kill(r: Running): Promise<void> {
  const gone = new Promise((resolve) => r.proc.once('exit', resolve));
  r.proc.kill('SIGKILL');
  await gone;
}

beforeAll(async () => {
  // The restart test runs the compiled gateway, as an operator would.
  await promisify(execFile)('npx', ['tsc', '-b', 'apps/gateway'], { cwd: root });
});

describe('the gateway process', () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'lemni-gw-'));
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('keeps a pending approval across a crash, and it can be answered after the restart', async () => {
    const first = await start(dataDir);
    const login = await request(first.url).post('/api/v1/auth/login').send({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
    const cookie = String(login.headers['set-cookie']).split(';')[0] ?? '';
    const token = (await request(first.url).post('/api/v1/auth/tokens').set('cookie', cookie).set('x-csrf-token', login.body.csrfToken).send({ name: 'e2e' })).body.token as string;
    const auth = { authorization: `Bearer ${token}` };
    const project = (await request(first.url).post('/api/v1/projects').set(auth).send({ name: 'restart', repositorySource: '/srv/git/restart.git' })).body.id as string;
    const session = (await request(first.url).post('/api/v1/sessions').set(auth).send({ projectId: project, instruction: 'survive a crash' })).body.id as string;
    first.proc.stdin.write(`ask ${session}\n`);
    const approvalId = (await first.line('approval ')).split(' ')[1] as string;
    expect((await request(first.url).get(`/api/v1/approvals/${approvalId}`).set(auth)).body.state).toBe('pending');

    await kill(first);

    const second = await start(dataDir);
    try {
      const pending = await request(second.url).get(`/api/v1/approvals/${approvalId}`).set(auth);
      expect(pending.status).toBe(200);
      expect(pending.body).toMatchObject({ state: 'pending', payload: { command: 'npm install' } });
      const approved = await request(second.url).post(`/api/v1/approvals/${approvalId}/approve`).set(auth).send({});
      expect(approved.status).toBe(200);
      expect(approved.body.state).toBe('approved');
    } finally {
      await kill(second);
    }
  });

  it('`migrate` applies the migrations and exits; a bad environment stops the start with a sentence', async () => {
    const run = (args: string[], env: Record<string, string>) =>
      promisify(execFile)(process.execPath, [bin, ...args], { env: { ...process.env, DATABASE_URL: '', ...env } }).then(
        (r) => ({ code: 0, ...r }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
    const migrated = await run(['migrate'], { LEMNISCATE_DATA_DIR: dataDir });
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toMatch(/^Migrations: applied 0001_initial\.sql/);
    const again = await run(['migrate'], { LEMNISCATE_DATA_DIR: dataDir });
    expect(again.stdout).toMatch(/^Migrations: nothing to apply/);
    const bad = await run([], { LEMNISCATE_DATA_DIR: dataDir, LEMNISCATE_GATEWAY_PORT: 'seventy' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe('lemni-gateway: The gateway cannot start because of its environment: LEMNISCATE_GATEWAY_PORT: must be a port number (0–65535).\n');
    const usage = await run(['frobnicate'], {});
    expect(usage.code).toBe(2);
  });
});
