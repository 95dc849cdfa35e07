// Decision 0016: a runc sandbox whose image has no runner (an environment image not built from the
// sandbox image), or an exec-host with LEMNISCATE_SANDBOX_RUNNER=off, runs every command as an engine
// exec, with the same answers and the same kill after each command.
import type { SandboxInfo } from '@lemniscate/contracts';
import * as fs from 'node:fs';
import type { DockerDriverOptions } from '../../src/driver/docker.driver';
import { makeRepo, run, startHost, type TestHost } from '../support/helpers';

jest.setTimeout(120_000);

let repo: { dir: string; head: string };
beforeAll(() => {
  repo = makeRepo();
});
afterAll(() => {
  fs.rmSync(repo.dir, { recursive: true, force: true });
});

const setups: { name: string; env: Record<string, string>; driver: DockerDriverOptions }[] = [
  { name: 'an image without the runner', env: {}, driver: { runnerPath: '/usr/local/lib/lemniscate/no-such-runner' } },
  { name: 'LEMNISCATE_SANDBOX_RUNNER=off', env: { LEMNISCATE_SANDBOX_RUNNER: 'off' }, driver: {} },
];

describe.each(setups)('runc, $name', (setup) => {
  let t: TestHost;
  let sbx: SandboxInfo;

  beforeAll(async () => {
    t = await startHost(setup.env, setup.driver);
    const res = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: `runner-fallback-${process.pid}-${setups.indexOf(setup)}`, repository: { source: repo.dir }, runtime: 'runc', limits: { commandTimeoutSeconds: 30 } });
    if (res.status !== 201) throw new Error(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
    sbx = res.body as SandboxInfo;
  });

  afterAll(async () => {
    if (sbx) await t.api().delete(`/v1/sandboxes/${sbx.sandboxId}`);
    await t?.close();
  });

  it('runs commands as engine execs: the same output, exit status and user, and no runner in the sandbox', async () => {
    const r = await run(t, sbx.sandboxId, 'echo out; echo err >&2; id -u; ps -eo comm=; exit 3');
    expect({ exitCode: r.exitCode, stderr: r.stderr }).toEqual({ exitCode: 3, stderr: 'err\n' });
    const lines = r.stdout.split('\n');
    expect(lines.slice(0, 2)).toEqual(['out', '10001']);
    expect(lines).not.toContain('sandbox-runner');
  });

  it('still kills what a command left running, and a command over its time limit', async () => {
    const left = await run(t, sbx.sandboxId, 'sleep 3581 > /dev/null 2>&1 & echo started');
    expect(left.stdout).toBe('started\n');
    const timed = await run(t, sbx.sandboxId, 'sleep 3582', 1_000);
    expect(timed).toMatchObject({ timedOut: true, class: 'timeout' });
    const ps = await run(t, sbx.sandboxId, 'ps -eo args=');
    expect(ps.stdout.split('\n').filter((l) => /sleep 358[12]/.test(l))).toEqual([]);
  });
});
