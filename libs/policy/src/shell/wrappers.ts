import { environmentProblem, isSensitiveEnv, type ProblemPart } from './parts';
import type { Word } from './words';

export type Unwrapped =
  | { kind: 'plain' }
  /** `inner` are the commands the wrapper runs; `ownArgs` how many words belong to the wrapper. */
  | { kind: 'wrapper'; name: string; transparent: boolean; ownArgs: number; inner: Word[][]; problems: ProblemPart[] }
  /** A shell string run by `sh -c` or `eval`, to be parsed in turn. */
  | { kind: 'script'; name: string; transparent: boolean; script: string }
  | { kind: 'unknown'; name: string; why: string };

/** The program a path names, as far as wrappers are concerned: `/usr/bin/env` is `env`. */
export function programName(value: string): string {
  const slash = value.lastIndexOf('/');
  return slash >= 0 ? value.slice(slash + 1) : value;
}

interface OptionSpec {
  /** Options that take the next word as their value (`-n 10`, `--signal KILL`). */
  valued: string[];
  /** Words to skip after the options and before the command (the duration of `timeout`). */
  operands?: number;
  /** Options after which nothing is run (`command -v`). */
  noCommand?: string[];
  /** Any other option-like word: a flag of the wrapper. */
  /** Why an option makes the wrapped command unknowable (`xargs -I`), or null. */
  unknowable?: (option: string) => string | null;
}

// Wrappers that only change how the next command runs: the next command is what gets judged.
const TRANSPARENT: Record<string, OptionSpec> = {
  nice: { valued: ['-n', '--adjustment'] },
  timeout: { valued: ['-s', '-k', '--signal', '--kill-after'], operands: 1 },
  time: { valued: ['-f', '--format', '-o', '--output'] },
  command: { valued: [], noCommand: ['-v', '-V'] },
  builtin: { valued: [] },
  exec: { valued: ['-a'] },
  nohup: { valued: [] },
  setsid: { valued: [] },
  stdbuf: { valued: ['-i', '-o', '-e', '--input', '--output', '--error'] },
  ionice: { valued: ['-c', '-n', '--class', '--classdata'], noCommand: ['-p', '-P', '-u', '--pid', '--pgid', '--uid'] },
  busybox: { valued: [] },
};

const XARGS: OptionSpec = {
  valued: ['-I', '-L', '-n', '-P', '-s', '-d', '-E', '-a', '--arg-file', '--delimiter', '--max-args', '--max-procs', '--max-chars', '--max-lines', '--replace', '--eof', '--process-slot-var'],
  // With -I/-i/--replace the input's words go anywhere in the command, a shell's command string included.
  unknowable: (option) => (option.startsWith('--replace') || (!option.startsWith('--') && /[Ii]/.test(option.slice(1))) ? 'it puts words read from its input into the command it runs (-I)' : null),
};

/**
 * Programs that no argument can make run another program or write a file: under `xargs`, whose
 * input adds words nobody has seen to the command, only these are judged by the words written.
 */
const ARGUMENT_SAFE = new Set([
  'cat',
  'grep',
  'egrep',
  'fgrep',
  'wc',
  'head',
  'tail',
  'ls',
  'stat',
  'du',
  'basename',
  'dirname',
  'realpath',
  'readlink',
  'echo',
  'nl',
  'md5sum',
  'sha1sum',
  'sha224sum',
  'sha256sum',
  'sha384sum',
  'sha512sum',
  'b2sum',
  'cksum',
]);

/** The words `xargs` adds from its input: unknown until it runs, so an option among them is a doubt. */
const XARGS_INPUT: Word = { value: null, text: '<input of xargs>' };

/**
 * `xargs CMD ARGS…` runs CMD with ARGS and then words read from its input (or the file of `-a`), which
 * nobody has seen: `echo --pre=sh | xargs rg x` is `rg x --pre=sh`. So CMD is judged with one more
 * word whose value is unknown, unless no argument can change what CMD does. With `-I`/`-i`/`--replace`
 * the input's words go anywhere in the command, the command string of `sh -c {}` included: a doubt.
 */
function xargsCommand(argv: Word[]): Unwrapped {
  const at = skipOptions(argv, XARGS);
  if (typeof at === 'string') return { kind: 'unknown', name: 'xargs', why: at };
  // With no command it runs `echo`.
  const command = at < 0 ? [{ value: 'echo', text: 'echo' }] : argv.slice(at);
  const program = literal(command[0]);
  const safe = program !== null && ARGUMENT_SAFE.has(programName(program));
  return { kind: 'wrapper', name: 'xargs', transparent: true, ownArgs: at < 0 ? argv.length : at, inner: [safe ? command : [...command, XARGS_INPUT]], problems: [] };
}

