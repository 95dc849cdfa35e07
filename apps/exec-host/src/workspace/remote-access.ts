import type { RepositoryAccess } from '@lemniscate/contracts';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runGit, type GitOptions, type GitRepo, type GitResult } from './git';

/** The system's CA bundle, kept beside a project's own CA so public and private servers both verify. */
const SYSTEM_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

/** Where a fetch goes and how: what resolveSource (working-copy.ts) accepted, with the project's access. */
export interface FetchSource {
  url: string;
  protocols: string[];
  local: boolean;
  access?: RepositoryAccess | undefined;
}

/**
 * The credential of one fetch, as files in a private directory that lives only as long as the git
 * call: an askpass program reading the user name and password from files (never the command line,
 * never the environment other programs inherit), the SSH key and known hosts, the CA bundle. Git and
 * ssh run on the exec-host, outside any sandbox; nothing of this reaches a working copy.
 */
async function openAccess(source: FetchSource): Promise<{ config: string[]; env: Record<string, string>; dir: string | null }> {
  const access = source.access;
  if (source.local || !access) return { config: strictRemoteConfig(source), env: {}, dir: null };
  const dir = await fs.mkdtemp(path.join(tmpdir(), `lemniscate-fetch-${randomBytes(4).toString('hex')}-`));
  await fs.chmod(dir, 0o700);
  const file = (name: string, text: string, mode = 0o600) => fs.writeFile(path.join(dir, name), text, { mode }).then(() => path.join(dir, name));
  const config = strictRemoteConfig(source);
  const env: Record<string, string> = {};
  const credential = access.credential;
  if (credential?.kind === 'https') {
    await file('username', credential.username);
    await file('password', credential.password);
    // Git asks "Username for 'https://…': " and then "Password for 'https://user@…': ".
    const askpass = await file('askpass', `#!/bin/sh\ncase "$1" in\n  Username*) cat '${dir}/username' ;;\n  *) cat '${dir}/password' ;;\nesac\n`, 0o700);
    env.GIT_ASKPASS = askpass;
  }
  if (access.caPem) {
    const system = await fs.readFile(SYSTEM_CA_BUNDLE, 'utf8').catch(() => '');
    config.push(`http.sslCAInfo=${await file('ca.pem', `${system}\n${access.caPem}\n`)}`);
  }
  if (source.protocols.includes('ssh')) {
    const knownHosts = await file('known_hosts', `${access.knownHosts ?? ''}\n`);
    const key = credential?.kind === 'ssh' ? await file('key', credential.privateKey.endsWith('\n') ? credential.privateKey : `${credential.privateKey}\n`) : null;
    config.push(`core.sshCommand=${sshCommand(knownHosts, key)}`, 'ssh.variant=ssh');
  }
  return { config, env, dir };
}

/**
 * Settings of every fetch from a URL: no redirects (a credential goes to the host the URL names and no
 * other), no credential helpers of any configuration, and ssh only as sshCommand below allows it.
 */
function strictRemoteConfig(source: FetchSource): string[] {
  if (source.local) return [];
  return ['http.followRedirects=false', 'credential.helper=', 'http.emptyAuth=false', 'http.sslVerify=true'];
}

/**
 * ssh with nothing from any configuration file or agent: this key only, these known hosts only, a
 * host key not among them refused (never trusted on first use), no prompts, no forwarding.
 */
function sshCommand(knownHosts: string, key: string | null): string {
  const options = [
    '-F /dev/null',
    '-o BatchMode=yes',
    '-o StrictHostKeyChecking=yes',
    `-o UserKnownHostsFile=${knownHosts}`,
    '-o GlobalKnownHostsFile=/dev/null',
    '-o UpdateHostKeys=no',
    '-o IdentityAgent=none',
    '-o IdentitiesOnly=yes',
    key ? `-o IdentityFile=${key}` : '-o IdentityFile=/dev/null',
    '-o PasswordAuthentication=no',
    '-o KbdInteractiveAuthentication=no',
    '-o ControlMaster=no',
    '-o ControlPath=none',
    '-o ClearAllForwardings=yes',
    '-o PermitLocalCommand=no',
    '-o ConnectTimeout=20',
    '-o ServerAliveInterval=15',
  ];
  return `ssh ${options.join(' ')}`;
}

/** A git call that talks to the project's repository (ls-remote, fetch), with its access for this call only. */
export async function runFetchGit(repo: GitRepo | { home: string }, args: string[], source: FetchSource, options: GitOptions = {}): Promise<GitResult> {
  const opened = await openAccess(source);
  try {
    return await runGit(repo, args, {
      ...options,
      allowProtocols: source.protocols,
      extraConfig: [...(options.extraConfig ?? []), ...opened.config],
      env: { ...(options.env ?? {}), ...opened.env },
    });
  } finally {
    if (opened.dir) await fs.rm(opened.dir, { recursive: true, force: true });
  }
}

/**
 * Why a fetch failed, as a sentence for the person who set the project up: git's own last lines are
 * kept in the error's details, but the cause most often lies in the access (credential, host key, CA).
 */
export function fetchFailureReason(stderr: string): string | null {
  const s = stderr.toLowerCase();
  if (s.includes('host key verification failed') || s.includes('remote host identification has changed')) {
    return "the SSH server's host key is not among the project's known hosts (or has changed): check it with the server's administrator and update the project's repository access";
  }
  if (s.includes('permission denied (publickey') || s.includes('permission denied, please try again')) return "the SSH server refused the project's key";
  if (s.includes('authentication failed') || s.includes('could not read username') || s.includes('could not read password') || s.includes('403') || s.includes('401')) {
    return "the server refused the project's credential (or the repository needs one and none is set)";
  }
  if (s.includes('server certificate verification failed') || s.includes('ssl certificate problem') || s.includes('certificate verify failed')) {
    return "the server's TLS certificate is not trusted: give the project's repository access the CA certificate that signed it";
  }
  if (s.includes('could not resolve host') || s.includes('connection refused') || s.includes('connection timed out') || s.includes('network is unreachable') || s.includes('no route to host')) {
    return 'the exec-host cannot reach the server';
  }
  if (s.includes('redirect')) return 'the server answered with a redirect, which is not followed: give the repository URL it redirects to';
  return null;
}
