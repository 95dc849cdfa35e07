import picomatch from 'picomatch';
import path from 'node:path';
import type { Decision, ThirdPartyFile } from './decision';
import { LruCache } from './lru';
import type { Policy } from './schema';

type Matcher = (p: string) => boolean;

const OPTIONS = { dot: true, nocase: true } as const;
const compiled = new WeakMap<object, { name: string; matches: Matcher }[]>();

/** Human names for the default classes, used in reasons. */
const CLASS_LABELS: Record<string, string> = {
  ci: 'a CI or build file',
  vcs: 'a version-control file',
  manifests: 'a dependency manifest or lock file',
  binary: 'binary content',
  oversize: 'a change larger than the review limit',
  symlink_outside: 'a symbolic link pointing outside the working copy',
};

/** What a change is, as the policy reads it; `symlink` is set when the path is now a symbolic link. */
export interface ChangeFacts {
  path: string;
  binary: boolean;
  diffBytes: number;
  symlink?: { target: string; outside: boolean } | undefined;
}

function classLabel(name: string): string {
  return CLASS_LABELS[name] ?? `a third-party file of class \`${name}\``;
}

function classMatchers(policy: Policy): { name: string; matches: Matcher }[] {
  const key = policy.thirdPartyFiles;
  let matchers = compiled.get(key);
  if (!matchers) {
    matchers = Object.entries(policy.thirdPartyFiles.classes).map(([name, globs]) => {
      // A pattern without a slash names a file anywhere in the tree (`Makefile`, `*.csproj`).
      const anywhere = globs.filter((g) => !g.includes('/'));
      const rooted = globs.filter((g) => g.includes('/'));
      const byName = anywhere.length > 0 ? picomatch(anywhere, { ...OPTIONS, basename: true }) : () => false;
      const byPath = rooted.length > 0 ? picomatch(rooted, OPTIONS) : () => false;
      return { name, matches: (p: string) => byName(p) || byPath(p) };
    });
    compiled.set(key, matchers);
  }
  return matchers;
}

/** A project-relative path in the form globs are written for: `src/a.ts`, never `./src/../a.ts`. */
function normaliseRelative(p: string): string {
  const n = path.posix.normalize(p.replace(/\\/g, '/'));
  return n.replace(/^(\.\/)+/, '').replace(/^\/+/, '');
}

const classified = new WeakMap<object, LruCache<string, string | null>>();

/** The third-party class of a path, or null when the path is an ordinary project file. */
export function classifyPath(filePath: string, policy: Policy): string | null {
  // Matching a path against every glob costs tens of microseconds; the same paths recur.
  let cache = classified.get(policy.thirdPartyFiles);
  if (!cache) {
    cache = new LruCache(2048);
    classified.set(policy.thirdPartyFiles, cache);
  }
  const hit = cache.get(filePath);
  if (hit !== undefined) return hit;
  const rel = normaliseRelative(filePath);
  let found: string | null = null;
  for (const { name, matches } of classMatchers(policy)) {
    if (matches(rel)) {
      found = name;
      break;
    }
  }
  cache.set(filePath, found);
  return found;
}

/** The class of a change: its path first, then binary content, then its size. */
function classifyChange(file: ChangeFacts, policy: Policy): string | null {
  if (file.symlink?.outside) return 'symlink_outside';
  const byPath = classifyPath(file.path, policy);
  if (byPath) return byPath;
  if (file.binary && policy.thirdPartyFiles.binary) return 'binary';
  if (file.diffBytes > policy.thirdPartyFiles.maxDiffBytes) return 'oversize';
  return null;
}

function thirdPartyRule(cls: string): string {
  if (cls === 'oversize') return 'thirdPartyFiles.maxDiffBytes';
  if (cls === 'symlink_outside') return 'thirdPartyFiles.symlinksOutside';
  return `thirdPartyFiles.${cls}`;
}

