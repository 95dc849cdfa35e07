import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { FINE_RACY_MARGIN_MS, MAX_RACY_CONTENT_BYTES, RACY_MARGIN_MS, sameTree, stampTree, type TreeStamp } from '../../../src/workspace/tree-stamp';

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

  /** The paths whose content a stamp keeps to compare again: its racy files and links. */
  const racyPaths = (stamp: TreeStamp) => stamp.racyContent.map((r) => path.relative(root, r.full)).sort();

  it('keeps the content of entries with sub-second times until FINE_RACY_MARGIN_MS has passed, and of entries with whole-second times for 2 s', () => {
    const now = Date.now();
    settle(5_000, true, now);
    // ctime is the moment of utimes: read the stamp as if taken just after the fine margin...
    const ctimeMs = Math.max(...['src/a.js', 'README.md', 'src', ''].map((rel) => Number(fs.lstatSync(path.join(root, rel), { bigint: true }).ctimeNs / 1_000_000n)));
    const ctimeWhole = ['src/a.js', 'README.md', 'src', ''].some((rel) => fs.lstatSync(path.join(root, rel), { bigint: true }).ctimeNs % 1_000_000_000n === 0n);
    if (!ctimeWhole) {
      expect(racyPaths(stampTree(root, [], ctimeMs + FINE_RACY_MARGIN_MS + 1)!)).toEqual([]);
      // Files only: a directory's names are in the digest already.
      expect(racyPaths(stampTree(root, [], ctimeMs + FINE_RACY_MARGIN_MS - 1)!)).toEqual(['README.md', 'src/a.js']);
    }
    // ...while whole-second times keep the 2 s margin, whatever the fraction of the other time.
    settle(5_000, false, now);
    const ctimeMs2 = Math.max(...['src/a.js', 'README.md', 'src', ''].map((rel) => Number(fs.lstatSync(path.join(root, rel), { bigint: true }).ctimeNs / 1_000_000n)));
    expect(racyPaths(stampTree(root, [], ctimeMs2 + FINE_RACY_MARGIN_MS + 1)!)).toEqual(['README.md', 'src/a.js']);
    expect(racyPaths(stampTree(root, [], ctimeMs2 + RACY_MARGIN_MS - 1)!)).toEqual(['README.md', 'src/a.js']);
    expect(racyPaths(stampTree(root, [], ctimeMs2 + RACY_MARGIN_MS + 1)!)).toEqual([]);
  });

  it('keeps the content of every entry changed after the stamp time (a clock behind the file system)', () => {
    const stamp = stampTree(root, [path.join(outside, 'index')], Date.now() - 60_000)!;
    expect(stamp.racy).toBe(false);
    expect(racyPaths(stamp)).toEqual(['../' + path.basename(outside) + '/index', 'README.md', 'src/a.js']);
  });

  describe('sameTree', () => {
    /**
     * `earlier` as it would have been had the entries' stat data not moved since (a change within the
     * file system's time granularity): the stat digest of `now`, the content `earlier` kept.
     */
    const asIfStatUnmoved = (earlier: TreeStamp, now: TreeStamp): TreeStamp => ({
      digest: now.digest,
      racy: false,
      racyContent: earlier.racyContent.map((r) => ({ ...r, stat: fs.lstatSync(r.full, { bigint: true }) })),
    });

    it('proves an untouched tree unchanged, right after a write, without waiting for the margin', () => {
      fs.writeFileSync(path.join(root, 'src', 'a.js'), 'new\n');
      const files = [path.join(outside, 'index')];
      const first = stampTree(root, files)!;
      expect(first.racy).toBe(false);
      expect(racyPaths(first)).toContain('src/a.js');
      expect(sameTree(first, stampTree(root, files)!)).toBe(true);
      expect(sameTree(asIfStatUnmoved(first, stampTree(root, files)!), stampTree(root, files)!)).toBe(true);
    });

    it('sees a same-size rewrite of a racy file even when its stat data did not move', () => {
      const first = stampTree(root, [])!;
      expect(racyPaths(first)).toContain('src/a.js');
      fs.writeFileSync(path.join(root, 'src', 'a.js'), 'two\n');
      const second = stampTree(root, [])!;
      expect(sameTree(first, second)).toBe(false);
      expect(sameTree(asIfStatUnmoved(first, second), second)).toBe(false);
    });

    it('sees a racy link re-pointed, even with the same stat data', () => {
      fs.symlinkSync('README.md', path.join(root, 'link'));
      const first = stampTree(root, [])!;
      expect(racyPaths(first)).toContain('link');
      fs.rmSync(path.join(root, 'link'));
      fs.symlinkSync('src/a.js', path.join(root, 'link'));
      const second = stampTree(root, [])!;
      expect(sameTree(first, second)).toBe(false);
      expect(sameTree(asIfStatUnmoved(first, second), second)).toBe(false);
    });

    it('does not read a racy file that is no longer the entry it kept (another inode in its place)', () => {
      const first = stampTree(root, [])!;
      const swapped: TreeStamp = { ...first, racyContent: first.racyContent.map((r) => ({ ...r, stat: { ...r.stat, ino: r.stat.ino + 1n } as fs.BigIntStats })) };
      expect(sameTree(first, stampTree(root, [])!)).toBe(true);
      expect(sameTree(swapped, stampTree(root, [])!)).toBe(false);
    });

    it('never trusts a racy stamp', () => {
      const first = { ...stampTree(root, [])!, racy: true };
      expect(sameTree(first, stampTree(root, [])!)).toBe(false);
    });
  });

  it('is racy, without blocking, for a racy fifo, and past its content budget', () => {
    expect(spawnSync('mkfifo', [path.join(root, 'pipe')]).status).toBe(0);
    expect(stampTree(root, [])!.racy).toBe(true);
    fs.rmSync(path.join(root, 'pipe'));
    expect(stampTree(root, [])!.racy).toBe(false);
    fs.writeFileSync(path.join(root, 'big'), Buffer.alloc(MAX_RACY_CONTENT_BYTES + 1));
    expect(stampTree(root, [])!.racy).toBe(true);
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
