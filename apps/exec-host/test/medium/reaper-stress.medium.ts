// The reaper runs back to back while many sandboxes are created, used and destroyed at once, and the
// warm pool makes sandboxes (empty, and checked out ahead) in the background: it must never remove
// what a live or a warm sandbox owns (its container, its working copy), and when all is over nothing
// may be left (containers, loop devices, mounts, directories).
import { CreateSandboxRequest, type ExecExit } from '@lemniscate/contracts';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DockerSandboxDriver } from '../../src/driver/docker.driver';
import type { ReapReport } from '../../src/reaper';
import { makeRepo, startHost, type TestHost } from '../support/helpers';

const SANDBOXES = 100;
const CONCURRENCY = 8;

let t: TestHost;
let repo: { dir: string; head: string };

beforeAll(async () => {
  repo = makeRepo();
  t = await startHost({ LEMNISCATE_EXEC_HOST_WARM_POOL: '2', LEMNISCATE_EXEC_HOST_WARM_RUNTIMES: 'runc' });
});

afterAll(async () => {
  await t?.close();
  if (repo) fs.rmSync(repo.dir, { recursive: true, force: true });
});

function loopDevicesOf(dir: string): string[] {
  return execFileSync('losetup', ['-a'], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.includes(dir));
}

function mountsUnder(dir: string): string[] {
  return fs
    .readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((l) => l.includes(dir));
}

it(
  `removes nothing a live or warm sandbox owns while ${SANDBOXES} sandboxes come and go ${CONCURRENCY} at a time beside the warm pool's refills, and leaves nothing behind`,
  async () => {
    const sandboxes = t.host.sandboxes;
    const reaped: ReapReport = { containers: 0, directories: 0, expired: 0, lost: 0 };
    let passes = 0;
    let stop = false;
    const reaper = (async () => {
      while (!stop) {
        const r = await t.host.reaper.reap();
        passes++;
        for (const k of Object.keys(reaped) as (keyof ReapReport)[]) reaped[k] += r[k];
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();

    const failures: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < SANDBOXES) {
        const n = next++;
        const req = CreateSandboxRequest.parse({ sessionId: `stress-${n}-${process.pid}`, repository: { source: repo.dir }, limits: { diskMb: 16, memoryMb: 256 } });
        const info = await sandboxes.create(req);
        try {
          // The container answers and sees its working copy; the host side still has its git data.
          let stdout = '';
          const exit: Omit<ExecExit, 'type'> = await sandboxes.exec(info.sandboxId, { command: `cat README.md && echo ${n} > mark.txt` }, { onOutput: (_s, text) => (stdout += text) });
          if (exit.exitCode !== 0 || stdout !== '# demo\n') failures.push(`${info.sandboxId}: exec ${JSON.stringify({ ...exit, stdout })}`);
          const changes = await sandboxes.changes(info.sandboxId);
          if (!changes.files.some((f) => f.path === 'mark.txt')) failures.push(`${info.sandboxId}: changes ${JSON.stringify(changes)}`);
          if (sandboxes.get(info.sandboxId).state !== 'ready') failures.push(`${info.sandboxId}: state ${sandboxes.get(info.sandboxId).state}`);
        } catch (e) {
          failures.push(`${info.sandboxId}: ${(e as Error).message}`);
        } finally {
          const destroyed = await sandboxes.destroy(info.sandboxId);
          if (!destroyed.destroyed) failures.push(`${info.sandboxId}: already gone when its session destroyed it`);
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    // Some sessions started warm and some cold, so both raced the reaper, as did the pool's refills.
    const pool = sandboxes.poolStats();
    expect({ warm: pool.hits > 0, cold: pool.misses > 0 }).toEqual({ warm: true, cold: true });
    stop = true;
    await reaper;
    // The pool's sandboxes go with the exec-host's shut-down; then nothing may be left.
    await sandboxes.destroyAll();

    expect({ failures }).toEqual({ failures: [] });
    // Every sandbox was owned from its first directory to its last clean-up: nothing was ever an orphan.
    expect(reaped).toEqual({ containers: 0, directories: 0, expired: 0, lost: 0 });
    expect(passes).toBeGreaterThan(SANDBOXES / 4);

    const leftovers = {
      containers: (await new DockerSandboxDriver().listManaged(t.config.instance)).map((c) => c.name),
      directories: fs.readdirSync(path.join(t.stateDir, 'sandboxes')),
      loopDevices: loopDevicesOf(t.stateDir),
      mounts: mountsUnder(t.stateDir),
    };
    expect(leftovers).toEqual({ containers: [], directories: [], loopDevices: [], mounts: [] });
  },
  // A stress test, not a timing one: on a loaded 2-core machine 150 lifecycles took over 180 s.
  900_000,
);
