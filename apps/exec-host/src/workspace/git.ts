import { currentLauncher } from './launcher';

export interface GitRepo {
  gitDir: string;
  workTree: string;
  /** An empty directory used as HOME, so no user configuration is ever read. */
  home: string;
}

export interface GitOptions {
  input?: string | Buffer;
  /** Protocols allowed for this call only (fetching the project's source); never allowed otherwise. */
  allowProtocols?: string[];
  extraConfig?: string[];
  timeoutMs?: number;
  /** Return stdout as a Buffer (binary patches, blobs). */
  raw?: boolean;
  allowFailure?: boolean;
  /** Variables for this call only (a fetch's askpass program, remote-access.ts). */
  env?: Record<string, string>;
}

export interface GitResult {
  code: number;
  stdout: Buffer;
  stderr: string;
}

export class GitError extends Error {
  constructor(
    readonly args: string[],
    readonly code: number,
    readonly stderr: string,
  ) {
    super(`git ${args[0] ?? ''} failed (${code}): ${stderr.trim().split('\n').slice(-3).join(' ')}`);
  }
}

/**
 * Settings for every host-side git call. The agent controls every file of the working tree, so
 * nothing in it may make git run a program: no hooks, no fsmonitor, no filters or textconv, no
 * external diff, no submodule recursion, no network, and no system, global or user configuration.
 */
const HARDENED_CONFIG = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.attributesFile=/dev/null',
  'core.excludesFile=/dev/null',
  'core.pager=cat',
  'core.editor=false',
  'core.askPass=',
  'core.sshCommand=false',
  'core.quotePath=false',
  'core.autocrlf=false',
  'core.safecrlf=false',
  'core.symlinks=true',
  'core.trustctime=true',
  'core.untrackedCache=false',
  'core.splitIndex=false',
  'diff.external=',
  'diff.noprefix=false',
  'diff.mnemonicPrefix=false',
  'diff.renames=false',
  'diff.ignoreSubmodules=all',
  'status.submoduleSummary=false',
  'submodule.recurse=false',
  'protocol.allow=never',
  'gc.auto=0',
  'maintenance.auto=false',
  'advice.detachedHead=false',
  'user.name=lemniscate',
  'user.email=exec-host@lemniscate.invalid',
];

function hardenedEnv(repo: GitRepo | { home: string }, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: repo.home,
    XDG_CONFIG_HOME: repo.home,
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_LITERAL_PATHSPECS: '1',
    GIT_OPTIONAL_LOCKS: '0',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_PROTOCOL_FROM_USER: '0',
    ...extra,
  };
  if ('gitDir' in repo) {
    env.GIT_DIR = repo.gitDir;
    env.GIT_WORK_TREE = repo.workTree;
  }
  return env;
}

function configArgs(options: GitOptions = {}): string[] {
  const args: string[] = [];
  for (const c of HARDENED_CONFIG) args.push('-c', c);
  for (const p of options.allowProtocols ?? []) args.push('-c', `protocol.${p}.allow=always`);
  for (const c of options.extraConfig ?? []) args.push('-c', c);
  return args;
}

export async function runGit(repo: GitRepo | { home: string }, args: string[], options: GitOptions = {}): Promise<GitResult> {
  const launched = await currentLauncher().run({
    file: 'git',
    args: [...configArgs(options), ...args],
    env: hardenedEnv(repo, options.env),
    cwd: 'workTree' in repo ? repo.workTree : repo.home,
    input: options.input ?? '',
    timeoutMs: options.timeoutMs ?? 120_000,
  });
  const result = { code: launched.code, stdout: launched.stdout, stderr: launched.stderr.toString('utf8') };
  if (result.code !== 0 && !options.allowFailure) throw new GitError(args, result.code, result.stderr);
  return result;
}

export async function gitText(repo: GitRepo | { home: string }, args: string[], options: GitOptions = {}): Promise<string> {
  return (await runGit(repo, args, options)).stdout.toString('utf8');
}
