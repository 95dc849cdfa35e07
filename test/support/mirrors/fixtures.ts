import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The fixture projects of the environment tests (see its README for what each holds). */
export const FIXTURES_DIR = path.resolve(__dirname, '../../fixtures/environments');

export type FixtureName = 'node-project' | 'python-project';

export interface FixtureValues {
  /** Fills __NPM_MIRROR__, __PYPI_MIRROR__ and __PYPI_MIRROR_HOST__ (a started Mirrors will do). */
  mirrors?: { npm: string; pypi: string; pypiHost: string };
  /** Fills __SANDBOX_IMAGE__: the sandbox image's tag. */
  sandboxImage?: string;
  /** Make `dest` a git repository with the project committed on `main` (what a Lemniscate project points at). */
  git?: boolean;
}

const PLACEHOLDER = /__(NPM_MIRROR|PYPI_MIRROR_HOST|PYPI_MIRROR|SANDBOX_IMAGE)__/g;
/** What a developer's run of a fixture may leave in its folder: never copied. */
const SKIPPED = new Set(['node_modules', '.venv', '__pycache__', '.pytest_cache']);

function placeholderValue(name: string, values: FixtureValues): string | undefined {
  switch (name) {
    case 'NPM_MIRROR':
      return values.mirrors?.npm;
    case 'PYPI_MIRROR':
      return values.mirrors?.pypi;
    case 'PYPI_MIRROR_HOST':
      return values.mirrors?.pypiHost;
    case 'SANDBOX_IMAGE':
      return values.sandboxImage;
  }
  return undefined;
}

/**
 * Copies a fixture project to `dest` (which must not exist or be empty) with the placeholders of its
 * `.devcontainer/` replaced, and optionally commits it in a fresh git repository. Returns `dest`.
 * Throws when the devcontainer names a placeholder that `values` does not fill.
 */
export function prepareFixture(name: FixtureName, dest: string, values: FixtureValues = {}): string {
  const src = path.join(FIXTURES_DIR, name);
  fs.mkdirSync(dest, { recursive: true });
  if (fs.readdirSync(dest).length > 0) throw new Error(`${dest} is not empty.`);
  fs.cpSync(src, dest, { recursive: true, filter: (p) => !SKIPPED.has(path.basename(p)) });
  const devcontainerDir = path.join(dest, '.devcontainer');
  for (const file of fs.readdirSync(devcontainerDir)) {
    const full = path.join(devcontainerDir, file);
    const text = fs.readFileSync(full, 'utf8');
    const filled = text.replace(PLACEHOLDER, (whole, key: string) => {
      const value = placeholderValue(key, values);
      if (value === undefined) throw new Error(`${name}/.devcontainer/${file} needs a value for ${whole} (see ${path.relative(process.cwd(), path.join(FIXTURES_DIR, 'README.md'))}).`);
      return value;
    });
    if (filled !== text) fs.writeFileSync(full, filled);
  }
  if (values.git) {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: dest, stdio: 'pipe' });
    git('init', '-q', '-b', 'main');
    git('add', '-A');
    git('-c', 'user.name=Lemniscate Tests', '-c', 'user.email=tests@lemniscate.invalid', '-c', 'commit.gpgsign=false', 'commit', '-q', '-m', `${name}: the fixture project`);
  }
  return dest;
}
