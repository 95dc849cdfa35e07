import { OutputCapper, truncationMarker, type Stream } from '../../../src/exec/output-cap';

function collect(cap: number) {
  const out: { stream: Stream; text: string }[] = [];
  const capper = new OutputCapper(cap, (stream, text) => out.push({ stream, text }));
  return {
    capper,
    out,
    text: (s: Stream) =>
      out
        .filter((o) => o.stream === s)
        .map((o) => o.text)
        .join(''),
  };
}

describe('OutputCapper', () => {
  it('passes output under the cap untouched', () => {
    const { capper, text } = collect(100);
    capper.push('stdout', Buffer.from('hello '));
    capper.push('stderr', Buffer.from('oops'));
    capper.push('stdout', Buffer.from('world'));
    capper.end();
    expect(text('stdout')).toBe('hello world');
    expect(text('stderr')).toBe('oops');
    expect(capper.truncated).toBe(false);
  });

  it('caps stdout and stderr together and marks the cut once', () => {
    const { capper, text } = collect(10);
    capper.push('stdout', Buffer.from('123456'));
    capper.push('stderr', Buffer.from('abcdefgh'));
    capper.push('stdout', Buffer.from('more'));
    capper.end();
    expect(text('stdout')).toBe('123456');
    expect(text('stderr')).toBe(`abcd${truncationMarker(10)}`);
    expect(capper.truncated).toBe(true);
    expect(capper.droppedBytes).toBe(4 + 4);
  });

  it('never splits a multi-byte character, even across chunks', () => {
    const { capper, text } = collect(100);
    const euro = Buffer.from('€');
    capper.push('stdout', euro.subarray(0, 1));
    capper.push('stdout', euro.subarray(1));
    capper.end();
    expect(text('stdout')).toBe('€');
  });

  it('drops a character cut by the cap instead of emitting a replacement character', () => {
    const { capper, text } = collect(4);
    capper.push('stdout', Buffer.from('ab€'));
    capper.end();
    expect(text('stdout')).toBe(`ab${truncationMarker(4)}`);
    expect(text('stdout')).not.toContain('\uFFFD');
  });

  it('counts an exact fill as not truncated', () => {
    const { capper } = collect(3);
    capper.push('stdout', Buffer.from('abc'));
    capper.end();
    expect(capper.truncated).toBe(false);
  });
});
