import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Entries whose change time or modification time is this close to the stamp's time (or later) make
 * it unusable for reuse: a change made within the file system's timestamp granularity of a stamp
 * could leave every timestamp as it was. Two seconds covers the coarsest granularity of file systems
 * a working copy may live on (one second on ext3 or ext4 with small inodes, two on FAT), whose
 * timestamps carry no fraction of a second.
 */
export const RACY_MARGIN_MS = 2_000;

/**
 * The margin for an entry whose change or modification time carries a fraction of a second: its file
 * system keeps sub-second timestamps (ext4 with large inodes, as the sandbox disks are made; xfs,
 * btrfs, tmpfs), set from the kernel's coarse clock, whose tick is at most 10 ms. A coarse file
 * system never gives a fraction, and an entry of a fine one that happens to fall on a whole second
 * gets the coarse margin: more git status reads, never fewer.
 */
export const FINE_RACY_MARGIN_MS = 100;

/** Beyond this many entries, a stamp is not taken: git's own status of a large tree is the cheaper read. */
export const MAX_STAMPED_ENTRIES = 2_000;

export interface TreeStamp {
  /** A digest of the stat data (device, inode, type and mode, owner, links, size, mtime, ctime, in ns) of every entry, by path. */
  digest: string;
  /** True when some entry changed within its margin of the stamp (see above): an equal later stamp would prove nothing. */
  racy: boolean;
}

/**
 * The stat data of every entry under `root` (directories, files, links: nothing is followed) and of
 * `files` (git's index), taken in one synchronous walk. Two equal stamps, the first not racy, mean
 * that nothing was created, removed, renamed, written, truncated, re-linked or had its mode or owner
 * changed in between: any of these sets the change time of the entry (or, for a name, of its
 * directory) to the current time, which no process can set back. It is how git tells an unchanged
 * file from its index, taken to the whole listing (git's untracked cache does the same with
 * directories). Null when the tree has more than `maxEntries` entries or cannot be read entirely.
 */
export function stampTree(root: string, files: readonly string[], now = Date.now(), maxEntries = MAX_STAMPED_ENTRIES): TreeStamp | null {
  const hash = createHash('sha256');
  const racyFromNs = BigInt(now - RACY_MARGIN_MS) * 1_000_000n;
  const fineRacyFromNs = BigInt(now - FINE_RACY_MARGIN_MS) * 1_000_000n;
  let entries = 0;
  let racy = false;
  const add = (full: string, name: string): fs.BigIntStats | null => {
    const st = fs.lstatSync(full, { bigint: true, throwIfNoEntry: false });
    if (!st) {
      hash.update(`${name}\0absent\n`);
      return null;
    }
    const whole = st.ctimeNs % 1_000_000_000n === 0n || st.mtimeNs % 1_000_000_000n === 0n;
    const from = whole ? racyFromNs : fineRacyFromNs;
    if (st.ctimeNs >= from || st.mtimeNs >= from) racy = true;
    hash.update(`${name}\0${st.dev}:${st.ino}:${st.mode}:${st.uid}:${st.gid}:${st.nlink}:${st.size}:${st.mtimeNs}:${st.ctimeNs}\n`);
    return st;
  };
  const walk = (full: string, rel: string): boolean => {
    if (++entries > maxEntries) return false;
    const st = add(full, rel);
    if (!st?.isDirectory()) return true;
    for (const name of fs.readdirSync(full).sort()) {
      if (!walk(path.join(full, name), rel ? `${rel}/${name}` : name)) return false;
    }
    return true;
  };
  try {
    if (!walk(root, '')) return null;
    for (const file of files) add(file, `\0${file}`);
  } catch {
    return null;
  }
  return { digest: hash.digest('hex'), racy };
}
