// S4: time, processes, memory, disk and output are capped; going over a cap ends the command with
// the class that names it, the host stays responsive and the caps do not leak onto the host.
import { ExecHostRoutes, type SandboxInfo } from '@lemniscate/contracts';
import { randomBytes } from 'node:crypto';
import { statfsSync } from 'node:fs';
import { RUNTIMES, SANDBOX_IMAGES, containersOfSandbox, execHostFor, expectSentence, repoFixture, type ExecHostProcess, type RepoFixture } from '../support/attack-harness';

let host: ExecHostProcess;
let repo: RepoFixture;

/** Sandboxes with the shortest lifetime, created first for each image so that their minute runs while that image's other tests do. */
const shortLived: Partial<Record<(typeof RUNTIMES)[number], SandboxInfo>> = {};

beforeAll(() => {
  repo = repoFixture();
});

afterAll(() => {
  repo?.remove();
});

async function timedHealth(): Promise<number> {
  const started = performance.now();
  await host.client.healthReport();
  return performance.now() - started;
}

/** Process command lines in the sandbox, to look for survivors of a killed command. */
async function processes(sandboxId: string): Promise<string[]> {
  const ps = await host.client.run(sandboxId, { command: 'ps -eo args=', timeoutMs: 20_000 });
  expect(ps.exitCode).toBe(0);
  return ps.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}

/**
 * A command that writes a program into pid 1 where it waits (x86-64): when its wait returns, pid 1
 * execs a shell that writes `/workspace/.MARK` a second later and stays, as pid 1, which no kill
 * ends. Prints `written`, or `refused ERRNO` for the first step the kernel refused.
 */
function takeoverOfPid1(mark: string): string {
  return String.raw`
import errno, struct
def attack():
    m = open("/proc/1/mem", "r+b", buffering=0)
    pc = int(open("/proc/1/syscall").read().split()[-1], 16)
    path, dash = b"/bin/bash\0", b"-c\0"
    cmd = b"sleep 1; echo ${mark} > /workspace/.${mark}; exec sleep 3600 # ${mark}\0"
    p_path = pc + 32
    p_dash = p_path + len(path)
    p_cmd = p_dash + len(dash)
    argv = (p_cmd + len(cmd) + 7) & ~7
    # mov rdi, path; mov rsi, argv; xor edx, edx; mov eax, 59 (execve); syscall
    code = b"\x48\xbf" + struct.pack("<Q", p_path) + b"\x48\xbe" + struct.pack("<Q", argv) + b"\x31\xd2\xb8\x3b\x00\x00\x00\x0f\x05"
    blob = (code.ljust(32, b"\x90") + path + dash + cmd).ljust(argv - pc, b"\0") + struct.pack("<QQQQ", p_path, p_dash, p_cmd, 0)
    m.seek(pc)
    m.write(blob)
    return "written"
try:
    print(attack())
except OSError as e:
    print("refused", errno.errorcode.get(e.errno, e.errno))
`;
}

/** After any attack the sandbox still runs an ordinary command, and its working copy is intact. */
async function expectStillWorks(sandboxId: string): Promise<void> {
  const after = await host.client.run(sandboxId, { command: 'echo alive && echo ok > /workspace/.alive && cat /workspace/.alive && rm /workspace/.alive', timeoutMs: 30_000 });
  expect({ exitCode: after.exitCode, stdout: after.stdout, stderr: after.stderr, class: after.class }).toEqual({ exitCode: 0, stdout: 'alive\nok\n', stderr: '', class: null });
}

