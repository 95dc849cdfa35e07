import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The security model maps each guarantee to the code and tests that uphold it; a renamed file must not
 * leave it pointing at nothing. Every path it names (backticked, with a slash) exists from the
 * repository root, and every bare file name it uses as shorthand names a file the repository has.
 * The other docs and READMEs are held to the same rule for the paths they name.
 */
const ROOT = path.resolve(__dirname, '../..');
const FILE = /\.(ts|tsx|mjs|js|cjs|sql|c|sh|md|json|ya?ml|conf)$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', '.git', '.nx', 'artifacts', 'coverage']);

function walk(dir: string, out: string[] = []): string[] {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (SKIP_DIRS.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    out.push(path.relative(ROOT, full));
    if (entry.isDirectory()) walk(full, out);
  }
  return out;
}

const files = walk(ROOT);
const basenames = new Set(files.map((f) => path.basename(f)));
const markdown = files.filter((f) => f.endsWith('.md'));

/** A backticked token that names a path: `a/b.ts`, `a/b/`, `a/*.medium.ts`. */
function namedPaths(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/`([A-Za-z0-9_.@*-]+(?:\/[A-Za-z0-9_.@*-]*)+)`/g)) {
    const token = m[1]!;
    // Absolute, home-relative (`.lemniscate/agents/`) and working-copy-relative (`./npm`) paths are not the repository's.
    if (token.startsWith('/') || token.startsWith('.') || token.includes('://')) continue;
    if (!FILE.test(token) && !token.endsWith('/') && !token.includes('*')) continue;
    // `sessions/`, `secrets/`: a directory named by itself is a word, not a path.
    if (!token.replace(/\/$/, '').includes('/')) continue;
    out.push(token);
  }
  return out;
}

function exists(token: string, relativeTo: string): boolean {
  const candidates = [token, path.join(relativeTo, token)];
  if (!token.includes('*')) return candidates.some((c) => fs.existsSync(path.join(ROOT, c)));
  // A glob: at least one file or directory matches it.
  const re = new RegExp(
    '^(' +
      candidates
        .map((c) =>
          c
            .split('*')
            .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
            .join('[^/]*'),
        )
        .join('|') +
      ')$',
  );
  return files.some((f) => re.test(f));
}

const docs = markdown.filter((f) => f.startsWith('docs/') || /^(apps|libs)\/[^/]+\/README\.md$/.test(f) || f === 'README.md' || /^[^/]+\/README\.md$/.test(f));

describe('paths named in the docs', () => {
  it('finds the docs to check', () => {
    expect(docs).toEqual(expect.arrayContaining(['docs/security-model.md', 'README.md']));
  });

  it.each(docs)('%s names only paths that exist', (doc) => {
    const text = fs.readFileSync(path.join(ROOT, doc), 'utf8');
    // Build output and test artefacts are made by the build, not kept in the repository.
    const generated = /(^|\/)(dist|artifacts|node_modules)(\/|$)/;
    const missing = namedPaths(text).filter((p) => !generated.test(p) && !exists(p, path.dirname(doc)));
    expect(missing).toEqual([]);
  });

  it('the security model names every file by a path from the repository root or by a file name the repository has', () => {
    const text = fs.readFileSync(path.join(ROOT, 'docs/security-model.md'), 'utf8');
    const missing = namedPaths(text).filter((p) => !p.includes('*') && !fs.existsSync(path.join(ROOT, p)));
    expect(missing).toEqual([]);
    const bare = [...text.matchAll(/`([A-Za-z0-9_.-]+\.(?:ts|tsx|mjs|sql|c|sh))`/g)].map((m) => m[1]!);
    expect(bare.filter((b) => !basenames.has(b))).toEqual([]);
  });

  it('would catch a stale path', () => {
    expect(namedPaths('see `apps/gateway/src/nowhere/gone.ts` and `libs/x/`').filter((p) => !exists(p, '.'))).toEqual(['apps/gateway/src/nowhere/gone.ts', 'libs/x/']);
    expect(exists('apps/exec-host/test/attacks/*.medium.ts', '.')).toBe(true);
    expect(exists('apps/exec-host/test/attacks/*.nothing.ts', '.')).toBe(false);
  });
});
