import { withMemoryCap } from './docker.driver';

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