// Wrappers that are programs in their own right: judged themselves, and so is what they run.
const PRIVILEGED: Record<string, OptionSpec> = {
  sudo: {
    valued: [
      '-u',
      '-g',
      '-p',
      '-C',
      '-D',
      '-h',
      '-r',
      '-t',
      '-U',
      '-T',
      '-R',
      '--user',
      '--group',
      '--prompt',
      '--close-from',
      '--chdir',
      '--host',
      '--role',
      '--type',
      '--other-user',
      '--command-timeout',
    ],
  },
  doas: { valued: ['-u', '-C'] },
};

const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'ash', 'mksh', 'yash', 'posh', 'rbash']);

// Programs that run another command in a way this engine does not model.
const OPAQUE_RUNNERS: Record<string, string> = {
  watch: 'it runs its arguments through a shell, repeatedly',
  parallel: 'it builds commands from its input',
  su: 'it runs a command as another user',
  runuser: 'it runs a command as another user',
  script: 'it runs a shell or a command given as an option',
  strace: 'it traces the command it runs',
  ltrace: 'it traces the command it runs',
  unbuffer: 'it runs the command that follows',
  chroot: 'it runs a command inside another root',
  nsenter: 'it runs a command in other namespaces',
  unshare: 'it runs a command in new namespaces',
  flock: 'it runs a command while holding a lock',
  setpriv: 'it runs a command with other privileges',
  taskset: 'it runs a command pinned to processors',
  chrt: 'it runs a command with another scheduling policy',
  fakeroot: 'it runs a command that believes it is root',
  firejail: 'it runs a command in a sandbox of its own',
  bwrap: 'it runs a command in a sandbox of its own',
  proot: 'it runs a command inside another root',
  expect: 'it runs a script that drives other programs',
  tmux: 'it runs commands in a terminal multiplexer',
  screen: 'it runs commands in a terminal multiplexer',
  coproc: 'it starts a coprocess',
};

function literal(word: Word | undefined): string | null {
  return word ? word.value : null;
}

/**
 * Skips a wrapper's options. Returns the index of the wrapped command, `-1` when the wrapper runs
 * nothing, or a string explaining why the command cannot be found statically.
 */
function skipOptions(argv: Word[], spec: OptionSpec): number | string {
  let i = 1;
  while (i < argv.length) {
    const value = literal(argv[i]);
    if (value === null) return `its option \`${argv[i]?.text ?? ''}\` is only known at run time`;
    if (value === '--') {
      i++;
      break;
    }
    if (!value.startsWith('-') || value === '-') break;
    const unknowable = spec.unknowable?.(value);
    if (unknowable) return unknowable;
    if (spec.noCommand?.includes(value)) return -1;
    if (spec.valued.includes(value)) {
      i += 2;
      continue;
    }
    i++;
  }
  for (let n = spec.operands ?? 0; n > 0; n--) {
    if (i >= argv.length) return -1;
    i++;
  }
  return i < argv.length ? i : -1;
}

function envCommand(argv: Word[]): Unwrapped {
  const problems: ProblemPart[] = [];
  let i = 1;
  while (i < argv.length) {
    const value = literal(argv[i]);
    if (value === null) return { kind: 'unknown', name: 'env', why: `its argument \`${argv[i]?.text ?? ''}\` is only known at run time` };
    if (value === '-S' || value.startsWith('--split-string') || (value.startsWith('-') && !value.startsWith('--') && value.includes('S'))) {
      return { kind: 'unknown', name: 'env', why: 'it splits a string into a command line (-S)' };
    }
    if (value === '-u' || value === '--unset' || value === '-C' || value === '--chdir') {
      i += 2;
      continue;
    }
    if (value === '--') {
      i++;
      break;
    }
    if (value.startsWith('-') && value !== '-') {
      i++;
      continue;
    }
    const eq = value.indexOf('=');
    if (eq > 0) {
      const name = value.slice(0, eq);
      if (isSensitiveEnv(name)) problems.push(environmentProblem(name));
      i++;
      continue;
    }
    break;
  }
  if (i >= argv.length) return problems.length > 0 ? { kind: 'wrapper', name: 'env', transparent: false, ownArgs: argv.length, inner: [], problems } : { kind: 'plain' };
  return { kind: 'wrapper', name: 'env', transparent: true, ownArgs: i, inner: [argv.slice(i)], problems };
}

function shellCommand(name: string, argv: Word[]): Unwrapped {
  let i = 1;
  let script = false;
  while (i < argv.length) {
    const value = literal(argv[i]);
    if (value === null) return { kind: 'unknown', name, why: `its argument \`${argv[i]?.text ?? ''}\` is only known at run time` };
    if (value === '--') {
      i++;
      break;
    }
    if (value === '-o' || value === '+o' || value === '-O' || value === '+O' || value === '--rcfile' || value === '--init-file') {
      i += 2;
      continue;
    }
    if (value.startsWith('--')) {
      i++;
      continue;
    }
    if ((value.startsWith('-') || value.startsWith('+')) && value.length > 1) {
      if (value.slice(1).includes('s')) return { kind: 'unknown', name, why: 'it reads the commands to run from its input' };
      if (value.slice(1).includes('c')) script = true;
      i++;
      continue;
    }
    break;
  }
  if (script) {
    const source = argv[i];
    if (!source) return { kind: 'unknown', name, why: '-c is given no command string' };
    if (source.value === null) return { kind: 'unknown', name, why: `the command string \`${source.text}\` is only known at run time` };
    return { kind: 'script', name: `${name} -c`, transparent: true, script: source.value };
  }
  // `bash script.sh` runs a file: judged as the shell itself. Without a file it reads its input.
  if (i < argv.length) return { kind: 'plain' };
  return { kind: 'unknown', name, why: 'it reads the commands to run from its input' };
}

