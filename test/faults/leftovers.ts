import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What a sandbox leaves on the machine when its clean-up did not run: containers carrying this
 * exec-host's label, loop devices backed by a disk image under its state directory, mounts under
 * it, and working directories under `sandboxes/`. Every fault test asserts all four are empty.
 */
export interface Leftovers {
  containers: string[];
  loopDevices: string[];
  mounts: string[];
  directories: string[];
}

export const NOTHING_LEFT: Leftovers = { containers: [], loopDevices: [], mounts: [], directories: [] };

export interface ExecHostPlace {
  /** The exec-host's state directory. */
  execHostStateDir: string;
  /** Its `lemniscate.exec-host` label. */
  execHostInstance: string;
}

/** Containers of this exec-host, running or not (`docker ps -a` by its instance label). */
export function containersOfExecHost(place: ExecHostPlace): string[] {
  const r = spawnSync('docker', ['ps', '-aq', '--filter', 'label=lemniscate.managed=1', '--filter', `label=lemniscate.exec-host=${place.execHostInstance}`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`docker ps failed: ${r.stderr}`);
  return r.stdout.split('\n').filter(Boolean);
}

/** `losetup -a` lines whose backing file lies under the state directory (a removed file shows as "(deleted)", still under it). */
export function loopDevicesUnder(dir: string): string[] {
  const r = spawnSync('losetup', ['-a'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`losetup -a failed: ${r.stderr}`);
  return r.stdout.split('\n').filter((line) => line.includes(dir));
}

/** Mount points under `dir` in the host's mount table (spaces are escaped as \040 there). */
export function mountsUnder(dir: string): string[] {
  const escaped = dir.replace(/ /g, '\\040');
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((point) => point === escaped || point.startsWith(`${escaped}/`));
}

/** Working directories of sandboxes under the state directory. */
export function sandboxDirectories(place: ExecHostPlace): string[] {
  try {
    return readdirSync(join(place.execHostStateDir, 'sandboxes'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
}

export function leftovers(place: ExecHostPlace): Leftovers {
  return {
    containers: containersOfExecHost(place),
    loopDevices: loopDevicesUnder(place.execHostStateDir),
    mounts: mountsUnder(place.execHostStateDir),
    directories: sandboxDirectories(place),
  };
}

const empty = (l: Leftovers) => !l.containers.length && !l.loopDevices.length && !l.mounts.length && !l.directories.length;

/**
 * The leftovers once they stop changing to nothing, or as they are after `timeoutMs`: a clean-up
 * (the gateway's destroy, the exec-host's reaper) runs a moment after the session's end is announced.
 * The caller asserts the result equals NOTHING_LEFT.
 */
export async function leftoversAfter(place: ExecHostPlace, timeoutMs = 15_000): Promise<Leftovers> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = leftovers(place);
    if (empty(now) || Date.now() > deadline) return now;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Waits until something of a sandbox is on the machine (a container and its mounted working copy). */
export async function untilSandboxPresent(place: ExecHostPlace, timeoutMs = 60_000): Promise<Leftovers> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = leftovers(place);
    if (now.containers.length && now.mounts.length && now.loopDevices.length && now.directories.length) return now;
    if (Date.now() > deadline) throw new Error(`No sandbox appeared within ${timeoutMs / 1000} s: ${JSON.stringify(now)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
