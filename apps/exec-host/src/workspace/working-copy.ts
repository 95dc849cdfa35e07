import { repositoryTransport, resolveWorkspaceLink, type ChangesResponse, type FileChange, type RepositoryAccess } from '@lemniscate/contracts';
import { lstatSync, readlinkSync } from 'node:fs';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import picomatch from 'picomatch';
import { ExecHostError } from '../errors';
import { GitError, gitText, runGit, type GitRepo } from './git';
import { readIndexEntries } from './git-index';
import { readLocalRefs } from './local-refs';
import { fetchFailureReason, runFetchGit, type FetchSource } from './remote-access';
import type { ObjectCache } from './object-cache';
import { mayHaveObject } from './pack-index';
import { displayPath } from './path-scope';
import { isBinary, WorkspaceFs } from './safe-fs';
import { sameTree, stampTree, type TreeStamp } from './tree-stamp';
import { unifiedDiff } from './unified-diff';

const MAX_CHANGED_FILES = 5_000;
const MAX_UNTRACKED_READ = 8 * 1024 * 1024;

type SourceResolution = FetchSource;

/**
 * Accepts an absolute local path or a git URL (with the project's access, for a URL); anything else
 * is a clear 400 before anything is created.
 */
export async function resolveSource(source: string, access?: RepositoryAccess): Promise<SourceResolution> {
  const transport = repositoryTransport(source);
  if (transport === 'https') return { url: source, protocols: ['https'], local: false, access };
  if (transport === 'ssh') {
    if (!access?.knownHosts) {
      throw new ExecHostError(
        'repository_not_found',
        `The repository ${source} is reached over SSH, and the project's repository access names no known host key for it: an administrator sets it (the server's host key is never trusted on first use).`,
      );
    }
    return { url: source, protocols: ['ssh'], local: false, access };
  }
  if (/^[a-z][a-z0-9+.-]*:/i.test(source)) {
    throw new ExecHostError('repository_not_found', `The repository source ${source} uses a protocol the exec-host does not fetch from; use an absolute path, https:// or ssh://.`);
  }
  if (source.startsWith('-') || !path.isAbsolute(source)) {
    throw new ExecHostError('repository_not_found', `The repository source ${source} must be an absolute path on the exec-host or a git URL.`);
  }
  let st;
  try {
    st = await fs.stat(source);
  } catch {
    throw new ExecHostError('repository_not_found', `The repository ${source} does not exist on the exec-host.`);
  }
  if (!st.isDirectory()) throw new ExecHostError('repository_not_found', `The repository ${source} is not a directory.`);
  return { url: source, protocols: ['file'], local: true };
}

interface PrepareOptions {
  repo: GitRepo;
  /** Fetched objects kept across sessions (the exec-host's); without it every fetch is the session's own. */
  objects?: ObjectCache;
  /** `git init` was done ahead (WorkingCopy.init, when the sandbox was made). */
  initialised?: boolean;
  source: SourceResolution;
  ref?: string;
  uncommittedPatch?: string;
  exclusions: readonly string[];
}

export interface PreparedState {
  baseCommit: string;
  branch: string | null;
  startTree: string;
  fingerprint: string;
  excluded: string[];
  includedUncommitted: boolean;
}

/** The same path, or one a directory above the other. */
const clashes = (a: string, b: string) => a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);

/** Files whose content changes the status of other paths. */
const STATUS_INPUTS = new Set(['.gitignore', '.gitattributes']);

/** The path of one `git ls-files -s -z` entry ("mode blob stage\tpath"). */
function entryPath(entry: string): string {
  return entry.slice(entry.indexOf('\t') + 1);
}

/**
 * X3: `sha256:<hex>` over the (mode, blob id, stage, path) entries of an index, in git's order,
 * leaving out the context exclusions: the files the sandbox never sees are not part of its tree.
 */
export function treeFingerprint(entries: readonly string[], excluded: ReadonlySet<string>): string {
  const hash = createHash('sha256');
  for (const entry of entries) if (!excluded.has(entryPath(entry))) hash.update(`${entry}\0`);
  return `sha256:${hash.digest('hex')}`;
}

