import { promises as fs } from 'node:fs';

/**
 * git's index file read in this process: its entries exactly as `git ls-files -s -z` prints them
 * (`<mode> <blob> <stage>\t<path>`, in the index's order), without starting a process.
 *
 * Only the forms the exec-host's own repositories have are read: versions 2 and 3 (3 when an entry
 * carries the skip-worktree bit, as excluded files do), SHA-1 object ids, one file (no split index)
 * and no sparse directory entries. Anything else — version 4's compressed paths, a split or sparse
 * index, a truncated or foreign file — answers null, and the caller asks git.
 */
export async function readIndexEntries(indexPath: string): Promise<string[] | null> {
  let data: Buffer;
  try {
    data = await fs.readFile(indexPath);
  } catch {
    return null;
  }
  return parseIndex(data);
}

const SHA1_BYTES = 20;
/** ctime, mtime (8 bytes each), dev, ino, mode, uid, gid, size (4 each), the object id, the flags. */
const FIXED_BYTES = 40 + SHA1_BYTES + 2;
const EXTENDED_FLAG = 0x4000;
const NAME_MASK = 0xfff;
const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;

export function parseIndex(data: Buffer): string[] | null {
  if (data.length < 12 + SHA1_BYTES || data.toString('latin1', 0, 4) !== 'DIRC') return null;
  const version = data.readUInt32BE(4);
  if (version !== 2 && version !== 3) return null;
  const count = data.readUInt32BE(8);
  const end = data.length - SHA1_BYTES;
  const entries: string[] = [];
  let at = 12;
  for (let i = 0; i < count; i++) {
    if (at + FIXED_BYTES > end) return null;
    const mode = data.readUInt32BE(at + 24);
    // A sparse index's directory entry stands for a whole tree git would list file by file.
    if ((mode & S_IFMT) === S_IFDIR) return null;
    const oid = data.toString('hex', at + 40, at + 40 + SHA1_BYTES);
    const flags = data.readUInt16BE(at + 60);
    const extended = (flags & EXTENDED_FLAG) !== 0;
    if (extended && version < 3) return null;
    const nameAt = at + FIXED_BYTES + (extended ? 2 : 0);
    let nameLength = flags & NAME_MASK;
    if (nameLength === NAME_MASK) {
      // A name of 4095 bytes or more: its length is where its NUL is.
      const nul = data.indexOf(0, nameAt);
      if (nul < 0 || nul > end) return null;
      nameLength = nul - nameAt;
    }
    if (nameAt + nameLength >= end || data[nameAt + nameLength] !== 0) return null;
    const stage = (flags >> 12) & 0x3;
    const name = data.toString('utf8', nameAt, nameAt + nameLength);
    entries.push(`${mode.toString(8).padStart(6, '0')} ${oid} ${stage}\t${name}`);
    // Each entry is padded with one to eight NULs to a multiple of eight bytes.
    at += (nameAt - at + nameLength + 8) & ~7;
  }
  // Extensions follow the entries: a split index ("link") keeps entries in another file.
  while (at + 8 <= end) {
    const signature = data.toString('latin1', at, at + 4);
    if (signature === 'link' || signature === 'sdir') return null;
    at += 8 + data.readUInt32BE(at + 4);
  }
  return at === end ? entries : null;
}
