import type { RepositoryAccess, RepositoryDirectory, RepositoryDirectoryRequestParsed } from '@lemniscate/contracts';
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { ExecHostError } from '../errors';
import { gitText, runGit, type GitRepo } from '../workspace/git';
import { fetchFailureReason, runFetchGit } from '../workspace/remote-access';
import { resolveSource } from '../workspace/working-copy';
import { DEVCONTAINER_PATHS, DevcontainerError, parseDevcontainer, type Devcontainer } from './devcontainer';

/**
 * The inputs of a project's environment, read from its repository at the default ref (never from a
 * session's working copy): the devcontainer definition and the files that decide what set-up
 * installs. Their hash is the environment's key; anything else changing does not prepare again.
 */

/** Names of the files that decide a project's dependencies, at any depth (vendored trees aside). */
export const DEPENDENCY_FILES = new Set<string>([
  'package.json',
  'package-lock.json',
  'npm-shrinkwrap.json',
  'yarn.lock',
  'pnpm-lock.yaml',
  '.npmrc',
  'requirements.txt',
  'constraints.txt',
  'pyproject.toml',
  'poetry.lock',
  'Pipfile',
  'Pipfile.lock',
  'setup.py',
  'setup.cfg',
  'uv.lock',
  'go.mod',
  'go.sum',
  'Cargo.toml',
  'Cargo.lock',
  'Gemfile',
  'Gemfile.lock',
  'pom.xml',
  'build.gradle',
  'build.gradle.kts',
  'settings.gradle',
  'settings.gradle.kts',
  'gradle.properties',
  'composer.json',
  'composer.lock',
]);
const DEPENDENCY_PATTERNS = [/^requirements[-.\w]*\.txt$/, /\.csproj$/];
const SKIPPED_DIRS = /(^|\/)(node_modules|vendor|\.venv|venv|third_party)\//;

/** Whether a repository path is an input of the environment (the devcontainer directory, or a dependency file). */
export function isEnvironmentInput(p: string): boolean {
  if (p.startsWith('.devcontainer/') || p === '.devcontainer.json') return true;
  if (SKIPPED_DIRS.test(p)) return false;
  const base = path.posix.basename(p);
  return DEPENDENCY_FILES.has(base) || DEPENDENCY_PATTERNS.some((r) => r.test(base));
}

/** Bumped when the way an environment is prepared changes, so older preparations are not reused. */
export const ENVIRONMENT_FORMAT = 1;

export interface EnvironmentInputs {
  commit: string;
  devcontainer: Devcontainer | null;
  /** Why the devcontainer cannot be used (it exists but is unusable); null when it parsed or is absent. */
  invalid: string | null;
  /** (path, blob id) of every input, sorted. */
  files: { path: string; blob: string }[];
}

/**
 * The environment's key: a hash over its inputs, the image it starts from, the preparation format,
 * and whose it is (the project and the runtime its set-up ran under): two projects on one repository
 * never share a preparation, and a gVisor project never starts from a set-up that ran under runc.
 */
export function environmentKey(inputs: Pick<EnvironmentInputs, 'files'>, baseImageId: string, owner: { projectId: string; runtime: string }): string {
  const hash = createHash('sha256');
  hash.update(`lemniscate-environment ${ENVIRONMENT_FORMAT}\0${baseImageId}\0${owner.projectId}\0${owner.runtime}\0`);
  for (const f of inputs.files) hash.update(`${f.blob} ${f.path}\0`);
  return hash.digest('hex');
}

/**
 * Fetches `ref` of `source` (one commit, no history, with the project's access) into the empty `repo`
 * and points its HEAD there; `consequence` ends the sentence of a refusal.
 */
export async function fetchDefaultRef(repo: GitRepo, source: string, ref: string | undefined, access: RepositoryAccess | undefined, consequence: string): Promise<string> {
  const resolved = await resolveSource(source, access);
  const fetchOpts = { extraConfig: resolved.local ? ['uploadpack.allowAnySHA1InWant=true'] : [], timeoutMs: 300_000 };
  await runGit(repo, ['init', '-q']);
  const want = ref ? ref : 'HEAD';
  const fetched = await runFetchGit(repo, ['fetch', '-q', '--no-tags', '--depth=1', '--', resolved.url, want], resolved, { ...fetchOpts, allowFailure: true });
  if (fetched.code !== 0) {
    const reason = fetchFailureReason(fetched.stderr);
    throw new ExecHostError('repository_ref_not_found', `The default ref "${want}" could not be fetched from ${source}${reason ? ` (${reason})` : ''}, ${consequence}.`, {
      git: fetched.stderr.trim().split('\n').slice(-2).join(' '),
    });
  }
  const commit = (await gitText(repo, ['rev-parse', '--verify', 'FETCH_HEAD^{commit}'])).trim();
  await runGit(repo, ['update-ref', '--no-deref', 'HEAD', commit]);
  return commit;
}

/**
 * Fetches `ref` of `source` (one commit, no history) into `repo` and reads the environment's inputs.
 * The checkout itself is left to the caller (a preparation needs the files; a status read does not).
 */