/** Matcher for context exclusions: a glob without "/" matches a file name at any depth. */
export function exclusionMatcher(globs: readonly string[]): (p: string) => boolean {
  const matchers = globs.map((g) => picomatch(g, { dot: true, basename: !g.includes('/') }));
  return (p) => matchers.some((m) => m(p));
}

/**
 * The working copy of one sandbox: files in `workTree` (the mount the sandbox sees) and git's
 * bookkeeping in `gitDir` on the host, out of the sandbox's reach. The index is the checkpoint:
 * accepted changes are staged into it, revert restores from it, the patch is the index against the
 * base commit. Change detection is `git status` over the index's stat data.
 */
export class WorkingCopy {
  readonly files: WorkspaceFs;

  constructor(
    readonly repo: GitRepo,
    readonly state: PreparedState,
  ) {
    this.files = new WorkspaceFs(repo.workTree);
  }

  /** The part of a working copy that needs no repository: an empty git directory. */
  static async init(repo: GitRepo): Promise<void> {
    await runGit(repo, ['init', '-q']);
  }

  /**
   * What the source's ref names now: the name to fetch, the branch (if it is one) and the commit the
   * listing tells (null for a commit named by id, or a tag whose peeled commit is not listed).
   */
  static async resolveRef(o: Pick<PrepareOptions, 'repo' | 'source' | 'ref'>): Promise<{ want: string; branch: string | null; expected: string | null; refs: Map<string, string> }> {
    const fetchOpts = { extraConfig: o.source.local ? ['uploadpack.allowAnySHA1InWant=true'] : [], timeoutMs: 300_000 };
    // A repository on this host is read in process when its refs are plain files; anything else asks git.
    const { refs, headBranch } = (o.source.local && (await readLocalRefs(o.source.url))) || (await listRemoteRefs(o, fetchOpts));
    let want: string;
    let branch: string | null = null;
    if (!o.ref) {
      if (!refs.has('HEAD')) throw new ExecHostError('repository_ref_not_found', `The repository ${o.source.url} has no commit yet.`);
      want = 'HEAD';
      branch = headBranch;
    } else if (refs.has(`refs/heads/${o.ref}`)) {
      want = `refs/heads/${o.ref}`;
      branch = o.ref;
    } else if (refs.has(`refs/tags/${o.ref}`)) {
      want = `refs/tags/${o.ref}`;
    } else if (o.ref.startsWith('refs/') && refs.has(o.ref)) {
      want = o.ref;
      branch = o.ref.startsWith('refs/heads/') ? o.ref.slice('refs/heads/'.length) : null;
    } else if (/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(o.ref)) {
      want = o.ref;
    } else {
      throw new ExecHostError('repository_ref_not_found', `The ref "${o.ref}" is neither a branch, a tag nor a full commit id of ${o.source.url}.`);
    }
    return { want, branch, expected: expectedCommit(refs, want), refs };
  }

