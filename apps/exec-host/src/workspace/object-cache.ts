import { createHash } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { runGit, type GitRepo } from './git';
import type { FetchSource } from './remote-access';

/** A commit as `git read-tree` leaves it in an index, kept so the next working copy of it needs no git process. */
export interface CheckedOut {
  baseCommit: string;
  baseTree: string;
  /** `git ls-files -s -z` of that index. */
  entries: string[];
  /** The cache's copy of the index (no stat data yet). */
  indexPath: string;
  /** The cache directory it belongs to. */
  dir: string;
}

const CHECKED_OUT_KEPT = 64;
const CHECKED_OUT_MAX_ENTRIES = 50_000;
const WHOLE_KEPT = 4_096;

/**
 * The git objects this exec-host has fetched, one bare repository per repository source and access
 * (the URL and the project's credential, hashed: two projects share objects only when they read the
 * same repository with the same credential, so neither reads through the cache what its own access
 * would not give it). A session's git directory borrows from it (objects/info/alternates), so a
 * commit fetched once is checked out again without talking to the server; its working copy is its own.
 * The cache is written only by the exec-host, on the host, never garbage-collected while it runs
 * (gc.auto=0), and out of every sandbox's reach.
 *
 * A session reads a commit from the cache only once every object of it is there: a fetch lands as one
 * pack (fetch.unpackLimit=1), which git sees whole or not at all, and a commit not yet known whole is
 * looked at only inside `exclusive` (no fetch of this directory is running then) and checked object by
 * object once, which also catches the half of a fetch an earlier process left when it stopped.
 */
export class ObjectCache {
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly ready = new Map<string, Promise<string>>();
  /** By cache key and commit, most recently used last. */
  private readonly checked = new Map<string, CheckedOut>();
  /** `dir:commit` of the commits known to have every object in the cache, oldest first. */
  private readonly whole = new Set<string>();

  constructor(readonly root: string) {}

  keyOf(source: FetchSource): string {
    return createHash('sha256')
      .update(JSON.stringify([source.url, source.protocols, source.local, source.access ?? null]))
      .digest('hex')
      .slice(0, 40);
  }

  /** The bare repository of `source`, made on first use. */
  dirFor(source: FetchSource): Promise<string> {
    const key = this.keyOf(source);
    let made = this.ready.get(key);
    if (!made) {
      made = this.make(path.join(this.root, key));
      this.ready.set(key, made);
      made.catch(() => this.ready.delete(key));
    }
    return made;
  }

  /** The commit `commit` of `source` as checked out before here, if it was (and the cache is made). */
  checkedOut(source: FetchSource, commit: string | null): CheckedOut | null {
    if (!commit) return null;
    const id = `${this.keyOf(source)}:${commit}`;
    const known = this.checked.get(id);
    if (!known) return null;
    this.checked.delete(id);
    this.checked.set(id, known);
    return known;
  }

  /**
   * Makes `repo` borrow the cache's objects and shallow list, and gives it the remembered index of the
   * commit; false (and nothing reused) when the cache's copy is gone.
   */
  async useCheckedOut(known: CheckedOut, repo: GitRepo): Promise<boolean> {
    try {
      await this.borrow(known.dir, repo);
      await fs.copyFile(known.indexPath, path.join(repo.gitDir, 'index'));
      return true;
    } catch {
      for (const [id, v] of this.checked) if (v === known) this.checked.delete(id);
      return false;
    }
  }

  /** Keeps the index `repo` has now (straight after read-tree) for the next working copy of the same commit. */
  async rememberCheckedOut(source: FetchSource, state: Omit<CheckedOut, 'indexPath' | 'dir'>, repo: GitRepo): Promise<void> {
    if (state.entries.length > CHECKED_OUT_MAX_ENTRIES) return;
    const dir = await this.dirFor(source);
    const keep = path.join(dir, 'lemniscate-index');
    await fs.mkdir(keep, { recursive: true, mode: 0o700 });
    const indexPath = path.join(keep, state.baseCommit);
    const tmp = `${indexPath}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    await fs.copyFile(path.join(repo.gitDir, 'index'), tmp);
    await fs.rename(tmp, indexPath);
    this.checked.set(`${this.keyOf(source)}:${state.baseCommit}`, { ...state, indexPath, dir });
    while (this.checked.size > CHECKED_OUT_KEPT) this.checked.delete(this.checked.keys().next().value as string);
  }

  /** Every object of `commit` is in the cache directory `dir` (seen so since this process started). */
  isWhole(dir: string, commit: string): boolean {
    return this.whole.has(`${dir}:${commit}`);
  }

  markWhole(dir: string, commit: string): void {
    this.whole.add(`${dir}:${commit}`);
    while (this.whole.size > WHOLE_KEPT) this.whole.delete(this.whole.values().next().value as string);
  }

  /** `repo` reads objects from the cache directory `dir` (alternates) and knows which of them are shallow. */
  async borrow(dir: string, repo: GitRepo): Promise<void> {
    await fs.writeFile(path.join(repo.gitDir, 'objects', 'info', 'alternates'), `${path.join(dir, 'objects')}\n`);
    await fs.copyFile(path.join(dir, 'shallow'), path.join(repo.gitDir, 'shallow')).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
  }

  /** Runs `fn` alone for this cache directory: fetches into one repository never overlap. */
  exclusive<T>(dir: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(dir) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(fn);
    this.locks.set(dir, next);
    void next
      .finally(() => {
        if (this.locks.get(dir) === next) this.locks.delete(dir);
      })
      .catch(() => undefined);
    return next;
  }

  private async make(dir: string): Promise<string> {
    await fs.mkdir(this.root, { recursive: true, mode: 0o700 });
    const exists = await fs.stat(path.join(dir, 'HEAD')).then(
      () => true,
      () => false,
    );
    if (!exists) {
      const tmp = `${dir}.${process.pid}.${Date.now()}.tmp`;
      await fs.mkdir(tmp, { mode: 0o700 });
      await runGit({ home: tmp }, ['init', '-q', '--bare', tmp]);
      await runGit({ home: tmp }, ['--git-dir', tmp, 'config', 'gc.auto', '0']);
      await fs.rename(tmp, dir).catch(async (e: NodeJS.ErrnoException) => {
        // Another start made it first: use that one.
        await fs.rm(tmp, { recursive: true, force: true });
        if (e.code !== 'ENOTEMPTY' && e.code !== 'EEXIST') throw e;
      });
    }
    return dir;
  }
}
