// The kill, the process cap and the OOM class through each way this host's cgroups can be reached,
// for real, under runc and runsc: the engine layer (LEMNISCATE_CGROUP_LAYOUT=engine: pause, the
// engine's process list, its oom events), which works on every layout, and the files of the layout
// the host has (forced, so a host without it fails here with the refusal). On a hybrid host (v1
// controllers beside /sys/fs/cgroup/unified) v2's freeze and process list also run on the unified
// hierarchy, under runc: its counters need v2's memory and pids controllers, which such a host binds
// to v1 (there the recorded tree in test/unit/driver/cgroups.spec.ts is all that covers them).
// Under runc the kill after a command is the sandbox's runner's (decision 0016) and the layout is its
// fallback: these exec-hosts run without the runner, so the layout does every kill; one more, with the
// runner and the engine layout, shows that the runner's kills freeze nothing.
// One exec-host per layout, one sandbox per runtime, every test on that sandbox.
import type { SandboxInfo, SandboxRuntime } from '@lemniscate/contracts';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { CgroupsV2, engineMessage, probeLayout, type CgroupLayout } from '../../src/driver/cgroups';
import type { DockerDriverOptions } from '../../src/driver/docker.driver';
import { containersOfSession, makeRepo, run, startHost, type TestHost } from '../support/helpers';

jest.setTimeout(120_000);

interface Setup {
  name: string;
  layout: CgroupLayout;
  env: Record<string, string>;
  driver: DockerDriverOptions;
  runtimes: SandboxRuntime[];
  /** Commands and kills through the sandbox's runner (runc only). */
  runner?: boolean;
}

const host = probeLayout('/');
const UNIFIED = '/sys/fs/cgroup/unified';
const hybrid = host.layout === 'v1' && fs.existsSync(`${UNIFIED}/cgroup.procs`);
const setups: Setup[] = [
  { name: 'engine', layout: 'engine', env: { LEMNISCATE_CGROUP_LAYOUT: 'engine', LEMNISCATE_SANDBOX_RUNNER: 'off' }, driver: {}, runtimes: ['runc', 'runsc'] },
  // The files of this host's own layout; v1 on the development machine, where this file was written.
  {
    name: host.layout === 'v2' ? 'v2' : 'v1',
    layout: host.layout === 'v2' ? 'v2' : 'v1',
    env: { LEMNISCATE_CGROUP_LAYOUT: host.layout === 'v2' ? 'v2' : 'v1', LEMNISCATE_SANDBOX_RUNNER: 'off' },
    driver: {},
    runtimes: ['runc', 'runsc'],
  },
  ...(hybrid
    ? [
        {
          name: 'v2 on the unified hierarchy of this hybrid host',
          layout: 'v2' as const,
          env: { LEMNISCATE_SANDBOX_RUNNER: 'off' },
          driver: { cgroupAccess: () => new CgroupsV2({ mount: UNIFIED, proc: '/proc' }) },
          runtimes: ['runc' as const],
        },
      ]
    : []),
  { name: 'engine, with the runner', layout: 'engine', env: { LEMNISCATE_CGROUP_LAYOUT: 'engine' }, driver: {}, runtimes: ['runc'], runner: true },
];

/** How many `action` events the engine recorded for the container between two instants. */
function engineEvents(containerId: string, action: string, sinceMs: number, untilMs: number): number {
  const out = execFileSync(
    'docker',
    ['events', '--since', (sinceMs / 1000).toFixed(3), '--until', (untilMs / 1000).toFixed(3), '--filter', `container=${containerId}`, '--filter', `event=${action}`, '--format', '{{.Action}}'],
    { encoding: 'utf8' },
  );
  return out.split('\n').filter(Boolean).length;
}

let repo: { dir: string; head: string };
beforeAll(() => {
  repo = makeRepo();
});
afterAll(() => {
  fs.rmSync(repo.dir, { recursive: true, force: true });
});