  static async prepare(o: PrepareOptions): Promise<PreparedState> {
    const { repo } = o;
    if (!o.initialised) await WorkingCopy.init(repo);
    const fetchOpts = { extraConfig: o.source.local ? ['uploadpack.allowAnySHA1InWant=true'] : [], timeoutMs: 300_000 };
    const { want, branch, expected } = await WorkingCopy.resolveRef(o);
    const patched = Boolean(o.uncommittedPatch && o.uncommittedPatch.trim() !== '');
    let baseCommit: string;
    let baseTree: string;
    let staged: string[];
    // The same commit checked out before, through the cache: its index (as read-tree writes it, before
    // any stat data) and its entries are reused, and no git process runs until the checkout.
    const known = o.objects && !patched ? o.objects.checkedOut(o.source, expected) : null;
    if (known && (await o.objects!.useCheckedOut(known, repo))) {
      ({ baseCommit, baseTree, entries: staged } = known);
    } else {
      ({ baseCommit, baseTree } = o.objects ? await fetchThroughCache(o, o.objects, want, expected, fetchOpts) : await fetchInto(o, want, fetchOpts));
      await runGit(repo, ['read-tree', baseCommit]);
      if (!patched) {
        staged = await indexEntries(repo);
        if (o.objects) await o.objects.rememberCheckedOut(o.source, { baseCommit, baseTree, entries: staged }, repo);
      } else staged = [];
    }
    // HEAD detached at the base (what `git update-ref --no-deref HEAD` writes), without a process.
    await fs.writeFile(path.join(repo.gitDir, 'HEAD'), `${baseCommit}\n`);
    let includedUncommitted = false;
    if (patched) {
      const applied = await runGit(repo, ['apply', '--cached', '--binary', '--whitespace=nowarn', '-'], { input: o.uncommittedPatch, allowFailure: true });
      if (applied.code !== 0) {
        throw new ExecHostError('uncommitted_patch_does_not_apply', `The uncommitted changes do not apply on ${baseCommit.slice(0, 12)}: ${applied.stderr.trim().split('\n')[0] ?? ''}`);
      }
      includedUncommitted = true;
      staged = await indexEntries(repo);
    }
    const startTree = includedUncommitted ? (await gitText(repo, ['write-tree'])).trim() : baseTree;
    // S5: excluded files stay in the index (so they are not "deleted" in the patch) with the
    // skip-worktree bit, which keeps them out of the working tree and out of status.
    const isExcluded = exclusionMatcher(o.exclusions);
    const excluded = staged.map(entryPath).filter(isExcluded);
    if (excluded.length > 0) {
      await runGit(repo, ['update-index', '-z', '--skip-worktree', '--stdin'], { input: excluded.join('\0') + '\0' });
    }
    await runGit(repo, ['checkout-index', '-a', '-q']);
    await chownTree(repo.workTree, staged.length - excluded.length);
    // The ownership change touched every inode's ctime; refresh the stat data once now so that change
    // detection afterwards reads nothing but stat data.
    await runGit(repo, ['update-index', '-q', '--refresh'], { allowFailure: true });
    return { baseCommit, branch, startTree, fingerprint: treeFingerprint(staged, new Set(excluded)), excluded, includedUncommitted };
  }

  async changes(): Promise<ChangesResponse> {
    const status = await this.status();
    const entries = status.slice(0, MAX_CHANGED_FILES);
    const tracked = entries.filter((e) => e.kind === 'tracked');
    const diffs = tracked.length > 0 ? await this.trackedDiffs(tracked.map((e) => e.path)) : new Map<string, string>();
    const files: FileChange[] = [];
    const added = entries.filter((e) => e.kind === 'untracked');
    const deleted = tracked.filter((e) => e.worktree === 'D');
    // Renames: an added file whose content is exactly a deleted file's checkpointed blob.
    const deletedByBlob = new Map<string, StatusEntry>();
    for (const d of deleted) if (d.indexBlob) deletedByBlob.set(d.indexBlob, d);
    const renamedFrom = new Map<string, string>();
    const addedInfo = new Map<string, { diff: string; binary: boolean; size: number; blob: string }>();
    for (const a of added) {
      const info = await this.untrackedFile(a.path);
      addedInfo.set(a.path, info);
      const from = deletedByBlob.get(info.blob);
      if (from && !renamedFrom.has(from.path) && [...renamedFrom.values()].every((p) => p !== a.path)) {
        renamedFrom.set(from.path, a.path);
        deletedByBlob.delete(info.blob);
      }
    }
    const renameTargets = new Map([...renamedFrom].map(([from, to]) => [to, from]));
    for (const e of tracked) {
      if (renamedFrom.has(e.path)) continue;
      const diff = diffs.get(e.path) ?? '';
      const binary = /^(Binary files |GIT binary patch)/m.test(diff);
      let status: FileChange['status'] = 'modified';
      if (e.worktree === 'D') status = 'deleted';
      else if (e.indexMode !== e.worktreeMode && !/^@@/m.test(diff) && !binary) status = 'mode';
      const size = status === 'deleted' ? 0 : await this.sizeOf(e.path);
      files.push({ path: e.path, status, diff, binary, size, diffBytes: Buffer.byteLength(diff) });
    }
    for (const a of added) {
      const info = addedInfo.get(a.path)!;
      const from = renameTargets.get(a.path);
      if (from) {
        const diff = `diff --git a/${from} b/${a.path}\nsimilarity index 100%\nrename from ${from}\nrename to ${a.path}\n`;
        files.push({ path: a.path, oldPath: from, status: 'renamed', diff, binary: info.binary, size: info.size, diffBytes: Buffer.byteLength(diff) });
      } else {
        files.push({ path: a.path, status: 'added', diff: info.diff, binary: info.binary, size: info.size, diffBytes: Buffer.byteLength(info.diff) });
      }
    }
    for (const f of files) {
      if (f.status === 'deleted') continue;
      const link = this.symlinkOf(f.path);
      if (link) f.symlink = link;
    }
    files.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
    return { files, truncated: status.length > MAX_CHANGED_FILES };
  }

