import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FINE_RACY_MARGIN_MS, RACY_MARGIN_MS, stampTree } from '../../../src/workspace/tree-stamp';

let root: string;
let outside: string;

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-stamp-'));
  outside = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-stamp-index-'));
  fs.mkdirSync(path.join(root, 'src'));
  fs.writeFileSync(path.join(root, 'src', 'a.js'), 'one\n');
  fs.writeFileSync(path.join(root, 'README.md'), 'readme\n');
  fs.writeFileSync(path.join(outside, 'index'), 'index');
});

afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true });
  fs.rmSync(outside, { recursive: true, force: true });
});

/** Sets an entry's times (mtime exactly; ctime becomes now, as for any change). */
function at(rel: string, ms: number): void {
  fs.utimesSync(path.join(root, rel), ms / 1000, ms / 1000);
}

/** Every entry of the tree and the index file given times `ms` ago, with or without a fraction of a second. */
function settle(msAgo: number, fraction: boolean, now: number): void {
  const t = Math.floor((now - msAgo) / 1000) * 1000 + (fraction ? 123 : 0);
  for (const rel of ['src/a.js', 'README.md', 'src', '']) at(rel, t);
  fs.utimesSync(path.join(outside, 'index'), t / 1000, t / 1000);
}

describe('stampTree', () => {
  it('gives the same digest for a tree that did not change, and another for every kind of change', () => {
    const files = [path.join(outside, 'index')];
    const first = stampTree(root, files)!;
    expect(stampTree(root, files)!.digest).toBe(first.digest);
    const changes: [string, () => void][] = [
      ['same-size rewrite', () => fs.writeFileSync(path.join(root, 'src', 'a.js'), 'two\n')],
      ['new file', () => fs.writeFileSync(path.join(root, 'src', 'b.js'), '')],
      ['removal', () => fs.rmSync(path.join(root, 'README.md'))],
      ['rename', () => fs.renameSync(path.join(root, 'src', 'a.js'), path.join(root, 'src', 'c.js'))],
      ['mode', () => fs.chmodSync(path.join(root, 'src', 'c.js'), 0o755)],
      ['index', () => fs.writeFileSync(path.join(outside, 'index'), 'indey')],
    ];
    for (const [name, change] of changes) {
      const before = stampTree(root, files)!.digest;
      change();
      expect({ name, same: stampTree(root, files)!.digest === before }).toEqual({ name, same: false });
    }
  });

  it('trusts entries with sub-second times once FINE_RACY_MARGIN_MS has passed, and never an entry with whole-second times within 2 s', () => {
    const now = Date.now();
    settle(5_000, true, now);
    // ctime is the moment of utimes: read the stamp as if taken just after the fine margin...
    const ctimeMs = Math.max(...['src/a.js', 'README.md', 'src', ''].map((rel) => Number(fs.lstatSync(path.join(root, rel), { bigint: true }).ctimeNs / 1_000_000n)));
    const ctimeWhole = ['src/a.js', 'README.md', 'src', ''].some((rel) => fs.lstatSync(path.join(root, rel), { bigint: true }).ctimeNs % 1_000_000_000n === 0n);
    if (!ctimeWhole) {
      expect(stampTree(root, [], ctimeMs + FINE_RACY_MARGIN_MS + 1)!.racy).toBe(false);
      expect(stampTree(root, [], ctimeMs + FINE_RACY_MARGIN_MS - 1)!.racy).toBe(true);
    }
    // ...while whole-second times keep the 2 s margin, whatever the fraction of the other time.
    settle(5_000, false, now);
    const ctimeMs2 = Math.max(...['src/a.js', 'README.md', 'src', ''].map((rel) => Number(fs.lstatSync(path.join(root, rel), { bigint: true }).ctimeNs / 1_000_000n)));
    expect(stampTree(root, [], ctimeMs2 + FINE_RACY_MARGIN_MS + 1)!.racy).toBe(true);
    expect(stampTree(root, [], ctimeMs2 + RACY_MARGIN_MS - 1)!.racy).toBe(true);
    expect(stampTree(root, [], ctimeMs2 + RACY_MARGIN_MS + 1)!.racy).toBe(false);
  });

  it('is racy for an entry changed after the stamp time (a clock behind the file system)', () => {
    expect(stampTree(root, [], Date.now() - 60_000)!.racy).toBe(true);
  });

  it('takes no stamp of a tree over its entry bound, or of one it cannot read', () => {
    expect(stampTree(root, [], Date.now(), 3)).toBeNull();
    expect(stampTree(path.join(root, 'missing'), [])).not.toBeNull();
    fs.chmodSync(path.join(root, 'src'), 0o000);
    try {
      if (process.getuid?.() !== 0) expect(stampTree(root, [])).toBeNull();
    } finally {
      fs.chmodSync(path.join(root, 'src'), 0o755);
    }
  });
});
