import type { Word } from './shell/words';

/** Why one argument changes a decision: the option (or word) as typed, and what it does. */
export interface OptionFinding {
  option: string;
  why: string;
}

/** The name part of `--name=value`, or of `--name:value` as dotnet and MSBuild write it (or the whole word). */
export function optionName(arg: string): string {
  const end = arg.search(/[=:]/);
  return end > 0 ? arg.slice(0, end) : arg;
}

/**
 * The option of `list` that `arg` names: exactly, as `--name=value`, a `--name` standing for the
 * single-dash `-name` (Go's flags), or — with `abbreviations` — a long option cut short, as GNU
 * getopt_long, argparse and nopt accept (`--exe` for `--exec`). Abbreviations only ever widen what
 * makes a command ask, so an ambiguous prefix counts too.
 */
export function namedOption(arg: string, list: readonly string[], abbreviations: boolean): string | null {
  const name = optionName(arg);
  if (list.includes(name)) return name;
  if (name.startsWith('--') && name.length > 3 && list.includes(name.slice(1))) return name.slice(1);
  if (abbreviations && name.startsWith('--') && name.length > 3) {
    const hit = list.find((o) => o.startsWith(name) || (o.length > 2 && !o.startsWith('--') && `-${o}`.startsWith(name)));
    if (hit) return hit;
  }
  return null;
}

/** The letters of a clustered short-option word (`-nri` → n, r, i), up to the first non-letter. */
export function clusterLetters(arg: string): string[] {
  if (!arg.startsWith('-') || arg.startsWith('--')) return [];
  const out: string[] = [];
  for (const c of arg.slice(1)) {
    if (!/[A-Za-z]/.test(c)) break;
    out.push(c);
  }
  return out;
}

/**
 * Whether a word bash only knows at run time could expand to an option: anything but a glob or
 * brace pattern whose first character is a literal other than `-` (every expansion of `src/*.ts`
 * starts with `s`; `*` may match a file named `-delete`).
 */
export function mayBeOption(word: Word): boolean {
  if (word.value !== null) return word.value.startsWith('-') && word.value !== '-';
  return word.pattern === undefined || /^[-*?[{\\]/.test(word.pattern) || word.pattern.length === 0;
}

/** The text of a word as far as it is known: its value, or the literal pattern of a glob. */
export function knownText(word: Word): string | null {
  return word.value ?? word.pattern ?? null;
}

/**
 * Whether a path names something outside the working copy: absolute (unless under one of `roots`),
 * from a home directory, or climbing above its start with `..`.
 */
export function outsideWorkingCopy(path: string, roots: readonly string[] = []): boolean {
  if (path.startsWith('~')) return true;
  let rest = path;
  if (path.startsWith('/')) {
    const root = roots.find((r) => r !== '' && r !== '/' && (path === r || path.startsWith(`${r.replace(/\/+$/, '')}/`)));
    if (!root) return true;
    rest = path.slice(root.replace(/\/+$/, '').length);
  }
  let depth = 0;
  for (const segment of rest.split('/')) {
    if (segment === '..') depth--;
    else if (segment !== '' && segment !== '.') depth++;
    if (depth < 0) return true;
  }
  return false;
}

export interface OptionRule {
  /** When set, the only options (before `--`) that keep the command free. */
  allow?: readonly string[];
  /** Options that make the command ask, wherever they appear. */
  ask: readonly string[];
  assignments: 'allow' | 'ask';
  paths: 'inside' | 'any';
}

/**
 * The first argument that keeps a free command from running freely, or null. `args` are the words
 * after the rule's own. Options are found before and after `--` (npm, cargo and others pass what
 * follows `--` on to the program they run); the allow list judges only the program's own options,
 * before `--`.
 */
export function judgeOptions(args: readonly Word[], rule: OptionRule, roots: readonly string[]): OptionFinding | null {
  let ownOptions = true;
  for (const word of args) {
    const value = word.value;
    if (value === null) {
      if (mayBeOption(word)) return { option: word.text, why: 'is only known when the command runs, so the options it passes cannot be checked' };
      if (rule.paths === 'inside' && outsideWorkingCopy(word.pattern ?? '', roots)) return { option: word.text, why: 'names paths outside the working copy' };
      continue;
    }
    if (value === '--') {
      ownOptions = false;
      continue;
    }
    if (value.startsWith('-') && value !== '-') {
      const finding = judgeOption(value, rule, ownOptions);
      if (finding) return finding;
      const eq = value.indexOf('=');
      if (rule.paths === 'inside' && eq > 0 && outsideWorkingCopy(value.slice(eq + 1), roots)) {
        return { option: value, why: 'names a path outside the working copy' };
      }
      continue;
    }
    if (rule.assignments === 'ask' && /^[A-Za-z_][A-Za-z0-9_]*=/.test(value)) {
      return { option: value, why: 'sets a variable that can change what the command runs' };
    }
    if (rule.paths === 'inside' && outsideWorkingCopy(value, roots)) return { option: value, why: 'names a path outside the working copy' };
  }
  return null;
}

function judgeOption(value: string, rule: OptionRule, ownOptions: boolean): OptionFinding | null {
  const allowed = rule.allow ? namedOption(value, rule.allow, false) : null;
  const asked = namedOption(value, rule.ask, true);
  if (asked && !allowed) return { option: value, why: optionName(value) === asked ? 'is one of the options that make it ask' : `is \`${asked}\`, one of the options that make it ask` };
  if (allowed) return null;
  const letters = clusterLetters(value);
  for (const letter of letters) {
    if (rule.ask.includes(`-${letter}`)) return { option: value, why: `includes \`-${letter}\`, one of the options that make it ask` };
  }
  if (!rule.allow || !ownOptions) return null;
  // A cluster of allowed flags (`-vx`), or an allowed flag with its value attached (`-j4`).
  const first = letters[0];
  if (first !== undefined && rule.allow.includes(`-${first}`)) {
    const allFlags = letters.every((l) => rule.allow?.includes(`-${l}`));
    const attachedValue = letters.length === 1 && value.length > 2;
    if (allFlags || attachedValue) return null;
  }
  return { option: value, why: 'is not among the options that keep it free' };
}