  /**
   * When `rel` is now a symbolic link: its target, and whether it points outside the working copy,
   * every link on the way followed inside the working copy only (never through the host's file
   * system: each path read is one whose parents were already found to be plain directories).
   */
  private symlinkOf(rel: string): FileChange['symlink'] | null {
    const readLink = (p: string): string | null => {
      const full = path.join(this.files.root, p);
      try {
        return lstatSync(full).isSymbolicLink() ? readlinkSync(full) : null;
      } catch {
        return null;
      }
    };
    const target = readLink(rel);
    if (target === null) return null;
    return { target, outside: resolveWorkspaceLink(rel, target, readLink).outside };
  }

  /** Stages the given changed paths into the checkpoint. Returns the paths accepted. */
  async accept(requested: string[]): Promise<string[]> {
    const targets = await this.changedTargets(requested);
    if (targets.length > 0) await runGit(this.repo, ['add', '-A', '--', ...targets]);
    return targets;
  }

  /** Restores the given changed paths from the checkpoint (added files are removed). */
  async revert(requested: string[]): Promise<string[]> {
    const status = await this.status();
    const byPath = new Map(status.map((e) => [e.path, e]));
    const targets = await this.changedTargets(requested, status);
    const restore: string[] = [];
    for (const p of targets) {
      const e = byPath.get(p);
      if (!e) continue;
      if (e.kind === 'untracked') this.files.removeFile(p);
      else restore.push(p);
    }
    if (restore.length > 0) {
      // A directory standing where a checkpointed file was would block the restore.
      for (const p of restore) {
        const st = await fs.lstat(path.join(this.files.root, p)).catch(() => null);
        if (st && (st.isDirectory() || st.isSymbolicLink())) this.files.removeFile(p);
      }
      await runGit(this.repo, ['checkout-index', '-f', '-q', '--', ...restore]);
      for (const p of restore) {
        // git recreated these (and any missing parent directory) as root: give them back to the sandbox user.
        const parts = p.split('/');
        for (let i = 1; i <= parts.length; i++) this.files.fixOwnership(parts.slice(0, i).join('/'));
      }
    }
    return targets;
  }

  /**
   * Changes nobody has accepted or reverted yet at `rels`, or in the way of them: a pending path
   * that is a directory above one of them or lies under one. Staging a file where a pending deletion
   * left room for its directory would keep that deletion, which no person saw, in the checkpoint.
   */
  async pending(rels: string[]): Promise<string[]> {
    const status = await this.status();
    return status.filter((e) => rels.some((r) => clashes(e.path, r))).map((e) => e.path);
  }