/** The decision for one change to a third-party file, under the policy's mode. */
export function thirdPartyDecision(files: ThirdPartyFile[], policy: Policy): Decision {
  const first = files[0] as ThirdPartyFile;
  const rule = thirdPartyRule(first.class);
  const list = files.map((f) => `\`${f.path}\` (${classLabel(f.class)})`).join(', ');
  if (policy.thirdPartyFiles.mode === 'forbid') {
    return {
      effect: 'deny',
      rule,
      reason: `${list} ${files.length === 1 ? 'is a file' : 'are files'} that third parties execute or trust, and the project policy forbids changing ${files.length === 1 ? 'it' : 'them'} (${rule}).`,
      thirdParty: files,
    };
  }
  return {
    effect: 'ask',
    rule,
    reason: `${list} ${files.length === 1 ? 'is a file' : 'are files'} that third parties execute or trust: the change needs a dedicated approval (${rule}).`,
    thirdParty: files,
  };
}

/**
 * Judges what a command left behind in the working copy. Every change goes to a person (P2);
 * third-party files are refused or flagged according to the policy (P5).
 */
export function classifyChanges(files: ChangeFacts[], policy: Policy): Decision {
  if (files.length === 0) return { effect: 'allow', rule: 'changes.none', reason: 'The command changed no file.' };
  // G01: a link out of the working copy is its own class, refused unless the policy says otherwise.
  const links = files.filter((f) => f.symlink?.outside);
  if (links.length > 0) {
    const rule = 'thirdPartyFiles.symlinksOutside';
    const thirdParty = links.map((f) => ({ path: normaliseRelative(f.path), class: 'symlink_outside' }));
    const list = links.map((f) => `${normaliseRelative(f.path)} → ${f.symlink!.target}`).join(', ');
    const one = links.length === 1;
    if (policy.thirdPartyFiles.symlinksOutside === 'forbid') {
      return {
        effect: 'deny',
        rule,
        reason: `The change creates ${one ? 'a symlink' : 'symlinks'} ${list}, which ${one ? 'points' : 'point'} outside the working copy; such links are refused (${rule}).`,
        thirdParty,
      };
    }
    return {
      effect: 'ask',
      rule,
      reason: `The change creates ${one ? 'a symlink' : 'symlinks'} ${list}, which ${one ? 'points' : 'point'} outside the working copy: it needs a dedicated approval (${rule}).`,
      thirdParty: [
        ...thirdParty,
        ...files
          .filter((f) => !f.symlink?.outside)
          .flatMap((f) => {
            const cls = classifyChange(f, policy);
            return cls ? [{ path: normaliseRelative(f.path), class: cls }] : [];
          }),
      ],
    };
  }
  const thirdParty: ThirdPartyFile[] = [];
  for (const file of files) {
    const cls = classifyChange(file, policy);
    if (cls) thirdParty.push({ path: normaliseRelative(file.path), class: cls });
  }
  if (thirdParty.length > 0) return thirdPartyDecision(thirdParty, policy);
  return {
    effect: 'ask',
    rule: 'changes.review',
    reason: `The command changed ${files.length === 1 ? 'one file' : `${files.length} files`}; every change is reviewed by a person before it is kept (changes.review).`,
  };
}

const exclusionMatchers = new WeakMap<object, Matcher[]>();

/** Index of the first context exclusion a path falls under (`.env`, `**\/*.pem` …), or null. */
export function exclusionIndex(filePath: string, policy: Policy): number | null {
  const key = policy.contextExclusions;
  let matchers = exclusionMatchers.get(key);
  if (!matchers) {
    matchers = policy.contextExclusions.map((g) => {
      const m = picomatch(g, { ...OPTIONS, basename: !g.includes('/') });
      // Excluding a directory excludes what is inside it.
      const inside = picomatch(`${g.replace(/\/+$/, '')}/**`, { ...OPTIONS, basename: false });
      return (p: string) => m(p) || inside(p);
    });
    exclusionMatchers.set(key, matchers);
  }
  const rel = normaliseRelative(filePath);
  const i = matchers.findIndex((m) => m(rel));
  return i >= 0 ? i : null;
}
