// The wheels of the tests' Python mirror: built once from Debian's packages by build_wheels.py, checked
// in a throw-away virtual environment, and kept in a cache directory keyed by the Debian packages'
// versions and the builder's own source (a new Debian version or a changed builder builds them anew).
import { spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEBIAN_PYTHON, WHEEL_SOURCES, MIRROR_PYTHON_PACKAGES, debianVersions, ensureMirrorPython } from '../../../scripts/lib/python.mjs';

const BUILDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'build_wheels.py');

function mustSpawn(cmd, args, what, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, ...opts });
  if (r.status !== 0) {
    const out = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n');
    throw new Error(`${what} failed (\`${cmd} ${args.join(' ')}\` exited with ${r.status ?? r.error?.message}):\n${out}`);
  }
  return r.stdout;
}

/** Installs every wheel of `dir` with pip (no index) into a fresh virtual environment and runs pytest from it. */
function checkWheels(dir, names) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lemniscate-wheels-check-'));
  try {
    const venv = path.join(tmp, 'venv');
    // pip reads no configuration file and no PIP_* variable of this machine: only the wheels of `dir`.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PIP_')));
    Object.assign(env, { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' });
    mustSpawn(DEBIAN_PYTHON, ['-m', 'venv', venv], 'Creating a virtual environment to check the wheels');
    mustSpawn(path.join(venv, 'bin/pip'), ['install', '--no-index', '--no-cache-dir', '--find-links', dir, ...names], 'Installing the built wheels', { env });
    mustSpawn(path.join(venv, 'bin/pip'), ['check'], 'Checking the installed wheels’ requirements', { env });
    const version = mustSpawn(path.join(venv, 'bin/pytest'), ['--version'], 'Running pytest from the built wheels', { cwd: tmp, env });
    mustSpawn(path.join(venv, 'bin/python'), ['-c', 'import dateutil.parser, dateutil.tz, six'], 'Importing python-dateutil from the built wheels', { cwd: tmp, env });
    return version.trim();
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * The directory of checked wheels and their manifest ([{ name, version, filename, sha256, requires_python }]),
 * built on first use under `<cacheDir>/pypi-wheels/<key>/`.
 */
export function ensureWheels({ cacheDir, log = () => {} }) {
  ensureMirrorPython({ log });
  const versions = debianVersions(MIRROR_PYTHON_PACKAGES);
  const key = crypto.createHash('sha256').update(JSON.stringify(versions)).update(fs.readFileSync(BUILDER)).digest('hex').slice(0, 16);
  const root = path.join(cacheDir, 'pypi-wheels');
  const dir = path.join(root, key);
  const manifestFile = path.join(dir, 'manifest.json');
  if (fs.existsSync(manifestFile)) return { dir, wheels: JSON.parse(fs.readFileSync(manifestFile, 'utf8')), built: false };

  log(`building wheels from ${Object.keys(WHEEL_SOURCES).join(', ')}`);
  fs.mkdirSync(root, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(root, `.${key}-`));
  fs.chmodSync(tmp, 0o755);
  try {
    const names = Object.values(WHEEL_SOURCES);
    const wheels = JSON.parse(mustSpawn(DEBIAN_PYTHON, [BUILDER, tmp, ...names], 'Building wheels from the Debian packages'));
    checkWheels(tmp, names);
    fs.writeFileSync(path.join(tmp, 'manifest.json'), JSON.stringify(wheels, null, 2) + '\n');
    try {
      fs.renameSync(tmp, dir);
    } catch (err) {
      // Another process built the same key meanwhile: keep its copy.
      if (!fs.existsSync(manifestFile)) throw err;
    }
    // Wheels of older Debian versions are never served again.
    for (const other of fs.readdirSync(root)) if (other !== key && !other.startsWith('.')) fs.rmSync(path.join(root, other), { recursive: true, force: true });
    return { dir, wheels: JSON.parse(fs.readFileSync(manifestFile, 'utf8')), built: true };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
