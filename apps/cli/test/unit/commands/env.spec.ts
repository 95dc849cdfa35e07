import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EnvironmentLog, EnvironmentStatus, type EnvironmentJobView } from '@lemniscate/contracts';
import { FakeGateway, GOOD_TOKEN } from '../../support/fake-gateway';
import { buildCli, lemni } from '../../support/run-bin';

let gateway: FakeGateway;
let home: string;

beforeAll(() => buildCli(), 180_000);
beforeEach(async () => {
  gateway = await new FakeGateway().start();
  home = mkdtempSync(path.join(os.tmpdir(), 'lemni-home-'));
});
afterEach(async () => {
  await gateway.close();
  rmSync(home, { recursive: true, force: true });
});

const env = () => ({ HOME: home, LEMNISCATE_GATEWAY: gateway.url, LEMNISCATE_TOKEN: GOOD_TOKEN, LEMNISCATE_ENV_POLL_MS: '10' });
const KEY = `sha256:${'0123456789abcdef'.repeat(4)}`;

function job(over: Partial<EnvironmentJobView> = {}): EnvironmentJobView {
  return {
    jobId: 'job-7',
    key: KEY,
    state: 'preparing',
    phase: 'setup',
    progress: { done: 3, total: 5, label: 'running postCreateCommand' },
    startedAt: '2026-12-04T10:00:00.000Z',
    finishedAt: null,
    message: null,
    warnings: [],
    ...over,
  };
}

function environment(over: Partial<EnvironmentStatus> = {}): EnvironmentStatus {
  return {
    state: 'preparing',
    ref: 'main',
    commit: 'c'.repeat(40),
    key: KEY,
    devcontainer: {
      path: '.devcontainer/devcontainer.json',
      image: 'mcr.microsoft.com/devcontainers/typescript-node:22',
      setupCommands: ['npm ci', 'npm run build'],
      warnings: ['forwardPorts is ignored: sessions have no network.'],
    },
    job: job(),
    message: 'The environment is being prepared for these inputs; sessions are refused until it is ready.',
    ...over,
  };
}

const ready = (over: Partial<EnvironmentJobView> = {}) =>
  environment({
    state: 'ready',
    job: job({ state: 'ready', phase: 'done', progress: { done: 5, total: 5, label: 'done' }, finishedAt: '2026-12-04T10:03:00.000Z', message: 'Prepared with 2 set-up commands.', ...over }),
    message: 'The environment is ready: sessions start from it.',
  });
const failed = () =>
  environment({
    state: 'failed',
    job: job({
      state: 'failed',
      phase: 'done',
      progress: { done: 3, total: 5, label: 'failed' },
      finishedAt: '2026-12-04T10:02:00.000Z',
      message: 'postCreateCommand "npm run build" exited with code 2.',
    }),
    message: 'The last preparation of these inputs failed.',
  });

describe('lemni env status', () => {
  it('prints state, ref and commit, short key, image, set-up commands, warnings, the latest job and the sentence', async () => {
    gateway.environments.set('p1', environment());
    const r = await lemni(['env', 'status', '--project', 'demo'], { env: env() });
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout).toBe(
      [
        'Project     demo',
        'State       preparing',
        'Ref         main at cccccccccccc',
        'Key         sha256:0123456789ab',
        'Image       mcr.microsoft.com/devcontainers/typescript-node:22',
        'Config      .devcontainer/devcontainer.json',
        'Set-up      npm ci',
        '            npm run build',
        'Warnings    forwardPorts is ignored: sessions have no network.',
        'Job         job-7: preparing, setup, 3/5 running postCreateCommand',
        '            started 2026-12-04T10:00:00.000Z',
        '',
        'The environment is being prepared for these inputs; sessions are refused until it is ready.',
        '',
      ].join('\n'),
    );
    expect(gateway.hits('GET', '/projects/p1/environment')).toHaveLength(1);
  });

  it("--json prints the gateway's object; a repository without a devcontainer says it uses the sandbox image", async () => {
    gateway.environments.set('p1', ready());
    const json = await lemni(['env', 'status', '--project', 'demo', '--json'], { env: env() });
    expect(EnvironmentStatus.parse(JSON.parse(json.stdout))).toEqual(ready());
    gateway.environments.delete('p1');
    const base = await lemni(['env', 'status', '--project', 'demo'], { env: env() });
    expect(base.stdout).toContain('State       base\n');
    expect(base.stdout).toContain('Image       the sandbox image (the repository has no .devcontainer/devcontainer.json)\n');
    expect(base.stdout).toContain('Job         none\n');
  });

  it('an unknown project is one sentence and exit 1', async () => {
    const r = await lemni(['env', 'status', '--project', 'nope'], { env: env() });
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
    expect(r.stderr).toBe('Unknown project "nope": the projects you can use are demo (`lemni projects` lists them).\n');
  });
});