  /**
   * Stages files an approved diff just wrote (or removed) into the checkpoint. `pending` found none of
   * them changed, nor any pending path in their way, just before, under the same lock (the one caller,
   * `FileOperations.apply`, refuses the write otherwise), and staging makes each equal to the checkpoint
   * again: every other path's status is what that read found. So the status is kept, stamped anew,
   * and the next read starts no process — unless a written file decides what git ignores or how it
   * reads files (`.gitignore`, `.gitattributes`), which can change other paths' status.
   */
  async stageWritten(rels: string[]): Promise<void> {
    const before = this.lastStatus;
    this.lastStatus = null;
    await runGit(this.repo, ['add', '-A', '--', ...rels]);
    if (!before || rels.some((r) => STATUS_INPUTS.has(path.posix.basename(r)))) return;
    const stamp = this.stamp();
    if (stamp && !stamp.racy) this.lastStatus = { stamp, entries: before.entries };
  }

  /**
   * The patch of everything accepted, with the fingerprint of the tree it gives (X3): the same hash as
   * at the start, over the checkpoint (the index) instead of the starting tree, the excluded files
   * left out again. Nothing accepted: the start's fingerprint. Read together, so they always agree.
   */
  async patch(): Promise<{ patch: string; sessionPatch: string; fingerprint: string }> {
    const diffArgs = ['diff', '--cached', '--binary', '--full-index', '--no-ext-diff', '--no-textconv', '--no-renames', '--ignore-submodules=all', '--no-color'];
    const patch = await gitText(this.repo, [...diffArgs, this.state.baseCommit]);
    const sessionPatch = this.state.includedUncommitted ? await gitText(this.repo, [...diffArgs, this.state.startTree]) : patch;
    // The index read here rather than by `git ls-files -s` (a process per kept change); git when it cannot be.
    const staged = await indexEntries(this.repo);
    return { patch, sessionPatch, fingerprint: treeFingerprint(staged, new Set(this.state.excluded)) };
  }

  private async changedTargets(requested: string[], status?: StatusEntry[]): Promise<string[]> {
    const entries = status ?? (await this.status());
    const changed = new Set(entries.map((e) => e.path));
    const rels = requested.map((r) => this.files.relative(r));
    for (const r of rels) {
      if (!changed.has(r)) throw new ExecHostError('change_not_found', `${displayPath(r)} has no pending change to accept or revert.`);
    }
    const out = new Set<string>(rels);
    // A renamed file is accepted or reverted together with the deletion of its old path.
    const mayBeRename = entries.some((e) => e.worktree === 'D') && rels.some((r) => entries.find((e) => e.path === r)?.kind === 'untracked');
    if (mayBeRename) {
      const current = await this.changes();
      for (const r of rels) {
        const rename = current.files.find((f) => f.status === 'renamed' && f.path === r);
        if (rename?.oldPath) out.add(rename.oldPath);
      }
    }
    return [...out];
  }

  /**
   * The last status read (or carried over a write, `stageWritten`), with the stamp of the tree and of
   * git's index, exclusions and HEAD it holds for; kept only when that stamp can prove a later tree
   * unchanged (see tree-stamp.ts).
   */
  private lastStatus: { stamp: TreeStamp; entries: StatusEntry[] } | null = null;

  /**
   * What differs from the checkpoint. Reading it is one `git status` (a process, over the index's
   * stat data); when the tree, the index, the exclusions and HEAD carry exactly the stat data they
   * had at the last read, which no change can leave as it was, and the entries that were racy then
   * still hold the same content, that read is the answer and no process starts.
   * Callers hold the sandbox's lock, with no command running, so nothing changes during the read.
   */
  private async status(): Promise<StatusEntry[]> {
    const stamp = this.stamp();
    if (stamp && this.lastStatus && sameTree(this.lastStatus.stamp, stamp)) return this.lastStatus.entries;
    const entries = await this.readStatus();
    this.lastStatus = stamp && !stamp.racy ? { stamp, entries } : null;
    return entries;
  }

  private stamp() {
    return stampTree(this.repo.workTree, [path.join(this.repo.gitDir, 'index'), path.join(this.repo.gitDir, 'info', 'exclude'), path.join(this.repo.gitDir, 'HEAD')]);
  }

