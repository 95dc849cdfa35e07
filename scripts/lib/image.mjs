// The sandbox image, tagged with a hash of its build inputs and rebuilt only when they change.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { run, mustRun, has, SetupError } from './sh.mjs';
import { aptInstall } from './engine.mjs';

export const IMAGE_REPO = 'lemniscate/sandbox';
const INPUTS = ['packages.txt', 'rootfs-setup.sh', 'build-offline.sh', 'seccomp-load.c'];

export function imageTag(root) {
  const dir = path.join(root, 'images/sandbox');
  const h = crypto.createHash('sha256');
  for (const f of INPUTS) {
    h.update(f + '\0');
    h.update(fs.readFileSync(path.join(dir, f)));
  }
  return `${IMAGE_REPO}:${h.digest('hex').slice(0, 16)}`;
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
