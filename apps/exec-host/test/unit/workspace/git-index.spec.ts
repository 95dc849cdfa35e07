import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseIndex, readIndexEntries } from '../../../src/workspace/git-index';

/** The index read here must be exactly what `git ls-files -s -z` prints: the tree's fingerprint (X3) is made from it. */
describe('reading git index files', () => {
  let dir: string;
  const git = (args: string[], input?: string) => {
    const r = spawnSync('git', args, { cwd: dir, input, encoding: 'utf8', env: { PATH: process.env['PATH'], HOME: dir, GIT_CONFIG_NOSYSTEM: '1' } });
    if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const lsFiles = () => git(['ls-files', '-s', '-z']).split('\0').filter(Boolean);
  const index = () => path.join(dir, '.git', 'index');
  const BLOB = 'e69de29bb2d1d6434b8b29ae77e5c8c28e1b23a5'; // the empty blob

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'git-index-'));
    git(['init', '-q']);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('an empty index', async () => {
    git(['read-tree', '--empty']);
    expect(await readIndexEntries(index())).toEqual([]);
  });

  it('files, an executable, a symbolic link, nested directories, odd names: the same entries as git, in its order', async () => {
    mkdirSync(path.join(dir, 'src/deep/er'), { recursive: true });
    writeFileSync(path.join(dir, 'README.md'), '# hi\n');
    writeFileSync(path.join(dir, 'src/deep/er/a.js'), 'x\n');
    writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\n');
    chmodSync(path.join(dir, 'run.sh'), 0o755);
    symlinkSync('README.md', path.join(dir, 'link'));
    writeFileSync(path.join(dir, 'with space.txt'), '');
    writeFileSync(path.join(dir, 'ünï çødé.txt'), 'u\n');
    writeFileSync(path.join(dir, 'tab\tand\nnewline'), 'n\n');
    writeFileSync(path.join(dir, 'a-b'), '');
    writeFileSync(path.join(dir, 'a.b'), '');
    git(['add', '-A']);
    const ours = await readIndexEntries(index());
    expect(ours).toEqual(lsFiles());
    expect(ours).toContain(`120000 ${git(['hash-object', '--stdin'], 'README.md').trim()} 0\tlink`);
    expect(ours!.some((e) => e.startsWith('100755 ') && e.endsWith('\trun.sh'))).toBe(true);
  });

  it('a submodule, the three stages of a conflict, and names of 4095 bytes and more (their length is not in the flags)', async () => {
    const long = (n: number) => `${'d'.repeat(200)}/`.repeat(Math.floor(n / 201)) + 'f'.repeat(n - 201 * Math.floor(n / 201));
    const names = [long(4094), long(4095), long(4096), long(5000)];
    expect(names.map((n) => Buffer.byteLength(n))).toEqual([4094, 4095, 4096, 5000]);
    const info = [
      `160000 ${'1'.repeat(40)} 0\tvendor/lib`,
      `100644 ${BLOB} 1\tconflict.txt`,
      `100644 ${BLOB} 2\tconflict.txt`,
      `100755 ${BLOB} 3\tconflict.txt`,
      ...names.map((n) => `100644 ${BLOB} 0\t${n}`),
    ];
    git(['update-index', '--add', '-z', '--index-info'], info.join('\0') + '\0');
    const ours = await readIndexEntries(index());
    expect(ours).toEqual(lsFiles());
    expect(ours).toHaveLength(info.length);
  });

  it('version 3: entries carrying the skip-worktree bit (excluded files) among plain ones', async () => {
    for (const f of ['a', 'b', 'c', 'secret.env']) writeFileSync(path.join(dir, f), `${f}\n`);
    git(['add', '-A']);
    git(['update-index', '--skip-worktree', 'secret.env', 'a']);
    const data = readFileSync(index());
    expect(data.readUInt32BE(4)).toBe(3);
    expect(parseIndex(data)).toEqual(lsFiles());
  });

  it('extensions after the entries (the cached tree) are skipped', async () => {
    writeFileSync(path.join(dir, 'f'), 'f\n');
    git(['add', 'f']);
    git(['write-tree']); // writes the TREE extension
    expect(readFileSync(index()).includes(Buffer.from('TREE'))).toBe(true);
    expect(await readIndexEntries(index())).toEqual(lsFiles());
  });

  it('answers null for what it does not read, so git is asked: version 4, a split index, a damaged or missing file', async () => {
    for (const f of ['a', 'b']) writeFileSync(path.join(dir, f), `${f}\n`);
    git(['add', '-A']);
    const good = readFileSync(index());
    expect(parseIndex(good)).toEqual(lsFiles());
    expect(parseIndex(good.subarray(0, good.length - 30))).toBeNull();
    expect(parseIndex(Buffer.concat([Buffer.from('DIRX'), good.subarray(4)]))).toBeNull();
    expect(parseIndex(Buffer.alloc(0))).toBeNull();
    expect(await readIndexEntries(path.join(dir, 'no-such-index'))).toBeNull();

    git(['update-index', '--index-version', '4']);
    expect(readFileSync(index()).readUInt32BE(4)).toBe(4);
    expect(await readIndexEntries(index())).toBeNull();

    git(['update-index', '--index-version', '2']);
    git(['update-index', '--split-index']);
    expect(await readIndexEntries(index())).toBeNull();
    git(['update-index', '--no-split-index']);
    expect(await readIndexEntries(index())).toEqual(lsFiles());
  });
});
