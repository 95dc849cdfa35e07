// What the engine knows about the programs of the read-only catalogue (`commands.readOnly`): for
// each, the options, script commands and operands that make a use do more than read. A use is
// read-only only when that is certain; a word only known at run time that could be an option makes
// it uncertain, and uncertain is not free.
import { clusterLetters, mayBeOption, namedOption, optionName, type OptionFinding } from './options';
import type { ReadOnlyProgram } from './read-only-programs';
import type { Word } from './shell/words';

type Inspector = (args: readonly Word[]) => OptionFinding | null;

const UNCERTAIN = 'is only known when the command runs, so what it does cannot be checked';

function uncertain(word: Word): OptionFinding {
  return { option: word.text, why: UNCERTAIN };
}

/** Options that make a use more than reading, with the reason each gives. */
type AskList = Record<string, string>;

/**
 * A program judged by its options alone: any of `ask` (long ones also abbreviated, short ones also
 * inside a cluster such as `-nro`) makes it more than a read. `maxOperands` bounds the words that
 * are not options (`uniq IN OUT` writes OUT).
 */
function byOptions(ask: AskList = {}, maxOperands = Number.POSITIVE_INFINITY): Inspector {
  const names = Object.keys(ask);
  const careful = names.length > 0 || Number.isFinite(maxOperands);
  return (args) => {
    let operands = 0;
    let ownOptions = true;
    for (const word of args) {
      const value = word.value;
      if (value === null) {
        if (!careful) continue;
        if (Number.isFinite(maxOperands) || mayBeOption(word)) return uncertain(word);
        continue;
      }
      if (ownOptions && value === '--') {
        ownOptions = false;
        continue;
      }
      if (ownOptions && value.startsWith('-') && value !== '-') {
        const hit = namedOption(value, names, true);
        if (hit) return { option: value, why: ask[hit] as string };
        for (const letter of clusterLetters(value)) {
          const why = ask[`-${letter}`];
          if (why !== undefined && !namedOption(value, names, false)) return { option: value, why };
        }
        continue;
      }
      operands++;
      if (operands > maxOperands) return { option: value, why: 'is an output file: this use writes it' };
    }
    return null;
  };
}

const free: Inspector = () => null;

const FIND_ASK: AskList = {
  '-exec': 'runs a command for each file',
  '-execdir': 'runs a command for each file',
  '-ok': 'runs a command for each file',
  '-okdir': 'runs a command for each file',
  '-delete': 'deletes files',
  '-fprint': 'writes to a file',
  '-fprint0': 'writes to a file',
  '-fprintf': 'writes to a file',
  '-fls': 'writes to a file',
};

/** find: single-dash primaries, never abbreviated or clustered; matched exactly. */
const find: Inspector = (args) => {
  for (const word of args) {
    if (word.value === null) {
      if (mayBeOption(word)) return uncertain(word);
      continue;
    }
    const why = FIND_ASK[word.value];
    if (why !== undefined) return { option: word.value, why };
  }
  return null;
};

// ---------------------------------------------------------------------------------------------
// sed

const SED_FLAGS = new Set(['n', 's', 'E', 'r', 'u', 'z']);
const SED_SAFE_LONG = [
  '--quiet',
  '--silent',
  '--debug',
  '--posix',
  '--sandbox',
  '--regexp-extended',
  '--separate',
  '--unbuffered',
  '--null-data',
  '--zero-terminated',
  '--line-length',
  '--follow-symlinks',
  '--binary',
];