describe.each(SANDBOX_IMAGES)('sandbox image from $route', (image) => {
  execHostFor(image, async (started) => {
    host = started;
    for (const runtime of RUNTIMES) shortLived[runtime] = await host.createSandbox({ repository: { source: repo.dir }, runtime, limits: { lifetimeMinutes: 1 } }, `lifetime-${runtime}`);
  });

  describe.each(RUNTIMES)('resource caps under %s', (runtime) => {
    describe('time', () => {
      let sandboxId: string;
      beforeAll(async () => {
        sandboxId = (await host.createSandbox({ repository: { source: repo.dir }, runtime }, `time-${runtime}`)).sandboxId;
      });

      it('kills a command that never ends at its timeout, with its background child', async () => {
        const result = await host.client.run(sandboxId, { command: 'sleep 3571 & echo "child $!"; sleep 3572', timeoutMs: 2_000 });
        expect(result).toMatchObject({ timedOut: true, class: 'timeout' });
        expect(result.classes[0]).toBe('timeout');
        expectSentence(result.message ?? '', 'timeout');
        expect(result.stdout).toMatch(/^child \d+/);
        expect(result.durationMs).toBeGreaterThanOrEqual(2_000);
        expect(result.durationMs).toBeLessThan(15_000);
        const left = (await processes(sandboxId)).filter((p) => /sleep 357[12]/.test(p));
        expect({ survivors: left }).toEqual({ survivors: [] });
        await expectStillWorks(sandboxId);
      });

      it('kills a command that ignores SIGTERM and spins', async () => {
        const result = await host.client.run(sandboxId, { command: "trap '' TERM INT HUP; while :; do : spin-3575; done", timeoutMs: 2_000 });
        expect(result).toMatchObject({ timedOut: true, class: 'timeout' });
        expect(result.durationMs).toBeLessThan(15_000);
        const left = (await processes(sandboxId)).filter((p) => p.includes('spin-3575'));
        expect({ survivors: left }).toEqual({ survivors: [] });
        await expectStillWorks(sandboxId);
      });

      it('leaves no daemon behind: a child that detached itself with setsid is killed too', async () => {
        const result = await host.client.run(sandboxId, { command: 'setsid nohup sleep 3573 >/dev/null 2>&1 < /dev/null & sleep 3574', timeoutMs: 2_000 });
        expect(result).toMatchObject({ timedOut: true, class: 'timeout' });
        const left = (await processes(sandboxId)).filter((p) => /sleep 357[34]/.test(p));
        const finding = 'processes a timed-out command detached with setsid, still running';
        expect({ [finding]: left }).toEqual({ [finding]: [] });
        await expectStillWorks(sandboxId);
      });

      // The kill after a command spares pid 1 (the sandbox's keeper); a command that could write into
      // it would live on as pid 1. The keeper is not the command's user, so the write is refused.
      (process.arch === 'x64' ? it : it.skip)('a command cannot write itself into pid 1 to live on after its kill', async () => {
        const mark = `pwned${randomBytes(4).toString('hex')}`;
        const attempt = await host.client.run(sandboxId, { command: `python3 - <<'ATTACK'\n${takeoverOfPid1(mark)}\nATTACK\n`, timeoutMs: 30_000 });
        expect({ exitCode: attempt.exitCode, stdout: attempt.stdout, stderr: attempt.stderr }).toEqual({ exitCode: 0, stdout: 'refused EACCES\n', stderr: '' });
        // Longer than the second the written program would wait before leaving its mark.
        await new Promise((r) => setTimeout(r, 2_500));
        const after = await host.client.run(sandboxId, { command: `ls -a /workspace; ps -eo args=`, timeoutMs: 20_000 });
        const finding = 'traces of a program written into pid 1';
        expect({ [finding]: after.stdout.split('\n').filter((l) => l.includes(mark)) }).toEqual({ [finding]: [] });
        expect((await processes(sandboxId))[0]).toBe('/bin/bash -c trap "" TERM INT HUP; while :; do sleep 3600 & wait; done');
        await expectStillWorks(sandboxId);
      });

      it('cuts output at the cap and says so', async () => {
        const info = await host.client.get(sandboxId);
        const cap = info.limits.outputCapBytes;
        const result = await host.client.run(sandboxId, { command: `head -c ${cap * 3} /dev/zero | tr '\\0' 'x'`, timeoutMs: 30_000 });
        expect(result).toMatchObject({ exitCode: 0, truncated: true, class: 'output_truncated' });
        expect(result.stdout.length).toBeLessThanOrEqual(cap + 200);
        expect(result.stdout).toContain(`[lemniscate: output truncated at the cap of ${cap} bytes]`);
        await expectStillWorks(sandboxId);
      });
    });

    describe('processes', () => {
      let sandboxId: string;
      const pids = 64;
      beforeAll(async () => {
        sandboxId = (await host.createSandbox({ repository: { source: repo.dir }, runtime, limits: { pids, commandTimeoutSeconds: 60 } }, `pids-${runtime}`)).sandboxId;
      });

      it('holds the pids cap: forking stops with EAGAIN below the cap', async () => {
        const program = String.raw`
import errno, json, os, signal, time
children = []
err = None
try:
    for _ in range(${pids * 4}):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
except OSError as e:
    err = errno.errorcode.get(e.errno)
for c in children:
    os.kill(c, signal.SIGKILL)
    os.waitpid(c, 0)
print(json.dumps({"forked": len(children), "errno": err}))
`;
        const result = await host.client.run(sandboxId, { command: `python3 - <<'EOF'\n${program}\nEOF`, timeoutMs: 30_000 });
        expect({ exitCode: result.exitCode, stderr: result.stderr }).toEqual({ exitCode: 0, stderr: '' });
        const outcome = JSON.parse(result.stdout.trim().split('\n').pop() ?? '{}') as { forked: number; errno: string | null };
        expect(outcome.errno).toBe('EAGAIN');
        expect(outcome.forked).toBeLessThan(pids);
        expect(outcome.forked).toBeGreaterThan(0);
      });

      it('survives a fork bomb: ended as pids_limit or at its timeout, the host answers health within 2 s during the bomb', async () => {
        const latencies: Promise<number>[] = [];
        let sawForkFailure = false;
        const run = host.client.execStream(sandboxId, { command: 'echo armed; bomb() { bomb | bomb; }; bomb', timeoutMs: 10_000 }, (chunk) => {
          if (chunk.type === 'stdout' && chunk.data.includes('armed')) latencies.push(timedHealth());
          if (chunk.type === 'stderr' && !sawForkFailure && /fork/.test(chunk.data)) {
            sawForkFailure = true;
            latencies.push(timedHealth());
          }
        });
        const { exit } = await run;
        const measured = await Promise.all(latencies);
        expect(measured.length).toBeGreaterThanOrEqual(1);
        for (const ms of measured) expect(ms).toBeLessThan(2_000);
        expect(['pids_limit', 'timeout']).toContain(exit.class);
        expectSentence(exit.message ?? '', exit.class ?? undefined);
        if (exit.class === 'timeout') expect(exit.timedOut).toBe(true);
        // The cap must have been met, not merely the clock.
        expect({ forkFailureSeen: sawForkFailure, classes: exit.classes.includes('pids_limit') }).not.toEqual({ forkFailureSeen: false, classes: false });
        expect(await timedHealth()).toBeLessThan(2_000);
        // Under both runtimes the bomb ends as a limit of that command, never of the sandbox: under gVisor
        // the command runs with a lower RLIMIT_NPROC than the sandbox user (withProcessCap), so the kill
        // that ends it can still be spawned.
        expect(exit.classes).not.toContain('sandbox_lost');
        const left = (await processes(sandboxId)).filter((p) => p.includes('bomb'));
        expect({ survivors: left.length }).toEqual({ survivors: 0 });
        await expectStillWorks(sandboxId);
        const info = await host.client.get(sandboxId);
        expect(info.state).toBe('ready');
      });

      it('survives a second fork bomb in the same sandbox, written differently (a C-style fork loop)', async () => {
        const program = 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n';
        const exit = await host.client.run(sandboxId, { command: `python3 -c '${program.replace(/'/g, "'\\''")}'`, timeoutMs: 8_000 });
        expect(['pids_limit', 'timeout']).toContain(exit.class);
        expect(exit.classes).not.toContain('sandbox_lost');
        expect(await processes(sandboxId).then((ps) => ps.filter((p) => p.includes('os.fork')).length)).toBe(0);
        await expectStillWorks(sandboxId);
      });
    });

    describe('memory', () => {
      // S4: going over the memory cap stops the command, reported as oom; the sandbox lives on under
      // both runtimes (under gVisor through the per-command address-space cap, see withMemoryCap).
      const bombs: [string, string][] = [
        ['a growing list of 16 MB chunks', `python3 - <<'EOF'\nchunks = []\nwhile True:\n    chunks.append(b"\\x01" * (16 * 1024 * 1024))\nEOF\n`],
        ['one 8 GB allocation', 'python3 -c "bytearray(8*1024**3)"'],
        [
          'two bombs at once',
          `python3 -c "bytearray(8*1024**3)" & p=$!\npython3 - <<'EOF'\nchunks = []\nwhile True:\n    chunks.append(b"\\x01" * (16 * 1024 * 1024))\nEOF\ns=$?; wait $p || s=$?; exit $s`,
        ],
      ];
      let sandboxId: string;
      beforeAll(async () => {
        sandboxId = (await host.createSandbox({ repository: { source: repo.dir }, runtime, limits: { memoryMb: 128 } }, `mem-${runtime}`)).sandboxId;
      });

      it.each(bombs)('stops %s as oom, and the sandbox runs the next command', async (_name, command) => {
        const result = await host.client.run(sandboxId, { command, timeoutMs: 60_000 });
        expect({ class: result.class, classes: result.classes, timedOut: result.timedOut }).toEqual({ class: 'oom', classes: ['oom'], timedOut: false });
        expect(result.exitCode).not.toBe(0);
        expectSentence(result.message ?? '', 'oom');
        await expectStillWorks(sandboxId);
      });
    });

    describe('disk', () => {
      it('stops a command filling the disk at the cap, reports disk_full, and the host disk is untouched', async () => {
        const diskMb = 32;
        const { sandboxId, limits } = await host.createSandbox({ repository: { source: repo.dir }, runtime, limits: { diskMb } }, `disk-${runtime}`);
        expect(limits.diskMb).toBe(diskMb);
        const health = await host.client.healthReport();
        expect(health.diskCap).toMatchObject({ mechanism: 'ext4-loop', available: true });
        const free = () => {
          const s = statfsSync(host.stateDir);
          return s.bavail * s.bsize;
        };
        const before = free();
        const attempt = 1024; // MB, thirty-two times the cap
        const result = await host.client.run(sandboxId, { command: `dd if=/dev/zero of=/workspace/fill bs=1M count=${attempt} status=none`, timeoutMs: 120_000 });
        const used = before - free();
        expect({ class: result.class, exitCode: result.exitCode }).toEqual({ class: 'disk_full', exitCode: 1 });
        expect(result.stderr).toContain('No space left on device');
        expectSentence(result.message ?? '', 'disk_full');
        const size = await host.client.run(sandboxId, { command: 'stat -c %s /workspace/fill', timeoutMs: 20_000 });
        expect(Number(size.stdout.trim())).toBeLessThanOrEqual(diskMb * 1024 * 1024);
        // Other work on this machine moves the free space too; a cap that leaked would move it by a gigabyte.
        expect(used).toBeLessThan(256 * 1024 * 1024);
        const cleaned = await host.client.run(sandboxId, { command: 'rm /workspace/fill && echo ok > /workspace/after.txt && cat /workspace/after.txt', timeoutMs: 20_000 });
        expect(cleaned).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
        await expectStillWorks(sandboxId);
      });
    });
  });

  describe('lifetime', () => {
    it.each(RUNTIMES)(
      'destroys a sandbox past its lifetime under %s, container included, and not before',
      async (runtime) => {
        const info = shortLived[runtime];
        if (!info) throw new Error('the short-lived sandbox was not created');
        expect(Date.parse(info.expiresAt) - Date.parse(info.createdAt)).toBe(60_000);
        const expires = Date.parse(info.expiresAt);
        // The exec-host announces nothing when its reaper acts; ask once a second, up to two reaper periods late.
        let res = await host.client.raw('GET', ExecHostRoutes.sandbox(info.sandboxId));
        while (res.status === 200 && Date.now() < expires + 70_000) {
          await new Promise((r) => setTimeout(r, 1_000));
          res = await host.client.raw('GET', ExecHostRoutes.sandbox(info.sandboxId));
        }
        const goneAt = Date.now();
        expect(goneAt).toBeGreaterThanOrEqual(expires);
        expect({ status: res.status, code: (res.json as { code?: string } | undefined)?.code }).toEqual({ status: 404, code: 'sandbox_not_found' });
        // The record may go a moment before the engine has removed the container; give it a few seconds.
        let left = await containersOfSandbox(info.sandboxId);
        while (left.length > 0 && Date.now() < goneAt + 15_000) {
          await new Promise((r) => setTimeout(r, 500));
          left = await containersOfSandbox(info.sandboxId);
        }
        expect({ 'containers of the expired sandbox still present 15 s after it was forgotten': left }).toEqual({ 'containers of the expired sandbox still present 15 s after it was forgotten': [] });
      },
      170_000,
    );
  });
});
