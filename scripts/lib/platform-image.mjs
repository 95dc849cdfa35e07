// The platform image (gateway, exec-host, CLI, built console), built offline from this checkout's
// build output, tagged with a hash of its inputs and rebuilt only when they change.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { mustRun, has, run, SetupError } from './sh.mjs';
import { aptInstall } from './engine.mjs';
import { imageExists } from './image.mjs';

export const PLATFORM_REPO = 'lemniscate/platform';
const WORKSPACES = ['libs/contracts', 'libs/policy', 'libs/session', 'libs/telemetry', 'apps/gateway', 'apps/exec-host', 'apps/cli', 'apps/console'];
/** What each workspace ships: its package.json and these, when present. */
const SHIPPED = ['dist', 'bin', 'migrations'];
const IMAGE_FILES = ['images/platform/packages.txt', 'images/platform/build-offline.sh', 'images/platform/entrypoint-postgres.sh'];
/** The exec-host reads the sandbox's seccomp profile, its schema and the AppArmor profile from the repository. */
const SANDBOX_FILES = ['images/sandbox/seccomp.json', 'images/sandbox/seccomp.schema.json', 'images/sandbox/apparmor'];

function walk(dir, out = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, out);
    // What runs, not what type-checks: declarations are not shipped (and tsc orders their unions
    // differently from one build to the next, which would change the tag of the same code).
    else if (entry.isFile() && !/\.tsbuildinfo$|\.d\.ts(\.map)?$/.test(entry.name)) out.push(full);
  }
  return out;
}

/** Every file the image is made of, relative to the repository (the build output included). */
function inputs(root) {
  const files = ['package.json', 'package-lock.json', ...IMAGE_FILES];
  for (const ws of WORKSPACES) {
    files.push(`${ws}/package.json`);
    for (const part of SHIPPED) {
      const dir = path.join(root, ws, part);
      if (fs.existsSync(dir)) files.push(...walk(dir).map((f) => path.relative(root, f)));
    }
  }
  for (const f of SANDBOX_FILES) {
    const full = path.join(root, f);
    if (fs.statSync(full).isDirectory()) files.push(...walk(full).map((x) => path.relative(root, x)));
    else files.push(f);
  }
  return files;
}

export function platformTag(root) {
  if (!fs.existsSync(path.join(root, 'apps/gateway/dist/main.js')) || !fs.existsSync(path.join(root, 'apps/console/dist/index.html'))) {
    throw new SetupError('The platform image is made of the build output: run `npm run build` and build the console first (`npm run setup` does both).');
  }
  const h = crypto.createHash('sha256');
  h.update(`node ${process.version}\0`);
  for (const f of inputs(root)) {
    h.update(f + '\0');
    h.update(fs.readFileSync(path.join(root, f)));
  }
  return `${PLATFORM_REPO}:${h.digest('hex').slice(0, 16)}`;
}

/** Copies what ships into a staging directory and installs the production dependencies there. */
function stage(root, dir, log) {
  for (const f of inputs(root)) {
    if (f.startsWith('images/platform/')) continue;
    const to = path.join(dir, f);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(path.join(root, f), to);
  }
  for (const f of ['apps/gateway/bin', 'apps/exec-host/bin', 'apps/cli/bin']) {
    for (const file of fs.existsSync(path.join(dir, f)) ? fs.readdirSync(path.join(dir, f)) : []) fs.chmodSync(path.join(dir, f, file), 0o755);
  }
  log('installing the production dependencies of the platform image (npm ci --omit=dev)');
  mustRun('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], "Installing the platform image's dependencies failed", { cwd: dir });
}

/** Builds the platform image offline when its inputs changed; tags it `:current` as well. */
export function ensurePlatformImage(root, { log }) {
  const tag = platformTag(root);
  if (imageExists(tag)) {
    mustRun('docker', ['tag', tag, `${PLATFORM_REPO}:current`], 'Could not tag the platform image', { quiet: true });
    return { tag, note: `${tag} already built (inputs unchanged)` };
  }
  if (!has('debootstrap')) aptInstall(['debootstrap'], 'The offline platform image build');
  const started = Date.now();
  const staging = fs.mkdtempSync(path.join(os.tmpdir(), 'lemniscate-platform-staging-'));
  try {
    stage(root, staging, log);
    log(`building ${tag} offline with debootstrap`);
    mustRun('bash', [path.join(root, 'images/platform/build-offline.sh'), tag, staging], 'The offline platform image build failed');
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
  mustRun('docker', ['tag', tag, `${PLATFORM_REPO}:current`], 'Could not tag the platform image', { quiet: true });
  if (!imageExists(tag)) throw new SetupError(`The platform image ${tag} is missing after its build.`);
  // Earlier builds (other inputs) are 700 MB each: only this one is kept.
  const older = run('docker', ['images', PLATFORM_REPO, '--format', '{{.Repository}}:{{.Tag}}'])
    .stdout.split('\n')
    .filter((t) => t && t !== tag && t !== `${PLATFORM_REPO}:current`);
  if (older.length) run('docker', ['rmi', ...older]);
  return { tag, note: `${tag} built in ${Math.round((Date.now() - started) / 1000)} s` };
}