  private async readStatus(): Promise<StatusEntry[]> {
    const out = await gitText(this.repo, ['status', '--porcelain=v2', '-z', '--untracked-files=all', '--ignore-submodules=all', '--no-renames']);
    const entries: StatusEntry[] = [];
    for (const record of out.split('\0')) {
      if (record.startsWith('? ')) {
        entries.push({ kind: 'untracked', path: record.slice(2), worktree: '?', indexMode: '', worktreeMode: '', indexBlob: '' });
      } else if (record.startsWith('1 ')) {
        // 1 XY sub mH mI mW hH hI path
        const fields = record.split(' ');
        const xy = fields[1] ?? '..';
        const worktree = xy[1] ?? '.';
        if (worktree === '.') continue;
        entries.push({ kind: 'tracked', path: fields.slice(8).join(' '), worktree, indexMode: fields[4] ?? '', worktreeMode: fields[5] ?? '', indexBlob: fields[7] ?? '' });
      }
    }
    return entries;
  }

  private async trackedDiffs(paths: string[]): Promise<Map<string, string>> {
    const out = await gitText(this.repo, ['diff', '--no-ext-diff', '--no-textconv', '--no-renames', '--ignore-submodules=all', '--no-color', '--', ...paths]);
    const map = new Map<string, string>();
    const sections = out.split(/^(?=diff --git )/m).filter((s) => s.startsWith('diff --git '));
    // git prints sections in index order, which is the order status gave the paths in.
    const sorted = [...paths].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    sorted.forEach((p, i) => {
      const s = sections[i];
      if (s !== undefined) map.set(p, s);
    });
    return map;
  }

  private async untrackedFile(rel: string): Promise<{ diff: string; binary: boolean; size: number; blob: string }> {
    const full = path.join(this.files.root, rel);
    const st = await fs.lstat(full).catch(() => null);
    if (st?.isSymbolicLink()) {
      const target = await fs.readlink(full);
      const blob = gitBlobId(Buffer.from(target));
      return { diff: unifiedDiff(rel, null, { content: `${target}\n`, mode: '120000' }).replace(/\n\+([^\n]*)\n$/, '\n+$1\n\\ No newline at end of file\n'), binary: false, size: st.size, blob };
    }
    let content: Buffer;
    let mode = 0o644;
    try {
      const f = this.files.readFile(rel, MAX_UNTRACKED_READ);
      content = f.content;
      mode = f.mode;
    } catch (e) {
      const note = e instanceof ExecHostError ? e.message : 'could not be read';
      const diff = `diff --git a/${rel} b/${rel}\nnew file mode 100644\n# ${note}\n`;
      return { diff, binary: true, size: st?.size ?? 0, blob: '' };
    }
    const gitMode = mode & 0o111 ? '100755' : '100644';
    const blob = gitBlobId(content);
    if (isBinary(content)) {
      const diff = `diff --git a/${rel} b/${rel}\nnew file mode ${gitMode}\nBinary files /dev/null and b/${rel} differ\n`;
      return { diff, binary: true, size: content.length, blob };
    }
    return { diff: unifiedDiff(rel, null, { content: content.toString('utf8'), mode: gitMode }), binary: false, size: content.length, blob };
  }

  private async sizeOf(rel: string): Promise<number> {
    const st = await fs.lstat(path.join(this.files.root, rel)).catch(() => null);
    return st?.size ?? 0;
  }
}

interface StatusEntry {
  kind: 'tracked' | 'untracked';
  path: string;
  /** Status letter of the working tree against the index (M, D, T…). */
  worktree: string;
  indexMode: string;
  worktreeMode: string;
  indexBlob: string;
}

function gitBlobId(content: Buffer): string {
  return createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
}

/**
 * Gives the tree to the sandbox user and dates every file two seconds back, so that the index
 * written just after is newer than all of them: git then trusts their stat data instead of
 * re-reading "racily clean" files on every status (it could not record that, running read-only).
 */
interface ListedRefs {
  refs: Map<string, string>;
  headBranch: string | null;
}