describe('lemni env prepare', () => {
  it('starts a preparation and says how to follow it; --force asks for a new one', async () => {
    gateway.environments.set('p1', ready());
    gateway.prepares.set('p1', environment());
    const r = await lemni(['env', 'prepare', '--project', 'demo'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('Preparing the environment of demo: job job-7, 3/5 running postCreateCommand.\nFollow it with `lemni env logs --project demo --follow`; sessions start once it is ready.\n');
    await lemni(['env', 'prepare', '--project', 'demo', '--force', '--json'], { env: env() });
    expect(gateway.hits('POST', '/projects/p1/environment/prepare').map((h) => h.body)).toEqual([{ force: false }, { force: true }]);
  });

  it('already ready, or nothing to prepare: exit 0 with a sentence', async () => {
    gateway.environments.set('p1', ready());
    const r = await lemni(['env', 'prepare', '--project', 'demo', '--wait'], { env: env() });
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 0, stdout: 'The environment of demo is ready (key sha256:0123456789ab): sessions start from it.\n' });
    gateway.environments.delete('p1');
    const base = await lemni(['env', 'prepare', '--project', 'demo'], { env: env() });
    expect(base.stdout).toBe('The repository of demo has no devcontainer: sessions start from the sandbox image, nothing to prepare.\n');
  });

  it('--wait prints the log as it comes and exits 0 once the environment is ready', async () => {
    gateway.prepares.set('p1', environment());
    gateway.jobLogs.set('job-7', {
      projectId: 'p1',
      parts: ['Reading .devcontainer/devcontainer.json\n', '$ npm ci\n', '$ npm run build\n', 'Snapshot taken.\n'],
      revealed: 0,
      grows: true,
      after: ready(),
    });
    const r = await lemni(['env', 'prepare', '--project', 'demo', '--wait'], { env: env() });
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout).toBe(
      [
        'Preparing the environment of demo: job job-7, 3/5 running postCreateCommand.',
        'Reading .devcontainer/devcontainer.json',
        '$ npm ci',
        '$ npm run build',
        'Snapshot taken.',
        'The environment of demo is ready (key sha256:0123456789ab): sessions start from it.',
        '',
      ].join('\n'),
    );
    // Each page asked from where the last one ended.
    expect(gateway.requests.filter((q) => q.path.startsWith('/projects/p1/environment/jobs/job-7/log')).map((q) => q.path.split('offset=')[1])).toEqual(['0', '40', '49', '65', '81']);
  });

  it('--wait exits 1 with the reason when the preparation fails; --json prints the final status', async () => {
    gateway.prepares.set('p1', environment());
    gateway.jobLogs.set('job-7', { projectId: 'p1', parts: ['$ npm ci\n', '$ npm run build\nerror TS2304\n'], revealed: 0, grows: true, after: failed() });
    const r = await lemni(['env', 'prepare', '--project', 'demo', '--wait', '--json'], { env: env() });
    expect(r.code).toBe(1);
    expect(EnvironmentStatus.parse(JSON.parse(r.stdout))).toEqual(failed());
    expect(r.stderr).toBe(
      'Preparing the environment of demo: job job-7, 3/5 running postCreateCommand.\n' +
        'The preparation of the environment of project demo failed: postCreateCommand "npm run build" exited with code 2. Read its log with `lemni env logs --project demo`; `lemni env prepare --project demo --force` prepares it again.\n',
    );
    // A failed preparation is not retried without --force: the gateway answers failed at once.
    gateway.prepares.delete('p1');
    const again = await lemni(['env', 'prepare', '--project', 'demo'], { env: env() });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('failed: postCreateCommand "npm run build" exited with code 2.');
  });

  it("a security officer's refusal is the gateway's sentence and exit 1", async () => {
    gateway.prepareRefusal = { status: 403, code: 'forbidden', message: 'As a security officer you may not create sessions.' };
    const r = await lemni(['env', 'prepare', '--project', 'demo'], { env: env() });
    expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ code: 1, stdout: '', stderr: 'As a security officer you may not create sessions. (request req-1)\n' });
  });
});