const sed: Inspector = (args) => {
  let scriptSeen = false;
  let ownOptions = true;
  const script = (text: string, word: Word): OptionFinding | null => {
    scriptSeen = true;
    const problem = sedScriptProblem(text);
    return problem ? { option: word.text, why: problem } : null;
  };
  for (let i = 0; i < args.length; i++) {
    const word = args[i] as Word;
    const value = word.value;
    if (value === null) {
      if (!scriptSeen || mayBeOption(word)) return uncertain(word);
      continue;
    }
    if (ownOptions && value === '--') {
      ownOptions = false;
      continue;
    }
    if (!ownOptions || !value.startsWith('-') || value === '-') {
      if (!scriptSeen) {
        const finding = script(value, word);
        if (finding) return finding;
      }
      continue;
    }
    if (value.startsWith('--')) {
      if (namedOption(value, ['--in-place'], true)) return { option: value, why: 'edits files in place' };
      if (namedOption(value, ['--file'], true)) return { option: value, why: 'reads its script from a file, which cannot be checked' };
      if (namedOption(value, ['--expression'], true)) {
        const eq = value.indexOf('=');
        const next = args[i + 1];
        const text = eq > 0 ? value.slice(eq + 1) : next?.value;
        if (text === undefined || text === null) return uncertain(next ?? word);
        if (eq < 0) i++;
        const finding = script(text, word);
        if (finding) return finding;
        continue;
      }
      if (namedOption(value, SED_SAFE_LONG, true)) {
        if (optionName(value) === '--line-length' && !value.includes('=')) i++;
        continue;
      }
      return { option: value, why: 'is not an option this engine knows for sed' };
    }
    // A cluster such as -n, -nE, -i.bak, -e SCRIPT, -l 80.
    const body = value.slice(1);
    for (let k = 0; k < body.length; k++) {
      const c = body[k] as string;
      if (c === 'i') return { option: value, why: 'edits files in place' };
      if (c === 'f') return { option: value, why: 'reads its script from a file, which cannot be checked' };
      if (c === 'e' || c === 'l') {
        const rest = body.slice(k + 1);
        let text: string | null | undefined = rest;
        if (rest === '') {
          const next = args[++i];
          text = next?.value;
          if (text === undefined || text === null) return uncertain(next ?? word);
        }
        if (c === 'e') {
          const finding = script(text, word);
          if (finding) return finding;
        }
        break;
      }
      if (!SED_FLAGS.has(c)) return { option: value, why: 'is not an option this engine knows for sed' };
    }
  }
  return null;
};

/**
 * Why a sed script may do more than print, or null when it only reads: `w`/`W` write files, `e`
 * runs commands, and so do the `w` and `e` flags of `s`. A script this reader cannot follow is a
 * problem too.
 */