/** `git ls-remote --symref`: the refs of any source, with the project's access. */
async function listRemoteRefs(o: Pick<PrepareOptions, 'repo' | 'source'>, fetchOpts: FetchOptions): Promise<ListedRefs> {
  const remote = await runFetchGit(o.repo, ['ls-remote', '--symref', '--', o.source.url], o.source, { ...fetchOpts, allowFailure: true });
  if (remote.code !== 0) {
    const reason = fetchFailureReason(remote.stderr);
    throw new ExecHostError('repository_not_found', reason ? `${o.source.url} cannot be read: ${reason}.` : `${o.source.url} is not a git repository the exec-host can read.`, {
      git: remote.stderr.trim().split('\n').slice(-2).join(' '),
    });
  }
  const refs = new Map<string, string>();
  let headBranch: string | null = null;
  for (const line of remote.stdout.toString('utf8').split('\n')) {
    const sym = /^ref: refs\/heads\/(\S+)\tHEAD$/.exec(line);
    if (sym?.[1]) headBranch = sym[1];
    const m = /^([0-9a-f]{40,64})\t(\S+)$/.exec(line);
    if (m?.[1] && m[2]) refs.set(m[2], m[1]);
  }
  return { refs, headBranch };
}

/** The commit `want` names in the ls-remote answer, when it tells (a branch, a tag peeled, HEAD); null for a commit id. */
function expectedCommit(refs: Map<string, string>, want: string): string | null {
  return refs.get(`${want}^{}`) ?? refs.get(want) ?? null;
}

type FetchOptions = { extraConfig: string[]; timeoutMs: number };

function refNotFetched(o: PrepareOptions, stderr: string): ExecHostError {
  return new ExecHostError('repository_ref_not_found', `The ref "${o.ref ?? 'HEAD'}" could not be fetched from ${o.source.url}.`, { git: stderr.trim().split('\n').slice(-2).join(' ') });
}

/** The index's entries as `git ls-files -s -z` prints them: read in this process, or by git when it has a form not read here. */
async function indexEntries(repo: GitRepo): Promise<string[]> {
  return (await readIndexEntries(path.join(repo.gitDir, 'index'))) ?? (await gitText(repo, ['ls-files', '-s', '-z'])).split('\0').filter(Boolean);
}

/** The base commit and its tree, in one process; null when the objects are not there (or not a commit). */
async function commitAndTree(repo: GitRepo, rev: string): Promise<{ baseCommit: string; baseTree: string } | null> {
  // `--verify` takes one name; two names answer in one process, each checked to be an object id.
  const r = await runGit(repo, ['rev-parse', `${rev}^{commit}`, `${rev}^{tree}`], { allowFailure: true });
  const [commit, tree] = r.stdout.toString('utf8').trim().split('\n');
  const oid = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
  if (r.code !== 0 || !commit || !tree || !oid.test(commit) || !oid.test(tree)) return null;
  return { baseCommit: commit, baseTree: tree };
}

/** The session's own fetch (no cache): depth 1 into its git directory. */
async function fetchInto(o: PrepareOptions, want: string, fetchOpts: FetchOptions): Promise<{ baseCommit: string; baseTree: string }> {
  const fetched = await runFetchGit(o.repo, ['fetch', '-q', '--no-tags', '--depth=1', '--', o.source.url, want], o.source, { ...fetchOpts, allowFailure: true });
  if (fetched.code !== 0) throw refNotFetched(o, fetched.stderr);
  const base = await commitAndTree(o.repo, 'FETCH_HEAD');
  if (!base) throw new ExecHostError('repository_ref_not_found', `The ref "${o.ref ?? 'HEAD'}" of ${o.source.url} does not name a commit.`);
  return base;
}

/**
 * Through the exec-host's object cache: the session's git directory borrows the cache's objects; a
 * commit already there needs no fetch at all, another one is fetched (depth 1) into the cache, alone.
 * The cache's shallow list comes along, so git knows which parents are absent. A commit is read from
 * the cache only once it is known whole there (object-cache.ts): straight away when this process saw
 * it so before, otherwise after any fetch into the cache has ended.
 */
