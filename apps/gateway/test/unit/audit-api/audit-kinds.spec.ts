import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { AUDIT_KINDS } from '@lemniscate/contracts';

/**
 * The audit kind catalogue in libs/contracts is the list the console and the CLI filter by; a kind the
 * code writes but the catalogue lacks could never be filtered for. This scans the sources that write
 * audit entries for kind literals (with the catalogue's own prefixes) and fails on any it misses.
 */
const ROOT = join(__dirname, '..', '..', '..', '..', '..');
const SOURCES = ['apps/gateway/src', 'libs/session/src'];

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      yield* files(path);
    } else if (name.endsWith('.ts') && !/\.(spec|medium|e2e)\.ts$/.test(name)) yield path;
  }
}

const prefixes = [...new Set(AUDIT_KINDS.map((k) => k.split('.')[0]))].join('|');
// A policy rule's name may share a prefix with a kind (`mcp.servers`): a literal given as a rule is not a kind.
const literal = new RegExp(`(?<!rule(?::| ===) ?)'((?:${prefixes})\\.[a-z_]+)'`, 'g');

it('every audit kind written in the code is in the catalogue', () => {
  const written = new Set<string>();
  for (const source of SOURCES) for (const file of files(join(ROOT, source))) for (const m of readFileSync(file, 'utf8').matchAll(literal)) written.add(m[1] as string);
  expect(written.size).toBeGreaterThan(30);
  expect([...written].filter((k) => !(AUDIT_KINDS as readonly string[]).includes(k)).sort()).toEqual([]);
});

it('the catalogue holds no kind the code never writes', () => {
  const text = SOURCES.flatMap((s) => [...files(join(ROOT, s))].map((f) => readFileSync(f, 'utf8'))).join('\n');
  expect(AUDIT_KINDS.filter((k) => !text.includes(`'${k}'`))).toEqual([]);
});