export function sedScriptProblem(s: string): string | null {
  const unreadable = 'is a sed script this engine cannot read with certainty';
  let i = 0;
  const skipTo = (stop: (c: string) => boolean) => {
    while (i < s.length && !stop(s[i] as string)) {
      if (s[i] === '\\') i++;
      i++;
    }
  };
  /** Skips a delimited part (`/re/`, the halves of `s`), honouring backslash escapes. */
  const delimited = (delim: string): boolean => {
    while (i < s.length) {
      const c = s[i] as string;
      if (c === '\\') {
        i += 2;
        continue;
      }
      if (c === '\n' && delim !== '\n') return false;
      i++;
      if (c === delim) return true;
    }
    return false;
  };
  const address = (): boolean => {
    const c = s[i];
    if (c === undefined) return true;
    if (/[0-9]/.test(c)) {
      while (i < s.length && /[0-9~]/.test(s[i] as string)) i++;
    } else if (c === '$') {
      i++;
    } else if (c === '/' || c === '\\') {
      if (c === '\\') i++;
      const delim = s[i];
      if (delim === undefined || delim === '\n' || delim === '\\') return false;
      i++;
      if (!delimited(delim)) return false;
      while (s[i] === 'I' || s[i] === 'M') i++;
    }
    return true;
  };
  while (i < s.length) {
    const c0 = s[i] as string;
    if (/[\s;]/.test(c0)) {
      i++;
      continue;
    }
    if (c0 === '#') {
      skipTo((c) => c === '\n');
      continue;
    }
    if (!address()) return unreadable;
    if (s[i] === ',') {
      i++;
      if (s[i] === '+' || s[i] === '~') i++;
      if (!address()) return unreadable;
    }
    while (s[i] === ' ' || s[i] === '\t') i++;
    if (s[i] === '!') i++;
    while (s[i] === ' ' || s[i] === '\t') i++;
    const cmd = s[i];
    if (cmd === undefined) return unreadable;
    i++;
    switch (cmd) {
      case '{':
      case '}':
      case '=':
      case 'd':
      case 'D':
      case 'g':
      case 'G':
      case 'h':
      case 'H':
      case 'n':
      case 'N':
      case 'p':
      case 'P':
      case 'x':
      case 'z':
      case 'F':
        break;
      case 'q':
      case 'Q':
      case 'l':
      case 'L':
        while (i < s.length && /[0-9 ]/.test(s[i] as string)) i++;
        break;
      case ':':
      case 'b':
      case 't':
      case 'T':
      case 'v':
        skipTo((c) => c === '\n' || c === ';');
        break;
      case 'a':
      case 'i':
      case 'c':
      case 'r':
      case 'R':
        // Text to add, or a file to read: up to the end of the line.
        skipTo((c) => c === '\n');
        break;
      case 'w':
      case 'W':
        return 'writes to a file (the sed command `w`)';
      case 'e':
        return 'runs a command (the sed command `e`)';
      case 's':
      case 'y': {
        const delim = s[i];
        if (delim === undefined || delim === '\n' || delim === '\\') return unreadable;
        i++;
        if (!delimited(delim) || !delimited(delim)) return unreadable;
        if (cmd === 'y') break;
        while (i < s.length && /[gpiImM0-9ew]/.test(s[i] as string)) {
          if (s[i] === 'w') return 'writes to a file (the `w` flag of `s`)';
          if (s[i] === 'e') return 'runs the result as a command (the `e` flag of `s`)';
          i++;
        }
        break;
      }
      default:
        return unreadable;
    }
    // After a command: only a separator, a closing brace or a comment may follow.
    while (s[i] === ' ' || s[i] === '\t') i++;
    if (i < s.length && !/[;\n}#]/.test(s[i] as string)) return unreadable;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// awk

const awk: Inspector = (args) => {
  let programSeen = false;
  let ownOptions = true;
  for (let i = 0; i < args.length; i++) {
    const word = args[i] as Word;
    const value = word.value;
    if (value === null) {
      if (!programSeen || mayBeOption(word)) return uncertain(word);
      continue;
    }
    if (ownOptions && value === '--') {
      ownOptions = false;
      continue;
    }
    if (programSeen || !ownOptions || !value.startsWith('-') || value === '-') {
      if (!programSeen) {
        programSeen = true;
        const problem = awkProgramProblem(value);
        if (problem) return { option: word.text, why: problem };
      }
      continue;
    }
    if (value === '-F' || value === '-v' || value === '--field-separator' || value === '--assign') {
      const next = args[++i];
      if (!next || next.value === null) return uncertain(next ?? word);
      continue;
    }
    if (/^-[Fv]./.test(value) || /^--(field-separator|assign)=/.test(value)) continue;
    return { option: value, why: 'is not an option this engine lets run freely for awk (it may load a program file, an extension or write a file)' };
  }
  return null;
};

const AWK_KEYWORDS = new Set(['print', 'printf', 'return', 'if', 'while', 'for', 'do', 'else', 'in', 'getline', 'delete', 'exit', 'next', 'nextfile', 'case', 'function', 'BEGIN', 'END']);

/**
 * Why an awk program may do more than read and print, or null. `system()`, pipes (`print | cmd`,
 * `cmd | getline`, gawk's `|&`), output redirection inside `print`/`printf`, and gawk's `@load` /
 * `@include` all count. A `>` is a redirection exactly where awk reads it as one: in a print
 * statement, outside parentheses.
 */
export function awkProgramProblem(p: string): string | null {
  if (/system/.test(p)) return 'calls system(), which runs a command';
  if (p.includes('@')) return 'uses a gawk directive (@load, @include or an indirect call)';
  let i = 0;
  let operand = false;
  let depth = 0;
  let printDepth: number | null = null;
  while (i < p.length) {
    const c = p[i] as string;
    if (c === '\\' && p[i + 1] === '\n') {
      i += 2;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r') {
      i++;
      continue;
    }
    if (c === '\n' || c === ';' || c === '{' || c === '}') {
      if (depth === 0 || c !== '\n') printDepth = null;
      operand = false;
      i++;
      continue;
    }
    if (c === '#') {
      while (i < p.length && p[i] !== '\n') i++;
      continue;
    }
    if (c === '"') {
      i++;
      while (i < p.length && p[i] !== '"') i += p[i] === '\\' ? 2 : 1;
      if (i >= p.length) return 'is an awk program this engine cannot read with certainty';
      i++;
      operand = true;
      continue;
    }
    if (c === '/' && !operand) {
      // A regular expression; `/` inside a bracket expression does not end it.
      i++;
      let bracket = false;
      while (i < p.length && (bracket || p[i] !== '/')) {
        if (p[i] === '\n') return 'is an awk program this engine cannot read with certainty';
        if (p[i] === '\\') i++;
        else if (p[i] === '[') bracket = true;
        else if (p[i] === ']') bracket = false;
        i++;
      }
      if (i >= p.length) return 'is an awk program this engine cannot read with certainty';
      i++;
      operand = true;
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      let j = i;
      while (j < p.length && /[A-Za-z0-9_]/.test(p[j] as string)) j++;
      const word = p.slice(i, j);
      if (word === 'print' || word === 'printf') printDepth = depth;
      operand = !AWK_KEYWORDS.has(word);
      i = j;
      continue;
    }
    if (/[0-9.]/.test(c)) {
      while (i < p.length && /[0-9.eE]/.test(p[i] as string)) i++;
      operand = true;
      continue;
    }
    if (c === '|') {
      if (p[i + 1] === '|') {
        i += 2;
        operand = false;
        continue;
      }
      return 'pipes to or from a command';
    }
    if (c === '>') {
      if (printDepth !== null && depth === printDepth) return 'redirects output to a file';
      i += p[i + 1] === '=' ? 2 : 1;
      operand = false;
      continue;
    }
    if (c === '(' || c === '[') {
      if (c === '(') depth++;
      operand = false;
      i++;
      continue;
    }
    if (c === ')' || c === ']') {
      if (c === ')') depth--;
      operand = true;
      i++;
      continue;
    }
    if ((c === '+' || c === '-') && p[i + 1] === c) {
      i += 2;
      continue;
    }
    operand = false;
    i++;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// tar: free only to list an archive

const TAR_WRITES: AskList = {
  '--extract': 'extracts files',
  '--get': 'extracts files',
  '--create': 'creates an archive',
  '--append': 'writes to an archive',
  '--update': 'writes to an archive',
  '--delete': 'writes to an archive',
  '--catenate': 'writes to an archive',
  '--concatenate': 'writes to an archive',
  '--to-command': 'runs a command for each file',
  '--use-compress-program': 'runs a program of its choice',
  '--info-script': 'runs a script',
  '--new-volume-script': 'runs a script',
  '--checkpoint-action': 'can run a command',
  '--rsh-command': 'runs a remote shell',
  '--rmt-command': 'runs a remote program',
  '--index-file': 'writes to a file',
  '--remove-files': 'deletes files',
};
const TAR_LETTERS: Record<string, string> = {
  x: 'extracts files',
  c: 'creates an archive',
  r: 'writes to an archive',
  u: 'writes to an archive',
  A: 'writes to an archive',
  I: 'runs a program of its choice',
  F: 'runs a script',
};
const TAR_VALUED = new Set(['f', 'C', 'T', 'X', 'K', 'N', 'b', 'g', 'H', 'L', 'V']);

const tar: Inspector = (args) => {
  let listing = false;
  const names = Object.keys(TAR_WRITES);
  const archive = (name: string | null | undefined, word: Word): OptionFinding | null => {
    if (name === null || name === undefined) return uncertain(word);
    return name.includes(':') ? { option: word.text, why: 'names an archive on another host, which tar reaches through a remote shell' } : null;
  };
  for (let i = 0; i < args.length; i++) {
    const word = args[i] as Word;
    const value = word.value;
    if (value === null) {
      if (mayBeOption(word)) return uncertain(word);
      continue;
    }
    // The first word may be old-style letters without a dash (`tar tvf x.tar`).
    const letters = value.startsWith('--') ? null : value.startsWith('-') ? value.slice(1) : i === 0 ? value : null;
    if (value.startsWith('--')) {
      const hit = namedOption(value, names, true);
      if (hit) return { option: value, why: TAR_WRITES[hit] as string };
      if (namedOption(value, ['--list'], true)) listing = true;
      if (namedOption(value, ['--file'], true)) {
        const eq = value.indexOf('=');
        const finding = archive(eq > 0 ? value.slice(eq + 1) : args[++i]?.value, word);
        if (finding) return finding;
      }
      continue;
    }
    if (letters === null) continue;
    for (let k = 0; k < letters.length; k++) {
      const c = letters[k] as string;
      const why = TAR_LETTERS[c];
      if (why !== undefined) return { option: value, why };
      if (c === 't') listing = true;
      if (TAR_VALUED.has(c)) {
        const rest = letters.slice(k + 1);
        const attached = value.startsWith('-') && rest !== '';
        if (c === 'f') {
          const finding = archive(attached ? rest : args[++i]?.value, word);
          if (finding) return finding;
        } else if (!attached) {
          i++;
        }
        if (attached) break;
      }
    }
  }
  return listing ? null : { option: 'tar', why: 'is only free when it lists an archive (-t)' };
};

// ---------------------------------------------------------------------------------------------
// git: reading subcommands, without configuration, pager or program overrides

const GIT_GLOBAL_ASK: AskList = {
  '-c': 'sets configuration, which can name programs git runs',
  '--config-env': 'sets configuration, which can name programs git runs',
  '--git-dir': 'points git at another repository and its configuration',
  '--work-tree': 'points git at another working tree',
  '-p': 'runs a pager',
  '--paginate': 'runs a pager',
  '--super-prefix': 'is an internal option',
};
const GIT_GLOBAL_FLAGS = [
  '--no-pager',
  '-P',
  '--bare',
  '--no-replace-objects',
  '--literal-pathspecs',
  '--glob-pathspecs',
  '--noglob-pathspecs',
  '--icase-pathspecs',
  '--no-optional-locks',
  '--no-lazy-fetch',
  '--no-advice',
  '--html-path',
  '--man-path',
  '--info-path',
];
const GIT_ASK: AskList = {
  '--output': 'writes to a file',
  '--ext-diff': 'runs an external diff program',
  '--textconv': 'runs text conversion programs',
  '--exec': 'runs a command',
  '-O': 'opens files in a pager (git grep) or reads an order file',
  '--open-files-in-pager': 'runs a pager',
  '--upload-pack': 'runs a program',
  '--receive-pack': 'runs a program',
  '--edit-description': 'opens an editor',
};

const gitArgs = byOptions(GIT_ASK);
const READING_SUBCOMMANDS = new Set([
  'status',
  'diff',
  'log',
  'show',
  'blame',
  'annotate',
  'grep',
  'ls-files',
  'ls-tree',
  'rev-parse',
  'describe',
  'shortlog',
  'show-ref',
  'cat-file',
  'diff-tree',
  'diff-files',
  'diff-index',
  'merge-base',
  'rev-list',
  'name-rev',
  'for-each-ref',
  'whatchanged',
  'count-objects',
  'check-ignore',
  'check-attr',
  'range-diff',
  'cherry',
  'show-branch',
  'version',
]);

function positionalWords(args: readonly Word[]): Word[] {
  return args.filter((w) => w.value === null || !w.value.startsWith('-') || w.value === '-');
}

/** A subcommand that lists unless given options or names: `git branch`, `git tag`. */
function listingOnly(listFlags: string[], allowed: string[]): (args: readonly Word[]) => OptionFinding | null {
  return (args) => {
    let listing = false;
    for (const word of args) {
      const value = word.value;
      if (value === null) {
        if (mayBeOption(word)) return uncertain(word);
        continue;
      }
      if (!value.startsWith('-')) continue;
      if (namedOption(value, listFlags, false)) listing = true;
      else if (!namedOption(value, allowed, false) && !/^-n[0-9]*$/.test(value) && !/^-v+$/.test(value)) {
        return { option: value, why: 'is not one of the options that only list' };
      }
    }
    const names = positionalWords(args);
    if (names.length > 0 && !listing) return { option: names[0]?.text ?? '', why: 'creates or changes a ref (a name without --list)' };
    return null;
  };
}

const GIT_SUBCOMMANDS: Record<string, (args: readonly Word[]) => OptionFinding | null> = {
  branch: listingOnly(
    ['--list', '-l'],
    [
      '-a',
      '--all',
      '-r',
      '--remotes',
      '--verbose',
      '--show-current',
      '--contains',
      '--no-contains',
      '--merged',
      '--no-merged',
      '--sort',
      '--format',
      '--points-at',
      '--color',
      '--no-color',
      '--column',
      '--no-column',
      '-i',
      '--ignore-case',
      '--abbrev',
      '--no-abbrev',
    ],
  ),
  tag: listingOnly(['--list', '-l'], ['--contains', '--no-contains', '--merged', '--no-merged', '--sort', '--format', '--points-at', '--color', '--column', '--no-column', '-i', '--ignore-case']),
  remote: (args) => {
    const values = args.map((w) => w.value);
    if (values.every((v) => v === '-v' || v === '--verbose')) return null;
    if (values[0] === 'get-url' && values.length <= 3 && values.every((v) => v !== null)) return null;
    return { option: args[0]?.text ?? 'remote', why: 'is not a listing of remotes (`git remote -v`, `git remote get-url`)' };
  },
  stash: (args) => (args[0]?.value === 'list' || args[0]?.value === 'show' ? gitArgs(args.slice(1)) : { option: args[0]?.text ?? 'stash', why: 'changes the stash (only `list` and `show` read)' }),
  reflog: (args) =>
    args.length === 0 || args[0]?.value === 'show' || args[0]?.value === 'exists' || (args[0]?.value ?? '').startsWith('-')
      ? gitArgs(args)
      : { option: args[0]?.text ?? '', why: 'changes the reflog' },
  worktree: (args) => (args[0]?.value === 'list' ? gitArgs(args.slice(1)) : { option: args[0]?.text ?? 'worktree', why: 'changes worktrees (only `list` reads)' }),
  notes: (args) => (args.length === 0 || args[0]?.value === 'list' || args[0]?.value === 'show' ? gitArgs(args.slice(1)) : { option: args[0]?.text ?? '', why: 'changes notes' }),
  config: (args) => {
    const values = args.map((w) => w.value);
    if (values.some((v) => v === null)) return uncertain(args.find((w) => w.value === null) as Word);
    const reading = [
      '--get',
      '--get-all',
      '--get-regexp',
      '--get-urlmatch',
      '--list',
      '-l',
      '--show-origin',
      '--show-scope',
      '--local',
      '--global',
      '--system',
      '--worktree',
      '--name-only',
      '-z',
      '--null',
      '--includes',
      '--no-includes',
      '--type',
      '--bool',
      '--int',
      '--path',
    ];
    const options = values.filter((v) => (v as string).startsWith('-')) as string[];
    const names = values.filter((v) => !(v as string).startsWith('-')) as string[];
    const unknown = options.find((o) => !namedOption(o, reading, false));
    if (unknown) return { option: unknown, why: 'is not an option that only reads configuration' };
    if (names[0] === 'get' || names[0] === 'list') return null;
    if (options.some((o) => /^--(get|list)|^-l$/.test(o))) return null;
    if (names.length === 1) return null;
    return { option: names.join(' '), why: 'sets configuration' };
  },
};

const git: Inspector = (args) => {
  let i = 0;
  for (; i < args.length; i++) {
    const word = args[i] as Word;
    const value = word.value;
    if (value === null) return uncertain(word);
    if (!value.startsWith('-')) break;
    const hit = namedOption(value, Object.keys(GIT_GLOBAL_ASK), true);
    if (hit) return { option: value, why: GIT_GLOBAL_ASK[hit] as string };
    if (value === '-C' || value === '--namespace') {
      i++;
      continue;
    }
    if (value === '--exec-path' || namedOption(value, GIT_GLOBAL_FLAGS, false) || value.startsWith('--namespace=')) continue;
    if (value.startsWith('--exec-path=')) return { option: value, why: 'makes git run its commands from another directory' };
    return { option: value, why: 'is not a git option this engine lets run freely' };
  }
  const sub = args[i]?.value;
  if (sub === undefined || sub === null) return null;
  const rest = args.slice(i + 1);
  const special = GIT_SUBCOMMANDS[sub];
  if (special) return special(rest) ?? gitArgs(rest);
  if (!READING_SUBCOMMANDS.has(sub)) return { option: args[i]?.text ?? sub, why: 'is not a git subcommand that only reads' };
  return gitArgs(rest);
};

// ---------------------------------------------------------------------------------------------

const INSPECTORS: Record<ReadOnlyProgram, Inspector> = {
  ls: free,
  cat: free,
  head: free,
  tail: free,
  wc: free,
  stat: free,
  du: free,
  df: free,
  realpath: free,
  readlink: free,
  basename: free,
  dirname: free,
  pwd: free,
  grep: free,
  egrep: free,
  fgrep: free,
  cmp: free,
  comm: free,
  cut: free,
  tr: free,
  nl: free,
  fold: free,
  column: free,
  paste: free,
  join: free,
  rev: free,
  tac: free,
  od: free,
  hexdump: free,
  strings: free,
  jq: free,
  md5sum: free,
  sha1sum: free,
  sha256sum: free,
  sha512sum: free,
  cksum: free,
  echo: free,
  printf: free,
  true: free,
  false: free,
  test: free,
  cd: free,
  which: free,
  type: free,
  whoami: free,
  id: free,
  uname: free,
  env: free,
  printenv: free,
  seq: free,
  diff: free,
  file: byOptions({ '-C': 'compiles a magic file (writes it)', '--compile': 'compiles a magic file (writes it)' }),
  tree: byOptions({ '-o': 'writes its output to a file', '-R': 'writes HTML files into directories' }),
  date: byOptions({ '-s': 'sets the clock', '--set': 'sets the clock' }),
  uniq: byOptions({}, 1),
  xxd: byOptions({}, 1),
  ag: byOptions({ '--pager': 'runs a pager of its choice' }),
  rg: byOptions({
    '--pre': 'runs a preprocessor command for each file',
    '--hostname-bin': 'runs a program to learn the host name',
    '-z': 'runs decompression programs',
    '--search-zip': 'runs decompression programs',
  }),
  fd: byOptions({ '-x': 'runs a command for each result', '--exec': 'runs a command for each result', '-X': 'runs a command with the results', '--exec-batch': 'runs a command with the results' }),
  sort: byOptions({ '-o': 'writes its output to a file', '--output': 'writes its output to a file', '--compress-program': 'runs a compression program' }),
  base64: byOptions({ '-o': 'writes its output to a file', '--output': 'writes its output to a file' }),
  find,
  sed,
  awk,
  tar,
  git,
};

/** Why this use of a read-only program does more than read, or null when it only reads. */
export function readOnlyProblem(program: ReadOnlyProgram, args: readonly Word[]): OptionFinding | null {
  return INSPECTORS[program](args);
}