function findCommand(argv: Word[]): Unwrapped {
  const inner: Word[][] = [];
  for (let i = 1; i < argv.length; i++) {
    const value = literal(argv[i]);
    if (value === '-exec' || value === '-execdir' || value === '-ok' || value === '-okdir') {
      const start = i + 1;
      let end = start;
      while (end < argv.length && literal(argv[end]) !== ';' && literal(argv[end]) !== '+') end++;
      if (end > start) inner.push(argv.slice(start, end));
      i = end;
    }
  }
  if (inner.length === 0) return { kind: 'plain' };
  return { kind: 'wrapper', name: 'find', transparent: false, ownArgs: argv.length, inner, problems: [] };
}

export function unwrap(argv: Word[]): Unwrapped {
  const first = argv[0]?.value;
  if (!first) return { kind: 'plain' };
  // `./env` is a file of the project, not the system's env.
  if (first.includes('/') && !first.startsWith('/')) return { kind: 'plain' };
  const name = programName(first);

  if (name === 'env') return envCommand(argv);
  if (SHELLS.has(name)) return shellCommand(name, argv);
  if (name === 'find') return findCommand(argv);
  if (name === 'eval') {
    const words = argv.slice(1);
    if (words.length === 0) return { kind: 'plain' };
    const dynamic = words.find((w) => w.value === null);
    if (dynamic) return { kind: 'unknown', name, why: `its argument \`${dynamic.text}\` is only known at run time` };
    return { kind: 'script', name, transparent: true, script: words.map((w) => w.value).join(' ') };
  }
  if (name === 'trap') return trapCommand(argv);
  if (name === 'alias') return aliasCommand(argv);
  if (name === 'hash' && argv.some((w) => w.value === null || /^-[a-z]*p/.test(w.value))) {
    return { kind: 'unknown', name, why: 'with -p it makes a command name run another program' };
  }
  if (name === 'enable' && argv.some((w) => w.value === null || /^-[a-z]*f/.test(w.value))) {
    return { kind: 'unknown', name, why: 'with -f it loads new shell built-ins from a library' };
  }
  const opaque = OPAQUE_RUNNERS[name];
  if (opaque !== undefined) return argv.length > 1 ? { kind: 'unknown', name, why: opaque } : { kind: 'plain' };

  if (name === 'xargs') return xargsCommand(argv);
  const transparent = TRANSPARENT[name];
  const privileged = PRIVILEGED[name];
  const spec = transparent ?? privileged;
  if (!spec) return { kind: 'plain' };
  const at = skipOptions(argv, spec);
  if (typeof at === 'string') return { kind: 'unknown', name, why: at };
  if (at < 0) return { kind: 'plain' };
  return { kind: 'wrapper', name, transparent: transparent !== undefined, ownArgs: at, inner: [argv.slice(at)], problems: [] };
}

/** `trap 'cmd' SIGNAL…` runs `cmd` later, when the signal (or EXIT) arrives. */
function trapCommand(argv: Word[]): Unwrapped {
  let i = 1;
  while (i < argv.length && /^-[lp]+$/.test(argv[i]?.value ?? '')) i++;
  if (literal(argv[i]) === '--') i++;
  const action = argv[i];
  // `trap - SIG` and `trap '' SIG` reset or ignore; `trap` alone lists.
  if (!action || argv.length <= i + 1) return { kind: 'plain' };
  if (action.value === null) return { kind: 'unknown', name: 'trap', why: `its action \`${action.text}\` is only known at run time` };
  if (action.value === '-' || action.value === '') return { kind: 'plain' };
  return { kind: 'script', name: 'trap', transparent: false, script: action.value };
}

/** `alias name='cmd'` makes `name` run `cmd` wherever aliases are expanded: judge `cmd`. */
function aliasCommand(argv: Word[]): Unwrapped {
  const scripts: string[] = [];
  for (const word of argv.slice(1)) {
    if (word.value === null) return { kind: 'unknown', name: 'alias', why: `its definition \`${word.text}\` is only known at run time` };
    const eq = word.value.indexOf('=');
    if (eq > 0) scripts.push(word.value.slice(eq + 1));
  }
  if (scripts.length === 0) return { kind: 'plain' };
  return { kind: 'script', name: 'alias', transparent: false, script: scripts.join('\n') };
}