describe('lemni env logs', () => {
  beforeEach(() => {
    gateway.environments.set('p1', environment());
    gateway.jobLogs.set('job-7', { projectId: 'p1', parts: ['one\n', 'two\n', 'three\n'], revealed: 1, grows: false, after: ready() });
  });

  it("prints what the latest preparation's log holds now, and with --follow until it ends", async () => {
    const now = await lemni(['env', 'logs', '--project', 'demo'], { env: env() });
    expect({ code: now.code, stdout: now.stdout }).toEqual({ code: 0, stdout: 'one\n' });
    gateway.jobLogs.set('job-7', { projectId: 'p1', parts: ['one\n', 'two\n', 'three\n'], revealed: 1, grows: true });
    const followed = await lemni(['env', 'logs', '--project', 'demo', '--follow'], { env: env() });
    expect({ code: followed.code, stdout: followed.stdout }).toEqual({ code: 0, stdout: 'one\ntwo\nthree\n' });
  });

  it('--job reads that preparation; --json prints the log read as one object', async () => {
    gateway.jobLogs.set('job-3', { projectId: 'p1', parts: ['old\n'], revealed: 0, grows: true });
    const r = await lemni(['env', 'logs', '--project', 'demo', '--job', 'job-3', '--json'], { env: env() });
    expect(r.code).toBe(0);
    expect(EnvironmentLog.parse(JSON.parse(r.stdout))).toEqual({ jobId: 'job-3', text: 'old\n', offset: 0, nextOffset: 4, complete: true });
    expect(gateway.hits('GET', '/projects/p1/environment')).toHaveLength(0);
  });

  it('an unknown job, or no preparation at all, is one sentence and exit 1', async () => {
    const unknown = await lemni(['env', 'logs', '--project', 'demo', '--job', 'job-99'], { env: env() });
    expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({ code: 1, stderr: 'Project "demo" has no environment preparation job-99. (request req-1)\n' });
    gateway.environments.set('p1', environment({ state: 'not_prepared', job: null, message: 'Never prepared.' }));
    const none = await lemni(['env', 'logs', '--project', 'demo'], { env: env() });
    expect({ code: none.code, stderr: none.stderr }).toEqual({
      code: 1,
      stderr: 'No preparation of the environment of demo for its current inputs yet; `lemni env prepare --project demo` starts one.\n',
    });
  });
});

describe('lemni -p while the environment is not ready', () => {
  it("prints the gateway's sentence on stderr, nothing on stdout, and exits 1", async () => {
    const sentence =
      'The environment of project "demo" was never prepared for its current inputs: its preparation has started (job job-7), and sessions start once it is ready. Follow it with `lemni env logs --project demo --follow`.';
    gateway.sessionRefusal = { status: 409, code: 'environment_not_ready', message: sentence };
    for (const format of ['text', 'json', 'stream-json']) {
      const r = await lemni(['-p', 'make the tests pass', '--project', 'demo', '--output-format', format], { env: env() });
      expect({ format, code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ format, code: 1, stdout: '', stderr: `${sentence} (request req-1)\n` });
    }
  });
});
