// S1: the exec-host's object cache, shared by every session of a repository on this host. A session
// may only ever read a commit from it once every object of that commit is there: never while another
// session's fetch is writing it, never the half a crashed fetch left. Sessions of one commit started
// together fetch it once.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ObjectCache } from '../../src/workspace/object-cache';
import type { GitRepo } from '../../src/workspace/git';
import { WorkingCopy, resolveSource } from '../../src/workspace/working-copy';
import { git, makeRepo } from '../support/helpers';

let tmp: string;
let source: string;
let head: string;
/** The source's head commit, file by file: what every working copy of it must hold. */
let files: Record<string, string>;
let cache: ObjectCache;
let sessions = 0;

beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-objects-'));
  ({ dir: source, head } = makeRepo({ 'src/index.js': 'module.exports = 1;\n', 'src/lib/deep.js': 'module.exports = 2;\n', 'docs/guide.md': 'a guide\n' }));
  files = Object.fromEntries(
    git(source, 'ls-files', '-z')
      .split('\0')
      .filter(Boolean)
      .map((file) => [file, fs.readFileSync(path.join(source, file), 'utf8')]),
  );
  cache = new ObjectCache(path.join(tmp, 'objects'));
});

afterEach(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.rmSync(source, { recursive: true, force: true });
});

async function newRepo(): Promise<GitRepo> {
  const dir = path.join(tmp, `session-${sessions++}`);
  const repo = { gitDir: path.join(dir, 'git'), workTree: path.join(dir, 'work'), home: path.join(dir, 'home') };
  for (const d of Object.values(repo)) fs.mkdirSync(d, { recursive: true });
  await WorkingCopy.init(repo);
  return repo;
}

async function prepare(repo: GitRepo) {
  return WorkingCopy.prepare({ repo, objects: cache, initialised: true, source: await resolveSource(source), exclusions: [] });
}

const workTreeFiles = (repo: GitRepo) =>
  Object.fromEntries(
    (fs.readdirSync(repo.workTree, { recursive: true, withFileTypes: true }) as fs.Dirent[])
      .filter((e) => e.isFile())
      .map((e) => {
        const p = path.join(e.parentPath ?? e.path, e.name);
        return [path.relative(repo.workTree, p), fs.readFileSync(p, 'utf8')];
      }),
  );

/** Every loose object of the cache's bare repository (objects/xx/…). */
const looseObjects = (dir: string) =>
  fs
    .readdirSync(path.join(dir, 'objects'))
    .filter((d) => /^[0-9a-f]{2}$/.test(d))
    .flatMap((d) => fs.readdirSync(path.join(dir, 'objects', d)));

const packs = (dir: string) => fs.readdirSync(path.join(dir, 'objects', 'pack')).filter((f) => f.endsWith('.idx'));

/**
 * Writes the source's head commit and its top tree alone into the cache, not the trees and files
 * below: what a fetch writing one object after another has done part way.
 */
function commitPartly(dir: string): void {
  const write = (type: string, id: string) => {
    const body = execFileSync('git', ['-C', source, 'cat-file', type, id]);
    expect(execFileSync('git', ['-C', dir, 'hash-object', '-t', type, '-w', '--stdin'], { input: body, encoding: 'utf8' }).trim()).toBe(id);
  };
  write('commit', head);
  write('tree', git(source, 'rev-parse', `${head}^{tree}`).trim());
}

describe('the object cache', () => {
  it('a fetch into the cache lands whole, as one pack, never object by object', async () => {
    const repo = await newRepo();
    await prepare(repo);
    const dir = await cache.dirFor(await resolveSource(source));
    expect(looseObjects(dir)).toEqual([]);
    expect(packs(dir)).toHaveLength(1);
  });

  it('a session whose commit another fetch is writing waits for that fetch, and reads the commit whole', async () => {
    const dir = await cache.dirFor(await resolveSource(source));
    let release!: () => void;
    const fetching = cache.exclusive(dir, () => new Promise<void>((r) => (release = r)));
    commitPartly(dir);
    const repo = await newRepo();
    let settled: string | null = null;
    const prepared = prepare(repo).then(
      (s) => ((settled = 'prepared'), s),
      (e: Error) => {
        settled = `failed: ${e.message}`;
        throw e;
      },
    );
    await new Promise((r) => setTimeout(r, 500));
    expect(settled).toBeNull();
    // The other fetch finishes: the rest of the commit arrives.
    git(dir, '-c', 'protocol.file.allow=always', 'fetch', '-q', '--depth=1', source, 'HEAD');
    release();
    await fetching;
    const state = await prepared;
    expect(state.baseCommit).toBe(head);
    expect(workTreeFiles(repo)).toEqual(files);
  });

  it('a commit left in the cache without what is below its top tree (a fetch that stopped half way) is fetched again, not read', async () => {
    const dir = await cache.dirFor(await resolveSource(source));
    commitPartly(dir);
    const repo = await newRepo();
    const state = await prepare(repo);
    expect(state.baseCommit).toBe(head);
    expect(workTreeFiles(repo)).toEqual(files);
  });

  it.each([2, 12])('%i sessions of one commit started together each get the whole working copy, from one fetch', async (n) => {
    const repos = await Promise.all(Array.from({ length: n }, () => newRepo()));
    const states = await Promise.all(repos.map((r) => prepare(r)));
    for (const [i, repo] of repos.entries()) {
      expect(states[i]!.baseCommit).toBe(head);
      expect(workTreeFiles(repo)).toEqual(files);
    }
    expect(new Set(states.map((s) => s.fingerprint)).size).toBe(1);
    expect(packs(await cache.dirFor(await resolveSource(source)))).toHaveLength(1);
  });

  it('a new commit of the same repository is fetched into the cache beside the first, and each session reads its own', async () => {
    const first = await newRepo();
    await prepare(first);
    fs.writeFileSync(path.join(source, 'src/index.js'), 'module.exports = 3;\n');
    git(source, 'commit', '-q', '-am', 'second');
    const second = await newRepo();
    const state = await prepare(second);
    expect(state.baseCommit).toBe(git(source, 'rev-parse', 'HEAD').trim());
    expect(workTreeFiles(second)['src/index.js']).toBe('module.exports = 3;\n');
    expect(workTreeFiles(first)['src/index.js']).toBe('module.exports = 1;\n');
    const dir = await cache.dirFor(await resolveSource(source));
    expect(looseObjects(dir)).toEqual([]);
  });
});
