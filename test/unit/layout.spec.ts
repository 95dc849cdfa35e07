import { lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * `src/` holds what ships; tests and their helpers live under each project's `test/` (unit, medium,
 * e2e, support) or the root `test/`. This walks every project's `src/` and fails on a test file, a
 * test helper, or shipped code that reaches into a test folder or a test-only package.
 */
const ROOT = path.resolve(__dirname, '..', '..');
const PROJECTS = ['apps', 'libs']
  .flatMap((group) => readdirSync(path.join(ROOT, group)).map((name) => `${group}/${name}`))
  .filter((p) => statSync(path.join(ROOT, p, 'src'), { throwIfNoEntry: false })?.isDirectory());

function* walk(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (lstatSync(full).isDirectory()) yield* walk(full);
    else yield full;
  }
}

const TEST_FILE = /\.(spec|test|medium|e2e|faults)\.[cm]?[jt]sx?$/;
const HELPER_NAME = /(^|\/)(__tests__|__mocks__|testing|test|tests|fixtures)(\/|\.[jt]sx?$)|(^|\/)(fakes?|mocks?|doubles?|harness)\.[jt]sx?$|-load\.[jt]s$/;
const TEST_IMPORT = /\bfrom\s+['"]([^'"]*\/test\/[^'"]*|\.\.\/(\.\.\/)*test(\/[^'"]*)?|@nestjs\/testing|supertest|fast-check|@jest\/[^'"]+|@playwright\/test)['"]/;

const sources = PROJECTS.flatMap((p) => [...walk(path.join(ROOT, p, 'src'))].map((f) => path.relative(ROOT, f)));

it(`the ${PROJECTS.length} projects' src/ folders (${sources.length} files) hold no test and no test helper`, () => {
  expect(PROJECTS.length).toBeGreaterThanOrEqual(7);
  expect(sources.filter((f) => TEST_FILE.test(f) || HELPER_NAME.test(f.slice(f.indexOf('/src/') + 5)))).toEqual([]);
});

it('no shipped file imports from a test folder or a test-only package', () => {
  const offenders = sources.filter((f) => /\.[cm]?[jt]sx?$/.test(f)).filter((f) => TEST_IMPORT.test(readFileSync(path.join(ROOT, f), 'utf8')));
  expect(offenders).toEqual([]);
});

it('every project that has tests keeps them under its test/ folder by tier', () => {
  for (const p of PROJECTS) {
    const dir = path.join(ROOT, p, 'test');
    if (!statSync(dir, { throwIfNoEntry: false })) continue;
    const stray = [...walk(dir)].map((f) => path.relative(dir, f)).filter((f) => TEST_FILE.test(f) && !/^(unit|medium|e2e)\//.test(f) && !/^attacks\//.test(f));
    expect({ project: p, stray }).toEqual({ project: p, stray: [] });
  }
});
