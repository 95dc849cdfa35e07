import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gitIn, makeRepo } from '../../support/run-bin';
import { applyPatch, inspectCheckout, isCheckoutOf, parseNumstatZ, uncommittedPatch } from '../../../src/git/git';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const repo = (files: Record<string, string>) => {
  const d = makeRepo(files);
  dirs.push(d);
  return d;
};

describe('inspectCheckout and isCheckoutOf', () => {
  it('is null outside a checkout', async () => {
    const d = mkdtempSync(path.join(os.tmpdir(), 'lemni-nogit-'));
    dirs.push(d);
    expect(await inspectCheckout(d)).toBeNull();
  });

  it('matches the project by remote URL in any of its spellings, by path, or by base commit', async () => {
    const d = repo({ 'a.txt': 'a\n' });
    gitIn(d, 'remote', 'add', 'origin', 'git@forge.example.org:team/app.git');
    const c = (await inspectCheckout(path.join(d)))!;
    expect(c.branch).toBe('main');
    expect(c.head).toMatch(/^[0-9a-f]{40}$/);
    expect(await isCheckoutOf(c, 'https://forge.example.org/team/app')).toBe(true);
    expect(await isCheckoutOf(c, 'ssh://git@Forge.example.org/team/app.git/')).toBe(true);
    expect(await isCheckoutOf(c, d)).toBe(true);
    expect(await isCheckoutOf(c, 'https://forge.example.org/team/other')).toBe(false);
    expect(await isCheckoutOf(c, 'https://elsewhere.example.org/x', c.head)).toBe(true);
    expect(await isCheckoutOf(c, 'https://elsewhere.example.org/x', 'f'.repeat(40))).toBe(false);
  });
});

describe('uncommittedPatch', () => {
  it('includes staged, unstaged and untracked changes, leaves secrets out, and keeps the index as it was', async () => {
    const d = repo({ 'a.txt': 'a\n', '.gitignore': 'ignored.log\n' });
    writeFileSync(path.join(d, 'a.txt'), 'a2\n');
    writeFileSync(path.join(d, 'new.bin'), Buffer.from([0, 1, 2, 255]));
    writeFileSync(path.join(d, 'server.key'), 'PRIVATE\n');
    writeFileSync(path.join(d, 'ignored.log'), 'noise\n');
    const statusBefore = gitIn(d, 'status', '--porcelain');
    const p = await uncommittedPatch(d);
    expect(p.files.sort()).toEqual(['a.txt', 'new.bin']);
    expect(p.excluded).toEqual(['server.key']);
    expect(p.patch).toContain('GIT binary patch');
    expect(p.patch).not.toContain('PRIVATE');
    expect(gitIn(d, 'status', '--porcelain')).toBe(statusBefore);
    // The patch recreates the work on a clean copy of the base commit.
    const clone = mkdtempSync(path.join(os.tmpdir(), 'lemni-clone-'));
    dirs.push(clone);
    gitIn(clone, 'clone', '-q', d, '.');
    expect((await applyPatch(clone, p.patch)).applied).toBe(true);
    expect(readFileSync(path.join(clone, 'a.txt'), 'utf8')).toBe('a2\n');
    expect([...readFileSync(path.join(clone, 'new.bin'))]).toEqual([0, 1, 2, 255]);
  });

  it('is empty when nothing changed, and refuses a repository without a commit', async () => {
    const d = repo({ 'a.txt': 'a\n' });
    expect(await uncommittedPatch(d)).toEqual({ patch: '', files: [], excluded: [] });
    const empty = mkdtempSync(path.join(os.tmpdir(), 'lemni-empty-'));
    dirs.push(empty);
    gitIn(empty, 'init', '-q');
    await expect(uncommittedPatch(empty)).rejects.toThrow('has no commit yet; commit once before using --include-uncommitted');
  });
});

describe('applyPatch', () => {
  function patchFor(d: string, change: () => void): string {
    change();
    gitIn(d, 'add', '-A');
    const p = gitIn(d, 'diff', '--cached', '--binary');
    gitIn(d, 'reset', '-q', '--hard');
    gitIn(d, 'clean', '-q', '-fd');
    return p;
  }

  it('applies additions, changes and deletions', async () => {
    const d = repo({ 'a.txt': 'a\n', 'gone.txt': 'bye\n' });
    const p = patchFor(d, () => {
      writeFileSync(path.join(d, 'a.txt'), 'A\n');
      writeFileSync(path.join(d, 'added.txt'), 'new\n');
      rmSync(path.join(d, 'gone.txt'));
    });
    const r = await applyPatch(d, p);
    expect(r).toEqual({ applied: true, files: ['a.txt', 'added.txt', 'gone.txt'] });
    expect(readFileSync(path.join(d, 'added.txt'), 'utf8')).toBe('new\n');
  });

  it('on a conflict in one file restores every file and the index, even the ones that applied', async () => {
    const d = repo({ 'a.txt': 'a\n', 'b.txt': 'b\n' });
    const p = patchFor(d, () => {
      writeFileSync(path.join(d, 'a.txt'), 'A\n');
      writeFileSync(path.join(d, 'b.txt'), 'B\n');
      writeFileSync(path.join(d, 'c.txt'), 'C\n');
    });
    writeFileSync(path.join(d, 'b.txt'), 'theirs\n');
    gitIn(d, 'commit', '-q', '-am', 'diverge');
    const indexBefore = readFileSync(path.join(d, '.git', 'index'));
    const r = await applyPatch(d, p);
    expect(r.applied).toBe(false);
    if (r.applied) return;
    expect(r.conflicts).toEqual(['b.txt']);
    expect(r.message).toBe('The approved patch conflicts with your working tree in b.txt; the repository is unchanged.');
    expect(readFileSync(path.join(d, 'a.txt'), 'utf8')).toBe('a\n');
    expect(readFileSync(path.join(d, 'b.txt'), 'utf8')).toBe('theirs\n');
    expect(() => readFileSync(path.join(d, 'c.txt'))).toThrow();
    expect(readFileSync(path.join(d, '.git', 'index')).equals(indexBefore)).toBe(true);
    expect(gitIn(d, 'status', '--porcelain')).toBe('');
  });

  it('says so when the text is not a patch', async () => {
    const d = repo({ 'a.txt': 'a\n' });
    const r = await applyPatch(d, 'diff --git a/x b/x\n@@ nonsense\n');
    expect(r.applied).toBe(false);
    if (!r.applied) expect(r.message).toMatch(/^The patch is not a valid git patch: /);
  });
});

describe('parseNumstatZ', () => {
  it('reads plain paths and renames', () => {
    expect(parseNumstatZ('1\t0\ta.txt\0-\t-\tbin.dat\0' + '0\t0\t\0old name.txt\0new name.txt\0')).toEqual(['a.txt', 'bin.dat', 'old name.txt', 'new name.txt']);
  });
});
