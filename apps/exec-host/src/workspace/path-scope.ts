import * as path from 'node:path';
import { WORKSPACE_DIR } from '../driver/sandbox.driver';

type ScopedPath = { ok: true; rel: string } | { ok: false; reason: string };

/**
 * Turns a path given by a tool (relative to the working copy, or absolute under /workspace as
 * commands see it) into a normalised relative path, without touching the disk. Symlinks are judged
 * later, on the real file system (safe-fs.ts); this step refuses what is outside on its face.
 */
export function toWorkspaceRelative(requested: string): ScopedPath {
  if (requested.includes('\0')) return { ok: false, reason: 'The path contains a NUL character.' };
  const p = requested.replace(/\\/g, '/');
  let rel: string;
  if (path.posix.isAbsolute(p)) {
    const normalised = path.posix.normalize(p);
    if (normalised === WORKSPACE_DIR || normalised === `${WORKSPACE_DIR}/`) return { ok: true, rel: '.' };
    if (!normalised.startsWith(`${WORKSPACE_DIR}/`)) {
      return { ok: false, reason: `${requested} is outside the working copy: only paths under ${WORKSPACE_DIR} are reachable.` };
    }
    rel = normalised.slice(WORKSPACE_DIR.length + 1);
  } else {
    rel = path.posix.normalize(p);
  }
  rel = rel.replace(/\/+$/, '');
  if (rel === '' || rel === '.') return { ok: true, rel: '.' };
  if (rel === '..' || rel.startsWith('../')) {
    return { ok: false, reason: `${requested} is outside the working copy: it climbs above ${WORKSPACE_DIR} with "..".` };
  }
  return { ok: true, rel };
}

/** True when `candidate` (an absolute, resolved path) is `root` or inside it. */
export function isInside(root: string, candidate: string): boolean {
  if (candidate === root) return true;
  const prefix = root.endsWith('/') ? root : `${root}/`;
  return candidate.startsWith(prefix);
}

/** The path as the sandbox shows it, for messages. */
export function displayPath(rel: string): string {
  return rel === '.' ? WORKSPACE_DIR : `${WORKSPACE_DIR}/${rel}`;
}
