import { createTwoFilesPatch } from 'diff';
import { NO_CONTEXT, viewOfGap, withLines } from '../../../../src/components/diff/context';
import { chunksOf, gapsOf, parseUnifiedDiff } from '../../../../src/components/diff/diff-model';

const lines = (n: number, f = (i: number) => `line ${i}`) => Array.from({ length: n }, (_, i) => f(i + 1));
const text = (ls: string[]) => `${ls.join('\n')}\n`;
const OLD = lines(100);

/** The file of a diff between `old` and `next`, parsed as the viewer parses it. */
function fileOf(old: string[], next: string[], context = 3) {
  const patch = createTwoFilesPatch('a/f.ts', 'b/f.ts', text(old), text(next), '', '', { context });
  const [file] = parseUnifiedDiff(patch);
  return file!;
}

/** Checks every gap line by line: its old number maps to the same text in the new file. */
function expectMapsOnto(old: string[], next: string[], total: number | null) {
  const file = fileOf(old, next);
  for (const g of gapsOf(file.hunks, total)) {
    for (let n = g.from; n <= (g.to ?? old.length); n++) expect({ n, text: next[n + g.delta - 1] }).toEqual({ n, text: old[n - 1] });
  }
}

describe('gapsOf: the unchanged lines around hunks, numbered in both files', () => {
  it('a change in the middle: a gap before, and one after until the end once it is known', () => {
    const next = OLD.map((l, i) => (i === 49 ? 'line 50 changed' : l));
    const file = fileOf(OLD, next);
    expect(gapsOf(file.hunks, null)).toEqual([
      { before: 0, from: 1, to: 46, delta: 0 },
      { before: 1, from: 54, to: null, delta: 0 },
    ]);
    expect(gapsOf(file.hunks, 100)).toEqual([
      { before: 0, from: 1, to: 46, delta: 0 },
      { before: 1, from: 54, to: 100, delta: 0 },
    ]);
  });

  it('lines removed and added shift the new numbers of what follows', () => {
    const next = [...OLD.slice(0, 9), ...OLD.slice(12, 60), 'inserted a', 'inserted b', 'inserted c', 'inserted d', ...OLD.slice(60)];
    const file = fileOf(OLD, next);
    const gaps = gapsOf(file.hunks, 100);
    expect(gaps.map((g) => [g.before, g.from, g.to, g.delta])).toEqual([
      [0, 1, 6, 0],
      [1, 16, 57, -3],
      [2, 64, 100, 1],
    ]);
    expectMapsOnto(OLD, next, 100);
  });

  it('a change at the very start or end leaves no gap there; a last hunk reaching the end closes the file', () => {
    const first = fileOf(OLD, ['first changed', ...OLD.slice(1)]);
    expect(gapsOf(first.hunks, null)[0]).toEqual({ before: 1, from: 5, to: null, delta: 0 });
    const last = fileOf(OLD, [...OLD.slice(0, 99), 'line 100 changed']);
    expect(last.hunks.at(-1)?.atEnd).toBe(true);
    expect(gapsOf(last.hunks, null)).toEqual([{ before: 0, from: 1, to: 96, delta: 0 }]);
    const appended = fileOf(OLD, [...OLD, 'appended']);
    expect(gapsOf(appended.hunks, null)).toEqual([{ before: 0, from: 1, to: 97, delta: 0 }]);
  });

  it('an insertion with no old lines (a "-N,0" hunk) sits between the right lines', () => {
    const next = [...OLD.slice(0, 40), 'new 1', 'new 2', ...OLD.slice(40)];
    const file = fileOf(OLD, next, 0);
    expect(file.hunks[0]).toMatchObject({ oldLines: 0, newStart: 41, newLines: 2 });
    expectMapsOnto(OLD, next, 100);
  });

  it('generated: every gap of random edits maps each old line onto the same text in the new file', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 60; round++) {
      const next: string[] = [];
      for (const l of OLD) {
        const r = random();
        if (r < 0.03) continue;
        if (r < 0.06) next.push(`${l} edited`);
        else if (r < 0.08) next.push(l, `added after ${l}`);
        else next.push(l);
      }
      expectMapsOnto(OLD, next, 100);
    }
  });
});

describe('viewOfGap: what was read of a gap, and what is still hidden', () => {
  const gap = { before: 1, from: 10, to: 60, delta: 2 };

  it('nothing read: the whole gap is hidden', () => {
    expect(viewOfGap(gap, NO_CONTEXT)).toEqual({ top: [], bottom: [], hidden: { from: 10, to: 60 } });
  });

  it('read from the top and from the bottom: the hidden range shrinks between them, new numbers shifted', () => {
    let ctx = withLines(
      NO_CONTEXT,
      10,
      lines(20, (i) => `line ${i + 9}`),
      100,
      null,
    );
    ctx = withLines(
      ctx,
      41,
      lines(20, (i) => `line ${i + 40}`),
      100,
      null,
    );
    const view = viewOfGap(gap, ctx);
    expect(view.hidden).toEqual({ from: 30, to: 40 });
    expect(view.top.map((l) => [l.oldNo, l.newNo, l.text])[0]).toEqual([10, 12, 'line 10']);
    expect(view.top).toHaveLength(20);
    expect(view.bottom.map((l) => l.oldNo)).toEqual(lines(20, (i) => String(i + 40)).map(Number));
    expect(view.bottom.every((l) => l.kind === 'context')).toBe(true);
  });

  it('read whole: nothing hidden; an open end closes at the total the gateway gave', () => {
    const whole = withLines(
      NO_CONTEXT,
      10,
      lines(51, (i) => `line ${i + 9}`),
      100,
      null,
    );
    expect(viewOfGap(gap, whole).hidden).toBeNull();
    const open = { before: 1, from: 95, to: null, delta: 0 };
    const tail = withLines(NO_CONTEXT, 95, ['line 95', 'line 96'], 96, null);
    expect(viewOfGap({ ...open, to: 96 }, tail)).toMatchObject({ hidden: null });
    expect(viewOfGap(open, NO_CONTEXT).hidden).toEqual({ from: 95, to: null });
  });
});

describe('chunksOf: long hunks drawn in parts', () => {
  const hunk = (kinds: string) =>
    [...kinds].map((k, i) => ({ kind: (k === '+' ? 'add' : k === '-' ? 'del' : 'context') as 'add' | 'del' | 'context', oldNo: i, newNo: i, text: `${i}`, html: `${i}` }));

  it('a hunk of up to 150 lines stays whole', () => {
    expect(chunksOf(hunk(' '.repeat(150)))).toHaveLength(1);
  });

  it('cuts every 100 lines at an unchanged line, never inside a run of changes, and loses no line', () => {
    const kinds = `${' '.repeat(95)}${'-'.repeat(10)}${'+'.repeat(10)}${' '.repeat(200)}${'+'.repeat(260)}`;
    const lines = hunk(kinds);
    const parts = chunksOf(lines);
    expect(parts.flat()).toEqual(lines);
    expect(parts.map((p) => p.length)).toEqual([115, 100, 200, 160]);
    // The first cut waited for the removals and additions to end; a part running into 260 additions is cut at 200 lines.
    expect(parts[0]!.at(-1)!.kind).toBe('add');
    expect(parts[1]![0]!.kind).toBe('context');
  });
});
