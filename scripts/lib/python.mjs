// Python for the tests' package mirrors: PyPI cannot be reached here, so the Python mirror serves
// wheels built from the pure-Python packages Debian installs (pytest and its dependencies,
// python-dateutil and six), and checks them in a virtual environment (python3-venv).
import { run, has, SetupError } from './sh.mjs';
import { aptInstall } from './engine.mjs';

/** Debian's Python: the interpreter that sees the packages apt installs (a pyenv `python3` on PATH does not). */
export const DEBIAN_PYTHON = '/usr/bin/python3';

/** Debian package → the Python distribution it installs, for each wheel the mirror serves. */
export const WHEEL_SOURCES = {
  'python3-pytest': 'pytest',
  'python3-attr': 'attrs',
  'python3-iniconfig': 'iniconfig',
  'python3-packaging': 'packaging',
  'python3-pluggy': 'pluggy',
  'python3-dateutil': 'python-dateutil',
  'python3-six': 'six',
};

export const MIRROR_PYTHON_PACKAGES = [...Object.keys(WHEEL_SOURCES), 'python3-venv'];

/** The installed version of each Debian package (null when it is not installed). */
export function debianVersions(packages) {
  const r = run('dpkg-query', ['-W', '-f=${Package}\t${Version}\t${db:Status-Status}\n', ...packages]);
  const found = new Map(
    r.stdout
      .split('\n')
      .map((l) => l.split('\t'))
      .filter((f) => f.length === 3 && f[2] === 'installed')
      .map(([name, version]) => [name, version]),
  );
  return Object.fromEntries(packages.map((p) => [p, found.get(p) ?? null]));
}

/** Installs from Debian what the Python mirror needs and is missing; says what it did. */
export function ensureMirrorPython({ log = () => {} } = {}) {
  if (!has('dpkg-query')) {
    throw new SetupError(`The tests' Python mirror builds its wheels from Debian's packages (${MIRROR_PYTHON_PACKAGES.join(', ')}); this machine has no dpkg.`);
  }
  const versions = debianVersions(MIRROR_PYTHON_PACKAGES);
  const missing = MIRROR_PYTHON_PACKAGES.filter((p) => versions[p] === null);
  if (missing.length === 0) return 'present';
  log(`installing ${missing.join(', ')} from Debian`);
  aptInstall(missing, "The tests' Python package mirror");
  return `installed ${missing.join(', ')}`;
}
