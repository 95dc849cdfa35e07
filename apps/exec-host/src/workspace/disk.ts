import { execFile } from 'node:child_process';
import * as fs from 'node:fs/promises';
import { promisify } from 'node:util';
import { SANDBOX_GID, SANDBOX_UID } from '../driver/sandbox.driver';

const run = promisify(execFile);

/**
 * The disk cap of a working copy: a sparse ext4 image of `diskMb` (no journal) on a loop device, mounted
 * nosuid,nodev at the working directory. Filling it fails with ENOSPC inside the sandbox and nowhere
 * else; hard links to host files are impossible (another file system). Needs root.
 */
export async function createDisk(imagePath: string, mountPoint: string, diskMb: number): Promise<void> {
  await fs.mkdir(mountPoint, { recursive: true, mode: 0o700 });
  const handle = await fs.open(imagePath, 'wx', 0o600);
  try {
    await handle.truncate(diskMb * 1024 * 1024);
  } finally {
    await handle.close();
  }
  // No journal: the image lives only as long as its sandbox, and a host that crashes removes both
  // (the reaper at start-up), so a journal protects nothing; without it each mount has no jbd2
  // kernel thread (a process id per sandbox) and no journal writes. 256-byte inodes always: their
  // timestamps carry nanoseconds (a small file system would get 128-byte ones, whole seconds), which
  // lets change detection trust a tree's stamp 100 ms after a change instead of 2 s (tree-stamp.ts).
  await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-I', '256', '-O', '^has_journal', '-E', `root_owner=${SANDBOX_UID}:${SANDBOX_GID},lazy_itable_init=1`, imagePath], { timeout: 60_000 });
  await run('mount', ['-o', 'loop,nosuid,nodev,noatime', imagePath, mountPoint], { timeout: 30_000 });
  // mkfs leaves a root-owned lost+found the sandbox could neither use nor remove.
  await fs.rmdir(`${mountPoint}/lost+found`).catch(() => undefined);
  await fs.chmod(mountPoint, 0o755);
}

async function isMounted(mountPoint: string): Promise<boolean> {
  const mounts = await fs.readFile('/proc/self/mounts', 'utf8');
  return mounts.split('\n').some((line) => line.split(' ')[1] === mountPoint.replace(/ /g, '\\040'));
}

/** Unmounts (the loop device is released with it: mount -o loop sets autoclear). Idempotent. */
export async function destroyDisk(imagePath: string, mountPoint: string): Promise<void> {
  if (await isMounted(mountPoint)) {
    try {
      await run('umount', [mountPoint], { timeout: 30_000 });
    } catch {
      await run('umount', ['-l', mountPoint], { timeout: 30_000 });
    }
  }
  await fs.rm(imagePath, { force: true });
}

export async function diskToolsAvailable(): Promise<{ available: boolean; message?: string }> {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    return { available: false, message: 'The exec-host is not running as root, so it cannot mount the per-sandbox disk images that cap the working copy.' };
  }
  try {
    await run('mkfs.ext4', ['-V'], { timeout: 10_000 });
    return { available: true };
  } catch {
    return { available: false, message: 'mkfs.ext4 is missing (install e2fsprogs); the working copy disk cap needs it.' };
  }
}
