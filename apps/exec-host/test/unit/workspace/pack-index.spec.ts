import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { inPackIndex, mayHaveObject } from '../../../src/workspace/pack-index';

/**
 * The object cache skips asking git whether it has a commit only when this says the commit is
 * certainly absent: so every object git has must read as possibly there, whatever its id, and an id
 * git does not have reads as absent only where the files were read here.
 */
describe('an object looked up in git object directories, in this process', () => {
  let dir: string;
  const git = (args: string[], input?: string) => {
    const r = spawnSync('git', args, { cwd: dir, input, encoding: 'utf8', env: { PATH: process.env['PATH'], HOME: dir, GIT_CONFIG_NOSYSTEM: '1' } });
    if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const objects = () => path.join(dir, '.git', 'objects');
  const allObjects = () => git(['cat-file', '--batch-all-objects', '--batch-check=%(objectname)']).split('\n').filter(Boolean);
  const idxFiles = () =>
    readdirSync(path.join(objects(), 'pack'))
      .filter((f) => f.endsWith('.idx'))
      .map((f) => path.join(objects(), 'pack', f));
  /** Ids git does not have, with the first byte's edges (00…, ff…) among them. */
  const absentIds = (have: Set<string>) => {
    const ids = ['00'.repeat(20), 'ff'.repeat(20), `00${'ab'.repeat(19)}`, `ff${'01'.repeat(19)}`];
    for (let i = 0; i < 300; i++) ids.push(randomBytes(20).toString('hex'));
    return ids.filter((id) => !have.has(id));
  };

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'pack-index-'));
    git(['init', '-q']);
    for (let i = 0; i < 400; i++) writeFileSync(path.join(dir, `f${i}.txt`), `file ${i} ${randomBytes(8).toString('hex')}\n`);
    git(['add', '-A']);
    git(['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'many files']);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ['loose objects only', [] as string[]],
    ['one pack', ['repack', '-a', '-d', '-q']],
  ])('%s: every object git has may be there; ids it lacks are certainly absent', async (_, repack) => {
    if (repack.length > 0) git(repack);
    const have = allObjects();
    expect(have.length).toBeGreaterThan(400);
    for (const oid of have) expect(await mayHaveObject(objects(), oid)).toBe(true);
    for (const oid of absentIds(new Set(have))) expect(await mayHaveObject(objects(), oid)).toBe(false);
  });

  it('several packs, and loose objects beside them: each object found where it is', async () => {
    git(['repack', '-a', '-d', '-q']);
    writeFileSync(path.join(dir, 'later.txt'), 'later\n');
    git(['add', '-A']);
    git(['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'later']);
    git(['repack', '-q']);
    writeFileSync(path.join(dir, 'loose.txt'), 'loose\n');
    const loose = git(['hash-object', '-w', 'loose.txt']).trim();
    expect(idxFiles().length).toBe(2);
    const have = allObjects();
    expect(have).toContain(loose);
    for (const oid of have) expect(await mayHaveObject(objects(), oid)).toBe(true);
    for (const oid of absentIds(new Set(have)).slice(0, 50)) expect(await mayHaveObject(objects(), oid)).toBe(false);
  });

  it('an empty object directory (no pack directory) has nothing', async () => {
    const empty = mkdtempSync(path.join(tmpdir(), 'pack-index-empty-'));
    try {
      expect(await mayHaveObject(empty, 'ab'.repeat(20))).toBe(false);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('what is not read here answers "may be there": a SHA-256 id, a version 1 index, a cut or foreign file', async () => {
    git(['repack', '-a', '-d', '-q']);
    const absent = absentIds(new Set(allObjects()))[0] as string;
    expect(await mayHaveObject(objects(), 'ab'.repeat(32))).toBe(true);
    expect(await mayHaveObject(objects(), 'not an id')).toBe(true);
    const [idx] = idxFiles();
    // Version 1 (written on request, as git before 1.5.2 did).
    git(['-c', 'pack.indexVersion=1', 'repack', '-a', '-d', '-q', '-f']);
    expect(idxFiles()).toHaveLength(1);
    expect(await mayHaveObject(objects(), absent)).toBe(true);
    git(['repack', '-a', '-d', '-q', '-f']);
    const [v2] = idxFiles();
    expect(await mayHaveObject(objects(), absent)).toBe(false);
    truncateSync(v2 as string, 500);
    expect(await inPackIndex(v2 as string, Buffer.from(absent, 'hex'))).toBe(true);
    writeFileSync(v2 as string, 'not an index');
    expect(await inPackIndex(v2 as string, Buffer.from(absent, 'hex'))).toBe(true);
    // A pack index removed since the listing: nothing to give.
    expect(await inPackIndex(`${idx as string}.gone`, Buffer.from(absent, 'hex'))).toBe(false);
  });
});
