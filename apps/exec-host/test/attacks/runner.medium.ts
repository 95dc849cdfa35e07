// S1, G04 and decision 0016: under runc every command is started by the sandbox's runner, a process
// of the command's own user that lives as long as the sandbox. A command must not be able to take it
// over (trace it, write into its memory, open its descriptors, feed it frames), to make it outlive the
// kill after a command, or to keep a process of its own alive by ending or stopping the runner. Under
// gVisor, whose /proc lets a process open an undumpable one's descriptors, there is no runner.
import { SANDBOX_IMAGES, execHostFor, expectRefused, repoFixture, runProbes, type ExecHostProcess, type ProbeResult, type RepoFixture } from '../support/attack-harness';

let host: ExecHostProcess;
let repo: RepoFixture;

beforeAll(() => {
  repo = repoFixture();
});

afterAll(() => {
  repo?.remove();
});

/** The runner's pid, as a command finds it: the process of its user whose name is the runner's. */
const RUNNER_PID = `$(for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = sandbox-runner ] && echo \${p#/proc/}; done | head -n 1)`;

/** A writer that goes on after its command, as far as nothing kills it: appends a line every 200 ms. */
const LATE_WRITER = `(for i in $(seq 1 100); do sleep 0.2; echo late >> /workspace/late.txt; done) > /dev/null 2>&1 &`;

