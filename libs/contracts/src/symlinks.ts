/**
 * Where a symbolic link in the working copy points (G01, S2). The exec-host answers this for every
 * link a command leaves behind (FileChange.symlink), reading links from the working copy; the policy
 * then classifies a link that points outside as its own class of change (`symlink_outside`).
 *
 * Pure: `readLink(rel)` answers the target of the link at working-copy-relative path `rel`, or null
 * when `rel` is not a link (a directory, a file, or nothing at all). Only paths already known to lie
 * inside the working copy, with no link among their parents, are ever asked about.
 */
export interface SymlinkResolution {
  /** True when the link, followed through every link on its way, names a place outside the working copy. */
  outside: boolean;
  /** Where it ends, relative to the working copy ('' is its root); null when outside or looping. */
  resolved: string | null;
  /** Why it is outside, in words, naming the step that escapes; null when inside. */
  escape: string | null;
  /** True when following it loops (more than MAX_LINK_HOPS links); such a link names nothing. */
  loop: boolean;
}

/** As the Linux kernel's limit on links followed while resolving one path. */
export const MAX_LINK_HOPS = 40;

export function resolveWorkspaceLink(linkPath: string, target: string, readLink: (rel: string) => string | null): SymlinkResolution {
  const current: string[] = [];
  let hops = 0;
  let escape: string | null = null;
  let loop = false;

  const walk = (parts: string[], via: string): boolean => {
    for (const part of parts) {
      if (part === '' || part === '.') continue;
      if (part === '..') {
        if (current.length === 0) {
          escape = `${via} climbs above the working copy with ".."`;
          return false;
        }
        current.pop();
        continue;
      }
      const candidate = [...current, part].join('/');
      const next = readLink(candidate);
      if (next === null) {
        current.push(part);
        continue;
      }
      if (++hops > MAX_LINK_HOPS) {
        loop = true;
        return false;
      }
      if (next.startsWith('/')) {
        escape = `${candidate} → ${next} is an absolute path`;
        return false;
      }
      if (!walk(next.split('/'), `${candidate} → ${next}`)) return false;
    }
    return true;
  };

  if (target.startsWith('/')) {
    // Absolute targets name the machine's file system: in the sandbox and on the developer's
    // machine after `git apply` alike, even one that happens to start with /workspace.
    return { outside: true, resolved: null, escape: `${linkPath} → ${target} is an absolute path`, loop: false };
  }
  const parent = linkPath.split('/').slice(0, -1);
  if (!walk(parent, linkPath) || !walk(target.split('/'), `${linkPath} → ${target}`)) {
    return loop ? { outside: false, resolved: null, escape: null, loop: true } : { outside: true, resolved: null, escape, loop: false };
  }
  return { outside: false, resolved: current.join('/'), escape: null, loop: false };
}
