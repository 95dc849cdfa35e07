import type { Word } from './words';

/** A simple command bash would run, after quotes, escapes and wrappers are removed. */
export interface CommandPart {
  kind: 'command';
  argv: Word[];
  /** Wrappers the command was found inside, outermost first (`sudo`, `timeout`, `sh -c` …). */
  via: string[];
  /**
   * Set for words that may be a command run by a program this engine does not model (`flock
   * FILE cmd`): only a certain match with a forbidden rule counts.
   */
  probe?: boolean;
}

/** A redirection that creates or overwrites a file. `target` is null when computed at run time. */
export interface WritePart {
  kind: 'write';
  target: string | null;
  text: string;
}

/** Something that cannot be judged statically: always at least `ask`. */
export interface ProblemPart {
  kind: 'problem';
  rule: string;
  reason: string;
}

export type ShellPart = CommandPart | WritePart | ProblemPart;

export interface ShellAnalysis {
  parts: readonly ShellPart[];
}

export const MAX_COMMAND_LENGTH = 64 * 1024;

/** Environment variables that change which code runs or how: setting one needs a person. */
const SENSITIVE_ENV_EXACT = new Set([
  'PATH',
  'NODE_OPTIONS',
  'NODE_PATH',
  'BASH_ENV',
  'ENV',
  'SHELLOPTS',
  'BASHOPTS',
  'IFS',
  'PS4',
  'PROMPT_COMMAND',
  'CDPATH',
  'PYTHONPATH',
  'PYTHONSTARTUP',
  'PYTHONHOME',
  'PYTHONUSERBASE',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'RUBYOPT',
  'RUBYLIB',
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  'JDK_JAVA_OPTIONS',
  'MAVEN_OPTS',
  'GRADLE_OPTS',
  'GOFLAGS',
  'RUSTC_WRAPPER',
  'RUSTC',
  'CARGO_BUILD_RUSTC_WRAPPER',
  'EDITOR',
  'VISUAL',
  'PAGER',
  'HOME',
  'TMPDIR',
  // Programs that pagers, man and git run on their own
  'LESSOPEN',
  'LESSCLOSE',
  'LESS',
  'MANPAGER',
  'MANOPT',
  'BROWSER',
  'AWKPATH',
  'SYSTEMD_PAGER',
]);
const SENSITIVE_ENV_PREFIXES = ['LD_', 'DYLD_', 'GIT_', 'npm_config_', 'NPM_CONFIG_', 'YARN_', 'PNPM_', 'BASH_FUNC_'];

export function isSensitiveEnv(name: string): boolean {
  return SENSITIVE_ENV_EXACT.has(name) || SENSITIVE_ENV_PREFIXES.some((p) => name.startsWith(p));
}

export function environmentProblem(name: string): ProblemPart {
  return {
    kind: 'problem',
    rule: 'shell.environment',
    reason: `Setting \`${name}\` changes which code runs or how it runs, so it needs approval (shell.environment).`,
  };
}

export function unparseable(detail: string): ProblemPart {
  return { kind: 'problem', rule: 'shell.unparseable', reason: `${detail}, so it needs approval (shell.unparseable).` };
}
