import * as fs from 'node:fs';
import * as path from 'node:path';
import { ExecHostError } from '../errors';
import { SANDBOX_GID, SANDBOX_UID } from '../driver/sandbox.driver';
import { displayPath, isInside, toWorkspaceRelative } from './path-scope';

const { O_RDONLY, O_NOFOLLOW, O_DIRECTORY, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;

/**
 * File access inside a working copy that the sandbox can rearrange at will. Every open uses
 * O_NOFOLLOW on the last component and is then verified through /proc/self/fd: whatever a swapped-in
 * symlink made the kernel open, the real path of the descriptor must lie inside the working copy.
 * Creation, rename and removal go through the verified parent directory's descriptor
 * (/proc/self/fd/N/name), the openat() of Node, so the checked directory is the one written to.
 */
export class WorkspaceFs {
  readonly root: string;

  constructor(root: string) {
    this.root = fs.realpathSync(root);
  }

  relative(requested: string): string {
    const scoped = toWorkspaceRelative(requested);
    if (!scoped.ok) throw new ExecHostError('outside_working_copy', scoped.reason);
    return scoped.rel;
  }

  /** Real path of an open descriptor, checked against the working copy. */
  private verifyFd(fd: number, rel: string): void {
    let real: string;
    try {
      real = fs.readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      fs.closeSync(fd);
      throw new ExecHostError('outside_working_copy', `${displayPath(rel)} could not be verified as inside the working copy.`);
    }
    if (!isInside(this.root, real)) {
      fs.closeSync(fd);
      throw new ExecHostError('outside_working_copy', `${displayPath(rel)} resolves outside the working copy (through a symbolic link), so it is refused.`);
    }
  }

  /**
   * Resolves the path one component at a time, following symbolic links by their text, before
   * anything is opened: a link that points outside is refused whether or not its target exists, so
   * the answers never reveal which host paths exist. The descriptor check after the open is what
   * holds against a swap; this gives the precise reason and closes the oracle.
   */
  private precheck(rel: string): void {
    const outside = () => new ExecHostError('outside_working_copy', `${displayPath(rel)} resolves outside the working copy (through a symbolic link), so it is refused.`);
    const queue = rel === '.' ? [] : rel.split('/');
    let cur = this.root;
    let hops = 0;
    while (queue.length > 0) {
      const part = queue.shift()!;
      if (part === '' || part === '.') continue;
      if (part === '..') {
        cur = path.dirname(cur);
        if (!isInside(this.root, cur)) throw outside();
        continue;
      }
      const next = path.join(cur, part);
      let st: fs.Stats;
      try {
        st = fs.lstatSync(next);
      } catch {
        return; // the rest does not exist: a new path is judged on its path, inside `cur`
      }
      if (st.isSymbolicLink()) {
        if (++hops > 40) throw new ExecHostError('outside_working_copy', `${displayPath(rel)} goes through too many symbolic links.`);
        const target = path.resolve(cur, fs.readlinkSync(next));
        if (!isInside(this.root, target)) throw outside();
        queue.unshift(...path.relative(this.root, target).split('/').filter(Boolean));
        cur = this.root;
        continue;
      }
      cur = next;
    }
  }

  /** Opens an existing file or directory for reading. Symlinks as the last component are refused. */
  openRead(rel: string, directory = false): number {
    this.precheck(rel);
    let fd: number;
    try {
      fd = fs.openSync(path.join(this.root, rel), O_RDONLY | O_NOFOLLOW | (directory ? O_DIRECTORY : 0));
    } catch (e) {
      throw this.openError(e as NodeJS.ErrnoException, rel, directory);
    }
    this.verifyFd(fd, rel);
    return fd;
  }

  private openError(e: NodeJS.ErrnoException, rel: string, directory: boolean): ExecHostError {
    switch (e.code) {
      case 'ENOENT':
        return new ExecHostError('file_not_found', `${displayPath(rel)} does not exist.`);
      case 'ELOOP':
        return new ExecHostError('outside_working_copy', `${displayPath(rel)} is a symbolic link; file operations do not follow links.`);
      case 'ENOTDIR':
        return new ExecHostError('not_a_file', directory ? `${displayPath(rel)} is not a directory.` : `A parent of ${displayPath(rel)} is not a directory.`);
      case 'EISDIR':
        return new ExecHostError('not_a_file', `${displayPath(rel)} is a directory.`);
      default:
        return new ExecHostError('internal', `${displayPath(rel)} could not be opened (${e.code ?? 'error'}).`);
    }
  }

  /** Reads a regular file whole, up to maxBytes (more is file_too_large). */
  readFile(rel: string, maxBytes: number): { content: Buffer; size: number; mode: number } {
    const fd = this.openRead(rel);
    try {
      const st = fs.fstatSync(fd);
      if (st.isDirectory()) throw new ExecHostError('not_a_file', `${displayPath(rel)} is a directory; list it instead.`);
      if (!st.isFile()) throw new ExecHostError('not_a_file', `${displayPath(rel)} is not a regular file.`);
      if (st.size > maxBytes) throw new ExecHostError('file_too_large', `${displayPath(rel)} is ${st.size} bytes, over the ${maxBytes}-byte limit of this operation.`);
      return { content: readAll(fd, st.size, maxBytes), size: st.size, mode: st.mode };
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Like readFile, but a missing file is null. */
  readFileIfExists(rel: string, maxBytes: number): { content: Buffer; size: number; mode: number } | null {
    try {
      return this.readFile(rel, maxBytes);
    } catch (e) {
      if (e instanceof ExecHostError && e.code === 'file_not_found') return null;
      throw e;
    }
  }

  /**
   * Opens the parent directory of `rel`, creating missing directories (owned by the sandbox user)
   * one component at a time through verified descriptors.
   */
  openParent(rel: string, create: boolean): { dirFd: number; name: string } {
    const parts = rel.split('/');
    const name = parts.pop();
    if (!name || name === '.' || name === '..') throw new ExecHostError('not_a_file', `${displayPath(rel)} does not name a file.`);
    let dirFd = this.openRead('.', true);
    let walked = '.';
    for (const part of parts) {
      const next = walked === '.' ? part : `${walked}/${part}`;
      const at = `/proc/self/fd/${dirFd}/${part}`;
      let fd: number;
      try {
        fd = fs.openSync(at, O_RDONLY | O_NOFOLLOW | O_DIRECTORY);
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        if (err.code === 'ENOENT' && create) {
          try {
            fs.mkdirSync(at, 0o755);
          } catch (me) {
            if ((me as NodeJS.ErrnoException).code !== 'EEXIST') {
              fs.closeSync(dirFd);
              throw me;
            }
          }
          fs.lchownSync(at, SANDBOX_UID, SANDBOX_GID);
          try {
            fd = fs.openSync(at, O_RDONLY | O_NOFOLLOW | O_DIRECTORY);
          } catch (e2) {
            fs.closeSync(dirFd);
            throw this.openError(e2 as NodeJS.ErrnoException, next, true);
          }
        } else {
          let isLink = false;
          try {
            isLink = fs.lstatSync(at).isSymbolicLink();
          } catch {
            // gone again: report the original error
          }
          fs.closeSync(dirFd);
          if (isLink) throw new ExecHostError('outside_working_copy', `${displayPath(next)} is a symbolic link; writes never go through links, so ${displayPath(rel)} is refused.`);
          throw this.openError(err, next, true);
        }
      }
      fs.closeSync(dirFd);
      this.verifyFd(fd, next);
      dirFd = fd;
      walked = next;
    }
    return { dirFd, name };
  }

  /** Writes a whole file atomically (temporary file and rename in the verified directory), owned by the sandbox user. */
  writeFile(rel: string, content: Buffer, mode: number): void {
    const { dirFd, name } = this.openParent(rel, true);
    try {
      const target = `/proc/self/fd/${dirFd}/${name}`;
      try {
        const st = fs.lstatSync(target);
        if (st.isDirectory()) throw new ExecHostError('not_a_file', `${displayPath(rel)} is a directory.`);
      } catch (e) {
        if (e instanceof ExecHostError) throw e;
      }
      const tmpName = `.lemniscate-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`;
      const tmp = `/proc/self/fd/${dirFd}/${tmpName}`;
      const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode & 0o777);
      try {
        fs.writeFileSync(fd, content);
        fs.fchownSync(fd, SANDBOX_UID, SANDBOX_GID);
        fs.fchmodSync(fd, mode & 0o777);
      } catch (e) {
        fs.closeSync(fd);
        fs.rmSync(tmp, { force: true });
        throw e;
      }
      fs.closeSync(fd);
      fs.renameSync(tmp, target);
    } finally {
      fs.closeSync(dirFd);
    }
  }

  /** Removes a file or symbolic link (never what a link points to). Missing is success. */
  removeFile(rel: string): void {
    let opened: { dirFd: number; name: string };
    try {
      opened = this.openParent(rel, false);
    } catch (e) {
      if (e instanceof ExecHostError && e.code === 'file_not_found') return;
      throw e;
    }
    try {
      const target = `/proc/self/fd/${opened.dirFd}/${opened.name}`;
      let st: fs.Stats;
      try {
        st = fs.lstatSync(target);
      } catch {
        return;
      }
      if (st.isDirectory()) fs.rmSync(target, { recursive: true, force: true });
      else fs.unlinkSync(target);
    } finally {
      fs.closeSync(opened.dirFd);
    }
  }

  /** Sets owner and mode on a path rewritten by git (never following a link). */
  fixOwnership(rel: string): void {
    const { dirFd, name } = this.openParent(rel, false);
    try {
      const target = `/proc/self/fd/${dirFd}/${name}`;
      fs.lchownSync(target, SANDBOX_UID, SANDBOX_GID);
    } finally {
      fs.closeSync(dirFd);
    }
  }
}

/** Reads `fd` to its end; more than `maxBytes` is file_too_large. */
export function readAll(fd: number, size: number, maxBytes: number): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  const buf = Buffer.allocUnsafe(Math.min(Math.max(size, 64 * 1024), 1024 * 1024));
  for (;;) {
    const n = fs.readSync(fd, buf, 0, buf.length, null);
    if (n === 0) break;
    chunks.push(Buffer.from(buf.subarray(0, n)));
    total += n;
    if (total > maxBytes) throw new ExecHostError('file_too_large', `The file grew over the ${maxBytes}-byte limit while being read.`);
  }
  return Buffer.concat(chunks, total);
}

/** Heuristic of git and ripgrep: a NUL byte in the first 8000 bytes means binary. */
export function isBinary(content: Buffer): boolean {
  return content.subarray(0, 8000).includes(0);
}
