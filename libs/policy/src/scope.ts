import path from 'node:path';

/** The part of a file system `resolveInScope` needs; `fs.promises` satisfies it. */
export interface ScopeFs {
  realpath(p: string): Promise<string>;
  lstat(p: string): Promise<{ isSymbolicLink(): boolean }>;
}

export type ScopeResult = { ok: true; path: string; relative: string; exists: boolean } | { ok: false; rule: 'scope.outside' | 'scope.invalid'; reason: string };

function code(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error ? String((error as { code: unknown }).code) : undefined;
}

function inside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

function invalid(requested: unknown): ScopeResult | null {
  if (typeof requested !== 'string' || requested.length === 0) return { ok: false, rule: 'scope.invalid', reason: 'The path is missing or empty.' };
  if (requested.includes('\0')) return { ok: false, rule: 'scope.invalid', reason: 'The path contains a NUL character, which no file name can.' };
  return null;
}

/**
 * P6: resolves a path a file tool asked for against the project root. Symbolic links are followed
 * before the check; a file that does not exist yet is judged on the real location of its closest
 * existing parent. Anything that ends up outside the root is refused with the reason.
 */
export async function resolveInScope(root: string, requestedPath: string, fs: ScopeFs): Promise<ScopeResult> {
  const bad = invalid(requestedPath);
  if (bad) return bad;
  let realRoot: string;
  try {
    realRoot = await fs.realpath(root);
  } catch (error) {
    return { ok: false, rule: 'scope.invalid', reason: `The project root \`${root}\` cannot be resolved (${code(error) ?? 'error'}).` };
  }
  const target = path.resolve(realRoot, requestedPath);
  const missing: string[] = [];
  let existing = target;
  for (;;) {
    try {
      const real = await fs.realpath(existing);
      const resolved = missing.length > 0 ? path.join(real, ...missing.reverse()) : real;
      if (!inside(realRoot, resolved)) {
        const via = real !== existing ? ` (it resolves to \`${resolved}\` through a symbolic link)` : '';
        return { ok: false, rule: 'scope.outside', reason: `\`${requestedPath}\` is outside the project${via}; file tools only work inside the project root.` };
      }
      return { ok: true, path: resolved, relative: path.relative(realRoot, resolved) || '.', exists: missing.length === 0 };
    } catch (error) {
      const c = code(error);
      if (c !== 'ENOENT') {
        return { ok: false, rule: 'scope.invalid', reason: `\`${requestedPath}\` cannot be resolved (${c ?? 'error'}${c === 'ELOOP' ? ': a loop of symbolic links' : ''}).` };
      }
      // A link whose target is missing would create a file wherever it points: refuse it.
      const link = await fs.lstat(existing).then(
        (s) => s.isSymbolicLink(),
        () => false,
      );
      if (link) {
        return { ok: false, rule: 'scope.outside', reason: `\`${requestedPath}\` goes through a symbolic link whose target does not exist; its destination cannot be checked.` };
      }
      const parent = path.dirname(existing);
      if (parent === existing) return { ok: false, rule: 'scope.invalid', reason: `\`${requestedPath}\` cannot be resolved.` };
      missing.push(path.basename(existing));
      existing = parent;
    }
  }
}

/**
 * The check `decide` can make without a file system: a relative path that stays inside the root
 * once `..` is folded, or an absolute path under `root` when one is known. Symbolic links are
 * resolved by `resolveInScope` when the tool runs.
 */
export function lexicalScope(requested: unknown, root?: string): { ok: true; relative: string } | { ok: false; rule: string; reason: string } {
  const bad = invalid(requested);
  if (bad && !bad.ok) return bad;
  const p = (requested as string).replace(/\\/g, '/');
  if (path.posix.isAbsolute(p)) {
    if (root && inside(path.posix.resolve(root), path.posix.resolve(p))) {
      return { ok: true, relative: path.posix.relative(path.posix.resolve(root), path.posix.resolve(p)) || '.' };
    }
    return { ok: false, rule: 'scope.outside', reason: `\`${p}\` is outside the project; file tools only work inside the project root (scope.outside).` };
  }
  const normal = path.posix.normalize(p);
  if (normal === '..' || normal.startsWith('../')) {
    return { ok: false, rule: 'scope.outside', reason: `\`${p}\` leads outside the project; file tools only work inside the project root (scope.outside).` };
  }
  return { ok: true, relative: normal.replace(/^(\.\/)+/, '') || '.' };
}
