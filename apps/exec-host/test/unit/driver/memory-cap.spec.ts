import { KILL_EVERY_PROCESS, processHeadroom, withCommandCaps, withMemoryCap, withProcessCap } from '../../../src/driver/docker.driver';

describe('withMemoryCap (runsc: the command, not the sandbox, meets the memory cap)', () => {
  const sizes = [64, 128, 256, 2_048, 65_536].map((mb) => mb * 1024 * 1024);
  it.each(sizes)('caps the address space of every runsc command at the sandbox memory of %d bytes', (bytes) => {
    const command = 'python3 -c "bytearray(8*1024**3)"\necho next';
    const capped = withMemoryCap(command, 'runsc', bytes);
    const [first, ...rest] = capped.split('\n');
    expect(first).toBe(`ulimit -v ${bytes / 1024}`);
    expect(rest.join('\n')).toBe(command);
  });

  it.each(sizes)('leaves runc commands alone (the kernel OOM killer takes the command there), %d bytes', (bytes) => {
    expect(withMemoryCap('echo hi', 'runc', bytes)).toBe('echo hi');
  });

  it('adds nothing when the container has no memory cap', () => {
    expect(withMemoryCap('echo hi', 'runsc', 0)).toBe('echo hi');
  });
});

describe('withProcessCap (runsc: a fork bomb meets the cap before the kill that ends it has no room)', () => {
  const caps = [16, 17, 64, 100, 512, 4_096, 32_768];
  it.each(caps)('starts every runsc command with RLIMIT_NPROC below the sandbox cap of %d, leaving room for the kill', (pids) => {
    const capped = withProcessCap('bomb() { bomb | bomb; }; bomb', 'runsc', pids);
    const [first, ...rest] = capped.split('\n');
    const m = /^ulimit -u (\d+)$/.exec(first ?? '');
    expect(m).not.toBeNull();
    const commandCap = Number(m![1]);
    // pid 1, its sleep and the kill are processes of the same user: they need room above the command.
    expect(pids - commandCap).toBeGreaterThanOrEqual(4);
    expect(pids - commandCap).toBe(processHeadroom(pids));
    expect(commandCap).toBeGreaterThanOrEqual(Math.floor(pids / 2));
    expect(rest.join('\n')).toBe('bomb() { bomb | bomb; }; bomb');
  });

  it.each(caps)('leaves runc commands alone (the freezer cgroup ends them), %d processes', (pids) => {
    expect(withProcessCap('echo hi', 'runc', pids)).toBe('echo hi');
  });

  it('puts both caps in front of a runsc command, the command unchanged', () => {
    expect(withCommandCaps('echo hi', 'runsc', { memoryBytes: 128 * 1024 * 1024, processes: 64 })).toBe('ulimit -u 56\nulimit -v 131072\necho hi');
    expect(withCommandCaps('echo hi', 'runc', { memoryBytes: 128 * 1024 * 1024, processes: 64 })).toBe('echo hi');
  });

  it('kills from inside with one process that repeats kill(-1) until nothing is left (no fork per round)', () => {
    expect(KILL_EVERY_PROCESS).toMatch(/while kill -KILL -1/);
    expect(KILL_EVERY_PROCESS).not.toMatch(/\/bin\/kill|\$\((?!\()|`/);
  });
});
