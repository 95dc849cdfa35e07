import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readAll } from './safe-fs';

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

/** At most this many bytes of racy files are read into one stamp; beyond, the stamp is racy. */
export const MAX_RACY_CONTENT_BYTES = 8 * 1024 * 1024;

export interface TreeStamp {
  /** A digest of the stat data (device, inode, type and mode, owner, links, size, mtime, ctime, in ns) of every entry, by path. */
  digest: string;
  /**
   * The racy files and links (changed within their margin of the stamp, see above), with a digest of
   * their content or target: a later stamp with the same stat data proves them unchanged only if their
   * content still has that digest (`sameTree`).
   */
  racyContent: { full: string; stat: fs.BigIntStats; sha256: string }[];
  /**
   * True when a racy entry's content could not be read (not a file nor a link, swapped while read,
   * over the byte budget): an equal later stamp would prove nothing.
   */
  racy: boolean;
}

/**
 * Whether `now` proves the tree unchanged since `earlier` (a stamp that was not racy): the same stat
 * data everywhere, and the same content in every entry that was racy when `earlier` was taken.
 */
export function sameTree(earlier: TreeStamp, now: TreeStamp): boolean {
  if (earlier.racy || earlier.digest !== now.digest) return false;
  return earlier.racyContent.every(({ full, stat, sha256 }) => {
    const content = racyContent(full, stat);
    return content !== null && digestOf(content) === sha256;
  });
}

const digestOf = (content: Buffer) => createHash('sha256').update(content).digest('hex');

/**
 * The stat data of every entry under `root` (directories, files, links: nothing is followed) and of
 * `files` (git's index), taken in one synchronous walk. Two equal stamps, the first not racy, mean
 * that nothing was created, removed, renamed, written, truncated, re-linked or had its mode or owner
 * changed in between: any of these sets the change time of the entry (or, for a name, of its
 * directory) to the current time, which no process can set back. It is how git tells an unchanged
 * file from its index, taken to the whole listing (git's untracked cache does the same with
 * directories). Null when the tree has more than `maxEntries` entries or cannot be read entirely.
 *
 * An entry changed within its margin of the stamp could change again without its stat data showing
 * it; as git does with its racily clean entries, its content is then kept with the stamp, to be
 * compared again (`sameTree`): a racy file is read (never following a link, never blocking, checked
 * to be the entry listed), a racy link's target is read. A racy directory needs nothing more: its
 * names are listed in the digest. So a stamp taken just after a write can prove a later tree unchanged.
 */
export function stampTree(root: string, files: readonly string[], now = Date.now(), maxEntries = MAX_STAMPED_ENTRIES): TreeStamp | null {
  const hash = createHash('sha256');
  const racyFromNs = BigInt(now - RACY_MARGIN_MS) * 1_000_000n;
  const fineRacyFromNs = BigInt(now - FINE_RACY_MARGIN_MS) * 1_000_000n;
  let entries = 0;
  let racy = false;
  let contentBudget = MAX_RACY_CONTENT_BYTES;
  const racyFiles: TreeStamp['racyContent'] = [];
  const add = (full: string, name: string): fs.BigIntStats | null => {
    const st = fs.lstatSync(full, { bigint: true, throwIfNoEntry: false });
    if (!st) {
      hash.update(`${name}\0absent\n`);
      return null;
    }
    hash.update(`${name}\0${st.dev}:${st.ino}:${st.mode}:${st.uid}:${st.gid}:${st.nlink}:${st.size}:${st.mtimeNs}:${st.ctimeNs}\n`);
    const whole = st.ctimeNs % 1_000_000_000n === 0n || st.mtimeNs % 1_000_000_000n === 0n;
    const from = whole ? racyFromNs : fineRacyFromNs;
    if ((st.ctimeNs >= from || st.mtimeNs >= from) && !st.isDirectory()) {
      const content = st.size <= BigInt(contentBudget) ? racyContent(full, st) : null;
      if (content === null) racy = true;
      else {
        contentBudget -= content.length;
        racyFiles.push({ full, stat: st, sha256: digestOf(content) });
      }
    }
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
  return { digest: hash.digest('hex'), racyContent: racyFiles, racy };
}

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = fs.constants;

/**
 * The bytes of a racy file, or the target of a racy link, as listed by `st`; null for anything else
 * (a fifo, a socket, a device), or when what is opened is not the entry listed (it was swapped).
 */
function racyContent(full: string, st: fs.BigIntStats): Buffer | null {
  try {
    if (st.isSymbolicLink()) return Buffer.from(fs.readlinkSync(full, { encoding: 'buffer' }));
    if (!st.isFile()) return null;
    const fd = fs.openSync(full, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    try {
      const opened = fs.fstatSync(fd, { bigint: true });
      if (!opened.isFile() || opened.dev !== st.dev || opened.ino !== st.ino || opened.size !== st.size) return null;
      // More than was listed throws (and is null below): the file changed while read.
      const content = readAll(fd, Number(st.size), Number(st.size));
      return content.length === Number(st.size) ? content : null;
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return null;
  }
}
