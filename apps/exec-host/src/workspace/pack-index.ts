import { promises as fs } from 'node:fs';
import * as path from 'node:path';

const SHA1_HEX = /^[0-9a-f]{40}$/;
/** `\377tOc`, then version 2: the pack index git has written since 1.5.2. */
const IDX_V2_MAGIC = 0xff744f63;
const FANOUT_AT = 8;
const NAMES_AT = FANOUT_AT + 256 * 4;
const SHA1_BYTES = 20;

/**
 * Whether the object `oid` may be in the git object directory `objectsDir`, read in this process:
 * false only when it is certainly absent (no loose object file, and not in the index of any pack),
 * true when it is there or when something was not read here (a SHA-256 id, a version 1 index, an
 * unreadable file). A caller uses a false to skip asking git, never a true to skip fetching: git is
 * asked then.
 */
export async function mayHaveObject(objectsDir: string, oid: string): Promise<boolean> {
  if (!SHA1_HEX.test(oid)) return true;
  const loose = await fs.stat(path.join(objectsDir, oid.slice(0, 2), oid.slice(2))).then(
    () => true,
    (e: NodeJS.ErrnoException) => e.code !== 'ENOENT',
  );
  if (loose) return true;
  let names: string[];
  try {
    names = await fs.readdir(path.join(objectsDir, 'pack'));
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== 'ENOENT';
  }
  const wanted = Buffer.from(oid, 'hex');
  for (const name of names) {
    if (!name.endsWith('.idx')) continue;
    if (await inPackIndex(path.join(objectsDir, 'pack', name), wanted)) return true;
  }
  return false;
}

/**
 * `oid` (20 bytes) among the sorted names of one version 2 pack index, by its fan-out table and a
 * binary search of positioned reads (an index can be large; it is never read whole). True when the
 * file is not one read here.
 */
export async function inPackIndex(file: string, oid: Buffer): Promise<boolean> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, 'r');
  } catch (e) {
    // A pack removed since the listing has nothing to give.
    return (e as NodeJS.ErrnoException).code !== 'ENOENT';
  }
  try {
    const header = Buffer.alloc(NAMES_AT);
    const { bytesRead } = await handle.read(header, 0, NAMES_AT, 0);
    if (bytesRead < NAMES_AT || header.readUInt32BE(0) !== IDX_V2_MAGIC || header.readUInt32BE(4) !== 2) return true;
    const first = oid[0] as number;
    let lo = first === 0 ? 0 : header.readUInt32BE(FANOUT_AT + (first - 1) * 4);
    let hi = header.readUInt32BE(FANOUT_AT + first * 4);
    const size = (await handle.stat()).size;
    const total = header.readUInt32BE(FANOUT_AT + 255 * 4);
    if (hi < lo || NAMES_AT + total * SHA1_BYTES > size) return true;
    const name = Buffer.alloc(SHA1_BYTES);
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      await handle.read(name, 0, SHA1_BYTES, NAMES_AT + mid * SHA1_BYTES);
      const order = Buffer.compare(name, oid);
      if (order === 0) return true;
      if (order < 0) lo = mid + 1;
      else hi = mid;
    }
    return false;
  } catch {
    return true;
  } finally {
    await handle.close();
  }
}
