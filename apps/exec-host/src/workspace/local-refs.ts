import * as fs from 'node:fs/promises';
import * as path from 'node:path';

const OID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
const MAX_REFS = 100_000;

export interface LocalRefs {
  /** As `git ls-remote` names them: `HEAD`, `refs/heads/main`, `refs/tags/v1`, and `refs/tags/v1^{}` where the peeled commit is known. */
  refs: Map<string, string>;
  headBranch: string | null;
}

/**
 * The refs of a repository on this host read from its files, as `git ls-remote --symref` would list
 * them, without starting git (a session's start is on the clock). Only the plain layout is read: a
 * git directory with loose refs and `packed-refs`. Anything else — a `.git` file (worktree,
 * submodule), another ref storage, hidden refs, a symbolic ref other than HEAD, a name git would not
 * accept — answers null, and the caller asks git.
 */
export async function readLocalRefs(source: string): Promise<LocalRefs | null> {
  try {
    const gitDir = await gitDirOf(source);
    if (!gitDir) return null;
    const config = await fs.readFile(path.join(gitDir, 'config'), 'utf8').catch(() => '');
    if (/refstorage|hiderefs|worktreeconfig/i.test(config)) return null;
    const refs = new Map<string, string>();
    const packed = await fs.readFile(path.join(gitDir, 'packed-refs'), 'utf8').catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? '' : Promise.reject(e)));
    let last: string | null = null;
    for (const line of packed.split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      if (line.startsWith('^')) {
        const peeled = line.slice(1).trim();
        if (!last || !OID.test(peeled)) return null;
        refs.set(`${last}^{}`, peeled);
        continue;
      }
      const m = /^([0-9a-f]{40}(?:[0-9a-f]{24})?) (refs\/\S+)$/.exec(line);
      if (!m?.[1] || !m[2] || !plainName(m[2])) return null;
      refs.set(m[2], m[1]);
      last = m[2];
    }
    if (!(await readLoose(gitDir, 'refs', refs))) return null;
    const head = (await fs.readFile(path.join(gitDir, 'HEAD'), 'utf8')).trim();
    let headBranch: string | null = null;
    if (head.startsWith('ref: ')) {
      const target = head.slice(5).trim();
      if (!target.startsWith('refs/heads/') || !plainName(target)) return null;
      const oid = refs.get(target);
      if (oid) refs.set('HEAD', oid);
      headBranch = target.slice('refs/heads/'.length);
    } else if (OID.test(head)) {
      refs.set('HEAD', head);
    } else {
      return null;
    }
    // ls-remote does not list a peeled value of a loose annotated tag without reading the object; a
    // tag without one is resolved by git later (rev-parse ^{commit}), as a tag named by id is.
    return { refs, headBranch };
  } catch {
    return null;
  }
}

async function gitDirOf(source: string): Promise<string | null> {
  const dotGit = path.join(source, '.git');
  const st = await fs.lstat(dotGit).catch(() => null);
  if (st) return st.isDirectory() ? dotGit : null;
  const bare = await Promise.all(['HEAD', 'objects', 'refs'].map((n) => fs.lstat(path.join(source, n)).catch(() => null)));
  return bare.every(Boolean) ? source : null;
}

/** A ref name git itself would write as a file: no `..`, control characters, spaces or special characters. */
function plainName(name: string): boolean {
  return /^refs\/[A-Za-z0-9._\-/+@]+$/.test(name) && !name.includes('..') && !name.includes('//') && !name.endsWith('/') && !name.endsWith('.lock') && !name.includes('@{');
}

/** Loose refs override packed ones; false when one is not a plain object id (a symbolic ref, a bad name). */
async function readLoose(gitDir: string, rel: string, refs: Map<string, string>): Promise<boolean> {
  const entries = await fs.readdir(path.join(gitDir, rel), { withFileTypes: true });
  for (const e of entries) {
    const name = `${rel}/${e.name}`;
    if (e.isDirectory()) {
      if (!(await readLoose(gitDir, name, refs))) return false;
    } else if (e.isFile()) {
      if (name.endsWith('.lock')) continue;
      if (!plainName(name)) return false;
      const oid = (await fs.readFile(path.join(gitDir, name), 'utf8')).trim();
      if (!OID.test(oid)) return false;
      // A loose ref replaces the packed one, and with it the packed peeled value.
      if (refs.get(name) !== oid) refs.delete(`${name}^{}`);
      refs.set(name, oid);
    } else {
      return false;
    }
    if (refs.size > MAX_REFS) return false;
  }
  return true;
}