describe.each(SANDBOX_IMAGES)('sandbox image from $route', (image) => {
  execHostFor(image, (started) => {
    host = started;
  });

  describe('under runsc', () => {
    it('starts no runner: every command is an engine exec, as before decision 0016', async () => {
      const { sandboxId } = await host.createSandbox({ repository: { source: repo.dir }, runtime: 'runsc' }, 'runner-runsc');
      const first = await host.client.run(sandboxId, { command: `echo "[${RUNNER_PID}]"` });
      const second = await host.client.run(sandboxId, { command: `echo "[${RUNNER_PID}]"` });
      expect(first.stdout.split('\n')[0]).toBe('[]');
      expect(second.stdout.trim()).toBe('[]');
    });
  });

  describe.each(['runc'] as const)('the command runner under %s', (runtime) => {
    let sandboxId: string;
    let r: Record<string, ProbeResult>;

    beforeAll(async () => {
      sandboxId = (await host.createSandbox({ repository: { source: repo.dir }, runtime }, `runner-${runtime}`)).sandboxId;
      r = await runProbes(
        host.client,
        sandboxId,
        String.raw`
def runner():
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if open(f"/proc/{p}/comm").read().strip() == "sandbox-runner":
                    return int(p)
            except OSError:
                pass
    raise OSError(errno.ESRCH, "no runner")
R = runner()
probe("runner user", lambda: int(next(l for l in open(f"/proc/{R}/status").read().splitlines() if l.startswith("Uid:")).split()[1]))
def write_mem():
    with open(f"/proc/{R}/mem", "r+b", buffering=0) as m:
        return m.write(b"\x7fELF")
probe("write runner memory", write_mem)
def read_mem():
    with open(f"/proc/{R}/mem", "rb", buffering=0) as m:
        return len(m.read(16))
probe("read runner memory", read_mem)
probe("read runner environment", lambda: open(f"/proc/{R}/environ", "rb").read().decode(errors="replace"))
probe("open runner stdin", lambda: os.open(f"/proc/{R}/fd/0", os.O_WRONLY))
probe("open runner stdout", lambda: os.open(f"/proc/{R}/fd/1", os.O_RDONLY))
probe("list runner descriptors", lambda: os.listdir(f"/proc/{R}/fd"))
probe("trace runner", lambda: call("ptrace", 16, R, 0, 0))  # PTRACE_ATTACH
probe("own descriptors", lambda: sorted(int(f) for f in os.listdir("/proc/self/fd")))
probe("own session is another", lambda: os.getsid(0) != os.getsid(R))
`,
      );
    });

    it('runs as the sandbox user, but undumpable: no command reads or writes its memory, environment or descriptors, or traces it', () => {
      expect(r['runner user']).toMatchObject({ ok: true, value: 10001 });
      expectRefused(r, 'write runner memory', 'EACCES');
      expectRefused(r, 'read runner memory', 'EACCES');
      expectRefused(r, 'read runner environment', 'EACCES');
      expectRefused(r, 'open runner stdin', 'EACCES');
      expectRefused(r, 'open runner stdout', 'EACCES');
      expectRefused(r, 'list runner descriptors', 'EACCES');
      // The seccomp profile refuses ptrace outright; undumpable would refuse it too.
      expect(r['trace runner']).toMatchObject({ ok: false });
      expect(['EPERM', 'EACCES']).toContain(r['trace runner']?.errno);
    });

    it('hands a command none of its own descriptors, and a session of its own', () => {
      // 0, 1, 2 and the one listing the directory: nothing of the runner's frames.
      expect(r['own descriptors']).toMatchObject({ ok: true, value: [0, 1, 2, 3] });
      expect(r['own session is another']).toMatchObject({ ok: true, value: true });
    });

    it('takes what a command prints as output only: bytes shaped like its frames change nothing', async () => {
      // 'X' + length 4 + status 0, then 'k' + length 1 + 0: the runner's own end-of-command and kill answers.
      const result = await host.client.run(sandboxId, { command: String.raw`printf 'X\0\0\0\4\0\0\0\0k\0\0\0\1\0'; printf 'X\0\0\0\4\0\0\0\0' >&2; exit 7` });
      expect(result.exitCode).toBe(7);
      expect(Buffer.from(result.stdout, 'utf8')).toEqual(Buffer.from('X\0\0\0\x04\0\0\0\0k\0\0\0\x01\0', 'latin1'));
      expect(result.stderr).toBe('X\0\0\0\x04\0\0\0\0');
    });

    it("survives a command's `kill -KILL 0` (its whole group) and runs the next command itself", async () => {
      const before = await host.client.run(sandboxId, { command: `echo ${RUNNER_PID}` });
      const killed = await host.client.run(sandboxId, { command: 'kill -KILL 0; echo not reached' });
      expect(killed.exitCode).toBe(137);
      const after = await host.client.run(sandboxId, { command: `echo ${RUNNER_PID}` });
      expect(before.stdout.trim()).toMatch(/^\d+$/);
      expect(after.stdout.trim()).toBe(before.stdout.trim());
    });

    it('keeps nothing of a command alive when the command kills its runner: the next command runs, the writer is gone', async () => {
      await host.client.run(sandboxId, { command: 'rm -f /workspace/late.txt' });
      const before = await host.client.run(sandboxId, { command: `echo ${RUNNER_PID}` });
      const killed = await host.client.run(sandboxId, { command: `${LATE_WRITER} kill -KILL ${RUNNER_PID}; sleep 1; echo the command went on` });
      expect(killed.exitCode).toBeNull();
      expect(killed.stderr).toMatch(/command runner ended while the command ran/);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const first = await host.client.run(sandboxId, { command: 'wc -l < /workspace/late.txt 2>/dev/null || echo 0' });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const second = await host.client.run(sandboxId, { command: `wc -l < /workspace/late.txt 2>/dev/null || echo 0; echo ${RUNNER_PID}` });
      const [lines, runnerNow] = second.stdout.trim().split('\n');
      expect(lines).toBe(first.stdout.trim());
      // A new runner started the commands after it.
      expect(runnerNow).toMatch(/^\d+$/);
      expect(runnerNow).not.toBe(before.stdout.trim());
      await host.client.run(sandboxId, { command: 'rm -f /workspace/late.txt' });
    });

    it('keeps nothing of a command alive when the command stops its runner: the command times out, then everything of it is killed', async () => {
      await host.client.run(sandboxId, { command: 'rm -f /workspace/late.txt' });
      const stopped = await host.client.run(sandboxId, { command: `${LATE_WRITER} kill -STOP ${RUNNER_PID}; echo stopped`, timeoutMs: 2_000 });
      expect(stopped.timedOut).toBe(true);
      const first = await host.client.run(sandboxId, { command: 'wc -l < /workspace/late.txt 2>/dev/null || echo 0' });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const second = await host.client.run(sandboxId, { command: 'wc -l < /workspace/late.txt 2>/dev/null || echo 0' });
      expect(second.stdout.trim()).toBe(first.stdout.trim());
      expect(second.exitCode).toBe(0);
      await host.client.run(sandboxId, { command: 'rm -f /workspace/late.txt' });
    });
  });
});