export async function readInputs(repo: GitRepo, source: string, ref: string | undefined, access?: RepositoryAccess): Promise<EnvironmentInputs> {
  const commit = await fetchDefaultRef(repo, source, ref, access, "so the project's environment cannot be read");
  const listing = (await gitText(repo, ['ls-tree', '-r', '-z', '--full-tree', commit])).split('\0').filter(Boolean);
  const files: { path: string; blob: string }[] = [];
  const blobs = new Map<string, string>();
  for (const entry of listing) {
    const m = /^(\d+) (\w+) ([0-9a-f]+)\t(.*)$/s.exec(entry);
    if (!m || m[2] !== 'blob') continue;
    const p = m[4]!;
    blobs.set(p, m[3]!);
    if (isEnvironmentInput(p)) files.push({ path: p, blob: m[3]! });
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const found = DEVCONTAINER_PATHS.find((p) => blobs.has(p));
  if (!found) return { commit, devcontainer: null, invalid: null, files: [] };
  const text = (await runGit(repo, ['cat-file', 'blob', blobs.get(found)!], { raw: true })).stdout.toString('utf8');
  try {
    const devcontainer = parseDevcontainer(found, text);
    if (devcontainer.build && !blobs.has(devcontainer.build.dockerfile)) {
      return { commit, devcontainer, invalid: `${found}: "build.dockerfile" names ${devcontainer.build.dockerfile}, which is not in the repository at ${commit.slice(0, 12)}.`, files };
    }
    if (!devcontainer.image && !devcontainer.build) {
      devcontainer.warnings.push('Neither "image" nor "build" is given: the set-up runs on the sandbox image.');
    }
    return { commit, devcontainer, invalid: null, files };
  } catch (e) {
    if (e instanceof DevcontainerError) return { commit, devcontainer: null, invalid: `${found}: ${e.message}`, files };
    throw e;
  }
}

/**
 * The commit `ref` of `source` names now (one `git ls-remote`, nothing fetched); null when the
 * repository cannot be read or has no such ref (the full read then says why).
 */
export async function remoteCommit(home: string, source: string, ref: string | undefined, access?: RepositoryAccess): Promise<string | null> {
  if (ref && /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(ref)) return ref;
  let resolved;
  try {
    resolved = await resolveSource(source, access);
  } catch {
    return null;
  }
  const listed = await runFetchGit({ home }, ['ls-remote', '--', resolved.url], resolved, { timeoutMs: 60_000, allowFailure: true });
  if (listed.code !== 0) return null;
  const refs = new Map<string, string>();
  for (const line of listed.stdout.toString('utf8').split('\n')) {
    const m = /^([0-9a-f]{40,64})\t(\S+)$/.exec(line);
    if (m?.[1] && m[2]) refs.set(m[2], m[1]);
  }
  if (!ref) return refs.get('HEAD') ?? null;
  for (const name of [`refs/heads/${ref}`, `refs/tags/${ref}^{}`, `refs/tags/${ref}`, ref]) {
    const commit = refs.get(name);
    if (commit) return commit;
  }
  return null;
}

/**
 * The regular files directly in one directory of `commit`, within the request's limits: a file over
 * maxFileBytes or not valid UTF-8 is left out with a reason rather than read, and so is every file
 * beyond maxFiles (in name order). A directory that does not exist has no files.
 */
export async function readTreeDirectory(
  repo: GitRepo,
  commit: string,
  req: Pick<RepositoryDirectoryRequestParsed, 'directory' | 'suffix' | 'maxFiles' | 'maxFileBytes'>,
): Promise<Omit<RepositoryDirectory, 'commit'>> {
  const listed = await runGit(repo, ['ls-tree', '-z', '--long', `${commit}:${req.directory}`], { allowFailure: true });
  if (listed.code !== 0) return { files: [], skipped: [] };
  const entries: { name: string; blob: string; size: number }[] = [];
  for (const entry of listed.stdout.toString('utf8').split('\0').filter(Boolean)) {
    const m = /^(\d+) (\w+) ([0-9a-f]+)\s+(\d+|-)\t(.*)$/s.exec(entry);
    // Regular files only (100644, 100755): no links, no submodules, no directories.
    if (!m || m[2] !== 'blob' || !(m[1]!.startsWith('1006') || m[1]!.startsWith('1007'))) continue;
    if (!m[5]!.endsWith(req.suffix)) continue;
    entries.push({ name: m[5]!, blob: m[3]!, size: Number(m[4]) });
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const files: RepositoryDirectory['files'] = [];
  const skipped: RepositoryDirectory['skipped'] = [];
  const decoder = new TextDecoder('utf-8', { fatal: true });
  for (const [i, e] of entries.entries()) {
    if (i >= req.maxFiles) {
      skipped.push({ name: e.name, reason: `beyond the first ${req.maxFiles} files` });
      continue;
    }
    if (e.size > req.maxFileBytes) {
      skipped.push({ name: e.name, reason: `${e.size} bytes, over the ${req.maxFileBytes}-byte limit` });
      continue;
    }
    const blob = (await runGit(repo, ['cat-file', 'blob', e.blob], { raw: true })).stdout;
    try {
      files.push({ name: e.name, text: decoder.decode(blob) });
    } catch {
      skipped.push({ name: e.name, reason: 'not UTF-8 text' });
    }
  }
  return { files, skipped };
}