describe.each(setups)('cgroup layout: $name', (setup) => {
  let t: TestHost;
  beforeAll(async () => {
    t = await startHost(setup.env, setup.driver);
  });
  afterAll(async () => {
    await t?.close();
  });

  describe.each(setup.runtimes)('under %s', (runtime) => {
    let sbx: SandboxInfo;
    let containerId: string;
    const session = `cgroups-${setup.layout}-${runtime}-${process.pid}-${setups.indexOf(setup)}`;

    beforeAll(async () => {
      const res = await t
        .api()
        .post('/v1/sandboxes')
        .send({ sessionId: session, repository: { source: repo.dir }, runtime, limits: { pids: 64, memoryMb: 256, commandTimeoutSeconds: 30 } });
      if (res.status !== 201) throw new Error(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
      sbx = res.body as SandboxInfo;
      [containerId] = containersOfSession(session) as [string];
    });

    /** After any test the sandbox runs an ordinary command, and nothing of the test is left running. */
    async function expectUsable(leftover: RegExp): Promise<void> {
      const ps = await run(t, sbx.sandboxId, 'echo alive; ps -eo args=');
      expect(ps.exitCode).toBe(0);
      expect(ps.stdout.split('\n')[0]).toBe('alive');
      expect({ survivors: ps.stdout.split('\n').filter((l) => leftover.test(l)) }).toEqual({ survivors: [] });
    }

    /**
     * Pauses are the engine layer's freeze: there under runc, never under runsc (killed from inside),
     * with the files, or through the runner (its kill(-1) from inside). A command that left no process
     * behind needs no freeze: only the keeper is left.
     */
    function expectPauses(sinceMs: number, leftProcesses = true): void {
      const pauses = engineEvents(containerId, 'pause', sinceMs, Date.now());
      if (setup.layout === 'engine' && runtime === 'runc' && leftProcesses && !setup.runner) expect(pauses).toBeGreaterThanOrEqual(1);
      else expect(pauses).toBe(0);
    }

    it('classes a memory bomb as oom, and the sandbox runs the next command', async () => {
      const since = Date.now();
      const r = await run(t, sbx.sandboxId, 'python3 -c "x = []\nwhile True: x.append(bytearray(16 * 1024 * 1024))"', 20_000);
      // Under runc the kernel's OOM killer takes the command (137); under gVisor its allocation fails
      // at the per-command address-space cap (withMemoryCap), whatever the layout. First on a fresh
      // sandbox: after a fork bomb gVisor's own kernel holds more of the memory cgroup, and the cap
      // can then be met by the sandbox rather than by the command (a property of runsc, not of the layout).
      expect({ classes: r.classes, exitCode: r.exitCode }).toEqual({ classes: ['oom'], exitCode: runtime === 'runc' ? 137 : 1 });
      await expectUsable(/python3/);
      // The kernel ended the command's only process: nothing was left to freeze and kill.
      expectPauses(since, false);
    });

    it('kills a command that never ends at its timeout, with its background child, and the sandbox stays usable', async () => {
      const since = Date.now();
      const r = await run(t, sbx.sandboxId, 'sleep 3571 & echo "child $!"; sleep 3572', 2_000);
      expect(r).toMatchObject({ timedOut: true, class: 'timeout' });
      expect(r.stdout).toMatch(/^child \d+/);
      await expectUsable(/sleep 357[12]/);
      expectPauses(since);
    });

    it('ends a fork bomb at the process cap, and the next command succeeds', async () => {
      const since = Date.now();
      const r = await run(t, sbx.sandboxId, 'echo armed; bomb() { bomb | bomb; }; bomb', 5_000);
      expect(r.stdout).toContain('armed');
      expect(r.classes).toContain('pids_limit');
      expect(r.classes).not.toContain('sandbox_lost');
      await expectUsable(/bomb/);
      expectPauses(since);
    });
  });

  it(`reports layout ${setup.layout} in its health, with no container handled a weaker way`, async () => {
    const health = (await t.api().get('/v1/health')).body as { cgroups: { layout: string; message?: string }; sandboxes: number };
    const message = setup.layout === 'engine' ? engineMessage('LEMNISCATE_CGROUP_LAYOUT is engine') : undefined;
    // Asked after every runtime's tests: their sandboxes are still there.
    expect(health.sandboxes).toBe(setup.runtimes.length);
    expect(health.cgroups).toEqual({ layout: setup.layout, ...(message ? { message } : {}) });
  });
});
