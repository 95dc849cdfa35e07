import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync, chmodSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import picomatch from 'picomatch';
import { CliError } from '../errors';

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function git(args: string[], options: { cwd: string; input?: string; env?: Record<string, string> }): Promise<GitResult> {
  return new Promise((resolvePromise, reject) => {
    // The developer's own git, under their identity (A5); LC_ALL=C keeps messages parseable.
    const child = spawn('git', args, { cwd: options.cwd, env: { ...process.env, LC_ALL: 'C', ...options.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    child.on('error', (error) => reject(new CliError(`Cannot run git (${(error as NodeJS.ErrnoException).code ?? error.message}); is it installed?`, 'git')));
    child.on('close', (code) => resolvePromise({ code: code ?? 1, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

export interface Checkout {
  root: string;
  head: string | null;
  branch: string | null;
  remotes: string[];
}

/** The git checkout containing `cwd`, or null when there is none. */
export async function inspectCheckout(cwd: string): Promise<Checkout | null> {
  const top = await git(['rev-parse', '--show-toplevel'], { cwd });
  if (top.code !== 0) return null;
  const root = top.stdout.trim();
  const [head, branch, remotes] = await Promise.all([
    git(['rev-parse', '--verify', '-q', 'HEAD'], { cwd: root }),
    git(['symbolic-ref', '--short', '-q', 'HEAD'], { cwd: root }),
    git(['config', '--get-regexp', '^remote\\..*\\.url$'], { cwd: root }),
  ]);
  return {
    root,
    head: head.code === 0 ? head.stdout.trim() : null,
    branch: branch.code === 0 ? branch.stdout.trim() : null,
    remotes: remotes.stdout
      .split('\n')
      .map((l) => l.split(' ').slice(1).join(' ').trim())
      .filter((u) => u !== ''),
  };
}

function normaliseSource(source: string, base: string): string {
  let s = source.trim();
  if (s.startsWith('file://')) s = s.slice('file://'.length);
  if (isAbsolute(s) || s.startsWith('.')) {
    const abs = resolve(base, s);
    try {
      return realpathSync(abs)
        .replace(/\/\.git$/, '')
        .replace(/\.git$/, '');
    } catch {
      return abs.replace(/\/\.git$/, '').replace(/\.git$/, '');
    }
  }
  // git@host:org/repo.git and https://host/org/repo(.git) name the same repository.
  const scp = /^[^@/]+@([^:/]+):(.+)$/.exec(s);
  if (scp) s = `${scp[1]}/${scp[2]}`;
  s = s.replace(/^[a-z+]+:\/\//i, '').replace(/^[^@/]+@/, '');
  return s
    .replace(/\.git\/?$/, '')
    .replace(/\/+$/, '')
    .toLowerCase();
}

/**
 * Whether this checkout is a copy of the project's repository: one of its remotes (or its own path)
 * is the project's repository source, or it already holds the session's base commit.
 */
export async function isCheckoutOf(checkout: Checkout, repositorySource: string, baseCommit?: string | null): Promise<boolean> {
  const wanted = normaliseSource(repositorySource, checkout.root);
  const candidates = [checkout.root, ...checkout.remotes].map((c) => normaliseSource(c, checkout.root));
  if (candidates.includes(wanted)) return true;
  if (baseCommit) {
    const has = await git(['cat-file', '-e', `${baseCommit}^{commit}`], { cwd: checkout.root });
    return has.code === 0;
  }
  return false;
}

/** Never uploaded with the developer's uncommitted work, whatever .gitignore says (S5). */
const SECRET_GLOBS = ['**/.env', '**/.env.*', '**/*.pem', '**/*.key', '**/secrets/**', '**/id_rsa*', '**/id_ed25519*', '**/*.p12', '**/*.pfx', '**/.npmrc', '**/.netrc'];

interface UncommittedPatch {
  patch: string;
  files: string[];
  /** Paths left out because they look like secrets. */
  excluded: string[];
}

/**
 * `git diff HEAD --binary` including untracked files, computed in a throw-away index so the
 * developer's staging area is untouched.
 */
export async function uncommittedPatch(root: string): Promise<UncommittedPatch> {
  const head = await git(['rev-parse', '--verify', '-q', 'HEAD'], { cwd: root });
  if (head.code !== 0) throw new CliError(`The repository at ${root} has no commit yet; commit once before using --include-uncommitted.`, 'git');
  const indexPath = (await git(['rev-parse', '--git-path', 'index'], { cwd: root })).stdout.trim();
  const dir = mkdtempSync(join(tmpdir(), 'lemni-index-'));
  const tmpIndex = join(dir, 'index');
  try {
    const realIndex = resolve(root, indexPath);
    if (existsSync(realIndex)) copyFileSync(realIndex, tmpIndex);
    const env = { GIT_INDEX_FILE: tmpIndex };
    const add = await git(['add', '-A', '--', '.'], { cwd: root, env });
    if (add.code !== 0) throw new CliError(`git add failed while collecting uncommitted changes: ${add.stderr.trim().split('\n')[0]}`, 'git');
    const names = await git(['diff', '--cached', '--name-only', '-z', 'HEAD'], { cwd: root, env });
    const all = names.stdout.split('\0').filter((n) => n !== '');
    const isSecret = picomatch(SECRET_GLOBS, { dot: true });
    const excluded = all.filter((f) => isSecret(f));
    const files = all.filter((f) => !isSecret(f));
    if (files.length === 0) return { patch: '', files, excluded };
    const exclude = excluded.map((f) => `:(exclude,literal)${f}`);
    const diff = await git(['diff', '--cached', '--binary', '--full-index', 'HEAD', '--', '.', ...exclude], { cwd: root, env });
    if (diff.code !== 0) throw new CliError(`git diff failed while collecting uncommitted changes: ${diff.stderr.trim().split('\n')[0]}`, 'git');
    return { patch: diff.stdout, files, excluded };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

type ApplyOutcome = { applied: true; files: string[] } | { applied: false; files: string[]; conflicts: string[]; message: string };

interface Saved {
  path: string;
  content: Buffer | null;
  mode: number;
}

/**
 * `git apply --3way` of an approved patch. A conflict, or any other failure, puts every touched file
 * and the index back exactly as they were, so the repository is never left half-patched.
 */
export async function applyPatch(root: string, patch: string): Promise<ApplyOutcome> {
  if (patch.trim() === '') return { applied: true, files: [] };
  const numstat = await git(['apply', '--numstat', '-z'], { cwd: root, input: patch });
  if (numstat.code !== 0) {
    return { applied: false, files: [], conflicts: [], message: `The patch is not a valid git patch: ${numstat.stderr.trim().split('\n')[0] ?? ''}` };
  }
  const files = parseNumstatZ(numstat.stdout);
  const indexPath = resolve(root, (await git(['rev-parse', '--git-path', 'index'], { cwd: root })).stdout.trim());
  const indexCopy = existsSync(indexPath) ? readFileSync(indexPath) : null;
  const saved: Saved[] = files.map((f) => {
    const abs = join(root, f);
    try {
      const st = lstatSync(abs);
      return { path: abs, content: st.isFile() ? readFileSync(abs) : null, mode: st.mode };
    } catch {
      return { path: abs, content: null, mode: 0 };
    }
  });
  const result = await git(['apply', '--3way', '--whitespace=nowarn'], { cwd: root, input: patch });
  if (result.code === 0) return { applied: true, files };
  for (const s of saved) {
    if (s.content === null) {
      try {
        unlinkSync(s.path);
      } catch {
        /* was absent before and still is */
      }
    } else {
      writeFileSync(s.path, s.content);
      chmodSync(s.path, s.mode & 0o7777);
    }
  }
  if (indexCopy) writeFileSync(indexPath, indexCopy);
  const conflicts = [...result.stderr.matchAll(/^U (.+)$/gm), ...result.stderr.matchAll(/^error: patch failed: (.+?):\d+$/gm), ...result.stderr.matchAll(/^error: (.+?): does not match index$/gm)]
    .map((m) => m[1] ?? '')
    .filter((p, i, a) => p !== '' && a.indexOf(p) === i);
  const where = conflicts.length > 0 ? ` in ${conflicts.join(', ')}` : '';
  return {
    applied: false,
    files,
    conflicts,
    message: `The approved patch conflicts with your working tree${where}; the repository is unchanged.`,
  };
}

/** `git apply --numstat -z`: "added\tdeleted\tpath\0" or, for a rename, "added\tdeleted\t\0old\0new\0". */
export function parseNumstatZ(out: string): string[] {
  const parts = out.split('\0');
  const files: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? '';
    if (part === '') continue;
    const fields = part.split('\t');
    if (fields.length >= 3 && fields[2] !== '') files.push(fields.slice(2).join('\t'));
    else if (fields.length >= 3) {
      const from = parts[i + 1];
      const to = parts[i + 2];
      if (from) files.push(from);
      if (to) files.push(to);
      i += 2;
    }
  }
  return files.filter((f, i, a) => a.indexOf(f) === i);
}