async function fetchThroughCache(o: PrepareOptions, objects: ObjectCache, want: string, expected: string | null, fetchOpts: FetchOptions): Promise<{ baseCommit: string; baseTree: string }> {
  const cache = await objects.dirFor(o.source);
  const borrowShallow = () => objects.borrow(cache, o.repo);
  const wanted = expected ?? want;
  if (expected && objects.isWhole(cache, expected)) {
    await borrowShallow();
    const known = await commitAndTree(o.repo, expected);
    if (known) return known;
  }
  return objects.exclusive(cache, async () => {
    // A commit certainly not in the cache (read in this process: its loose objects, its packs' indexes) is fetched without asking git first.
    const absent = !(await mayHaveObject(path.join(cache, 'objects'), wanted));
    if (!absent) await borrowShallow();
    const present = absent ? null : await commitAndTree(o.repo, wanted);
    if (present && (objects.isWhole(cache, present.baseCommit) || (await everyObjectOf(o.repo, present.baseCommit)))) {
      objects.markWhole(cache, present.baseCommit);
      return present;
    }
    const cacheRepo: GitRepo = { gitDir: cache, workTree: o.repo.workTree, home: o.repo.home };
    // One pack, seen whole or not at all (a small fetch would otherwise be written object by object).
    const extraConfig = [...fetchOpts.extraConfig, 'fetch.unpackLimit=1'];
    const fetched = await runFetchGit(cacheRepo, ['fetch', '-q', '--no-tags', '--depth=1', '--', o.source.url, want], o.source, { ...fetchOpts, extraConfig, allowFailure: true });
    if (fetched.code !== 0) throw refNotFetched(o, fetched.stderr);
    // The server's answer wins over the earlier listing (the branch may have moved in between).
    const head = /^([0-9a-f]{40,64})/.exec(await fs.readFile(path.join(cache, 'FETCH_HEAD'), 'utf8'))?.[1];
    await borrowShallow();
    const base = head ? await commitAndTree(o.repo, head) : null;
    if (!base) throw new ExecHostError('repository_ref_not_found', `The ref "${o.ref ?? 'HEAD'}" of ${o.source.url} does not name a commit.`);
    objects.markWhole(cache, base.baseCommit);
    return base;
  });
}

/** Every tree and file of `commit` can be read (its parents are not looked at). */
async function everyObjectOf(repo: GitRepo, commit: string): Promise<boolean> {
  const r = await runGit(repo, ['rev-list', '--objects', '--no-walk', '--missing=print', commit], { allowFailure: true });
  return r.code === 0 && !/^\?/m.test(r.stdout.toString('utf8'));
}

/**
 * Gives the working copy to the sandbox user and dates every file back by a second and a half or more
 * (so git's stat data, refreshed next, never sees a file as racily clean), at half a second: a file
 * system that keeps fractions of a second keeps that one, which lets change detection trust the tree
 * 100 ms later instead of 2 s (tree-stamp.ts). Small trees in process; large ones with chown -R and
 * find, which are faster there.
 */
async function chownTree(root: string, files: number): Promise<void> {
  const past = Math.floor(Date.now() / 1000) - 2 + 0.5;
  if (files <= 2_000) {
    const entries = await fs.readdir(root, { recursive: true, withFileTypes: true });
    await Promise.all(
      entries.map(async (e) => {
        const p = path.join(e.parentPath ?? e.path, e.name);
        await fs.lchown(p, 10001, 10001);
        await fs.lutimes(p, past, past);
      }),
    );
    await fs.chown(root, 10001, 10001);
    return;
  }
  await chownTreeWithTools(root, past);
}

async function chownTreeWithTools(root: string, past: number): Promise<void> {
  const { execFile } = await import('node:child_process');
  const sh = (cmd: string, args: string[]) => new Promise<void>((resolve, reject) => execFile(cmd, args, { timeout: 300_000 }, (e) => (e ? reject(e) : resolve())));
  await sh('chown', ['-R', '-h', '10001:10001', '--', root]);
  await sh('find', [root, '-mindepth', '1', '-exec', 'touch', '-h', '-c', '-d', `@${past}`, '{}', '+']);
}

export { GitError };
