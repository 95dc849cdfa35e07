import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../../src/config';
import type { SandboxDriver } from '../../../src/driver/sandbox.driver';
import { EnvironmentService, JOB_RECORD_DAYS } from '../../../src/environment/environment.service';

/** What an exec-host finds of its preparations when it starts again. */
describe('EnvironmentService.init after a restart', () => {
  let stateDir: string;
  beforeEach(() => (stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-env-init-'))));
  afterEach(() => fs.rmSync(stateDir, { recursive: true, force: true }));

  const job = (state: string) => ({
    jobId: 'x',
    key: 'k',
    state,
    phase: 'setup',
    progress: { done: 1, total: 3, label: 'running postCreateCommand' },
    startedAt: new Date().toISOString(),
    finishedAt: null,
    message: null,
    warnings: [],
  });

  it('ends a preparation that was running as failed with a sentence, and removes records older than the retention', async () => {
    const jobs = path.join(stateDir, 'environments', 'jobs');
    fs.mkdirSync(jobs, { recursive: true });
    fs.writeFileSync(path.join(jobs, 'env-running.json'), JSON.stringify(job('preparing')));
    fs.writeFileSync(path.join(jobs, 'env-running.log'), 'half a log\n');
    fs.writeFileSync(path.join(jobs, 'env-done.json'), JSON.stringify({ ...job('ready'), finishedAt: new Date().toISOString() }));
    const old = new Date(Date.now() - (JOB_RECORD_DAYS + 1) * 24 * 3600 * 1000);
    for (const f of ['env-old.json', 'env-old.log']) {
      fs.writeFileSync(path.join(jobs, f), f.endsWith('.json') ? JSON.stringify(job('ready')) : 'old\n');
      fs.utimesSync(path.join(jobs, f), old, old);
    }
    const service = new EnvironmentService(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: 'a-long-enough-random-token', LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir }), {} as SandboxDriver);
    await service.init();
    expect(fs.readdirSync(jobs).sort()).toEqual(['env-done.json', 'env-running.json', 'env-running.log']);
    const running = JSON.parse(fs.readFileSync(path.join(jobs, 'env-running.json'), 'utf8'));
    expect(running).toMatchObject({ state: 'failed', message: 'The exec-host stopped during this preparation; prepare again.' });
    expect(running.finishedAt).not.toBeNull();
    expect(JSON.parse(fs.readFileSync(path.join(jobs, 'env-done.json'), 'utf8')).state).toBe('ready');
    expect((await service.logOf('env-running', 0)).text).toBe('half a log\n');
    expect((await service.logOf('env-running', 0)).complete).toBe(true);
  });
});
