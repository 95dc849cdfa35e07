// The sandbox image, tagged with a hash of its build inputs and rebuilt only when they change.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { run, mustRun, has, SetupError } from './sh.mjs';
import { aptInstall } from './engine.mjs';

export const IMAGE_REPO = 'lemniscate/sandbox';
const INPUTS = ['packages.txt', 'rootfs-setup.sh', 'build-offline.sh', 'debian-mirror.sh', 'seccomp-load.c', 'sandbox-runner.c'];
/** The sandbox image built by the other route, images/sandbox/Dockerfile (the tests build it: S7). */
export const DOCKERFILE_REPO = 'lemniscate/sandbox-dockerfile';
/** The Debian base imported offline that the Dockerfile route starts from here, instead of debian:bookworm-slim. */
export const BASE_REPO = 'lemniscate/debian-base';
const BASE_INPUTS = ['import-base.sh', 'debian-mirror.sh'];

/** The first 16 hex digits of a hash of these files of images/sandbox, names included. */
function hashOf(root, files) {
  const dir = path.join(root, 'images/sandbox');
  const h = crypto.createHash('sha256');
  for (const f of files) {
    h.update(f + '\0');
    h.update(fs.readFileSync(path.join(dir, f)));
  }
  return h.digest('hex').slice(0, 16);
}

export function imageTag(root) {
  return `${IMAGE_REPO}:${hashOf(root, INPUTS)}`;
}

export function imageExists(tag) {
  return run('docker', ['image', 'inspect', tag], { timeout: 15000 }).ok;
}

/** Builds the image offline when its inputs changed; tags it `:current` as well. */
export function ensureImage(root, { log }) {
  const tag = imageTag(root);
  if (imageExists(tag)) {
    mustRun('docker', ['tag', tag, `${IMAGE_REPO}:current`], 'Could not tag the sandbox image', { quiet: true });
    return { tag, note: `${tag} already built (inputs unchanged)` };
  }
  if (!has('debootstrap')) aptInstall(['debootstrap'], 'The offline sandbox image build');
  // The static seccomp loader of the image is compiled on this host (static glibc from libc6-dev).
  const staticLibc = ['/usr/lib/x86_64-linux-gnu/libc.a', '/usr/lib/aarch64-linux-gnu/libc.a'].some((f) => fs.existsSync(f));
  if (!has('gcc') || !staticLibc) aptInstall(['gcc', 'libc6-dev'], 'The sandbox image build (its seccomp loader)');
  log(`building ${tag} offline with debootstrap (about two minutes, once)`);
  const started = Date.now();
  mustRun('bash', [path.join(root, 'images/sandbox/build-offline.sh'), tag], 'The offline sandbox image build failed');
  mustRun('docker', ['tag', tag, `${IMAGE_REPO}:current`], 'Could not tag the sandbox image', { quiet: true });
  if (!imageExists(tag)) throw new SetupError(`The sandbox image ${tag} is missing after its build.`);
  return { tag, note: `${tag} built in ${Math.round((Date.now() - started) / 1000)} s` };
}

/**
 * The files a Dockerfile copies from its build context (COPY and ADD, not COPY --from), in order, so
 * that a file added to the Dockerfile is part of its image's tag without anyone listing it here.
 */
export function dockerfileCopies(text) {
  const files = [];
  for (const line of text.replace(/\\\n/g, ' ').split('\n')) {
    const m = /^\s*(COPY|ADD)\s+(.*)$/i.exec(line);
    if (!m) continue;
    const rest = m[2].trim();
    const words = rest.startsWith('[') ? JSON.parse(rest) : rest.split(/\s+/);
    const args = words.filter((w) => !w.startsWith('--'));
    if (words.some((w) => /^--from=/i.test(w))) continue;
    for (const src of args.slice(0, -1)) {
      if (/[*?[]/.test(src) || src.includes('..') || path.isAbsolute(src)) {
        throw new SetupError(`The Dockerfile copies ${src}: name each file of images/sandbox it copies, so that the image's tag follows them.`);
      }
      files.push(src);
    }
  }
  return files;
}

export function dockerfileImageTag(root) {
  const copies = dockerfileCopies(fs.readFileSync(path.join(root, 'images/sandbox/Dockerfile'), 'utf8'));
  return `${DOCKERFILE_REPO}:${hashOf(root, ['Dockerfile', ...copies, ...BASE_INPUTS])}`;
}

export function baseImageTag(root) {
  return `${BASE_REPO}:bookworm-${hashOf(root, BASE_INPUTS)}`;
}

/** Removes this repository's tags other than `keep` (earlier inputs); images in use stay, as docker rmi leaves them. */
function removeOlder(repo, keep) {
  const older = run('docker', ['images', repo, '--format', '{{.Repository}}:{{.Tag}}'])
    .stdout.split('\n')
    .filter((t) => t && !keep.includes(t));
  if (older.length) run('docker', ['rmi', ...older]);
}

/**
 * Builds the sandbox image by its Dockerfile route when its inputs changed: a Debian base imported
 * offline (import-base.sh; there is no registry to pull debian:bookworm-slim from), then `docker
 * build --build-arg BASE=…` over the default bridge network, whose RUN steps install from the same
 * Debian mirror as build-offline.sh. Only the tests use it: the attack battery runs on both routes.
 */
export function ensureDockerfileImage(root, { log }) {
  const tag = dockerfileImageTag(root);
  if (imageExists(tag)) return { tag, note: `${tag} already built (inputs unchanged)` };
  const dir = path.join(root, 'images/sandbox');
  const started = Date.now();
  const base = baseImageTag(root);
  if (!imageExists(base)) {
    if (!has('debootstrap')) aptInstall(['debootstrap'], 'The base image of the Dockerfile route');
    log(`importing the base image ${base} (debootstrap minbase, about a minute, once)`);
    mustRun('bash', [path.join(dir, 'import-base.sh'), base], 'Importing the Debian base image of the Dockerfile route failed');
  }
  // The mirror the offline route uses, so both routes install the same versions (and an air-gapped
  // host's local mirror is used by this route too).
  const mirror = mustRun('bash', ['-c', '. "$1" && printf %s "$mirror"', 'bash', path.join(dir, 'debian-mirror.sh')], 'Reading the Debian mirror failed', { quiet: true }).stdout;
  // The build stage gets a tag of its own: the legacy builder would otherwise leave it as an untagged
  // image that nothing removes. The second build finds that stage in the build cache.
  const loader = `${tag}-loader`;
  const args = ['--force-rm', '--build-arg', `BASE=${base}`, '--build-arg', `DEBIAN_MIRROR=${mirror}`, '-f', path.join(dir, 'Dockerfile')];
  log(`building ${tag} with docker build from ${base} (a few minutes, once)`);
  const quiet = { quiet: true, maxBuffer: 64 * 1024 * 1024 };
  mustRun('docker', ['build', ...args, '--target', 'loader', '-t', loader, dir], 'The Dockerfile build of the sandbox image failed', quiet);
  mustRun('docker', ['build', ...args, '-t', tag, dir], 'The Dockerfile build of the sandbox image failed', quiet);
  if (!imageExists(tag)) throw new SetupError(`The sandbox image ${tag} is missing after its Dockerfile build.`);
  // Earlier builds (other inputs) are 400 MB each, and their bases are kept alive by them: only these are kept.
  removeOlder(DOCKERFILE_REPO, [tag, loader]);
  removeOlder(BASE_REPO, [base]);
  return { tag, note: `${tag} built from ${base} in ${Math.round((Date.now() - started) / 1000)} s` };
}
