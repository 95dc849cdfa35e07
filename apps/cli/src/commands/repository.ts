import { RepositoryAccess, repositoryAccessProblem, repositoryTransport, type ProjectView, type RepositoryAccessView } from '@lemniscate/contracts';
import { Command } from 'commander';
import { closeSync, openSync, readSync } from 'node:fs';
import type { z } from 'zod';
import { connectToProject, type CliContext } from '../context';
import { CliError, EXIT_FAILURE, EXIT_OK, isCliError } from '../errors';
import { knownHostsSummary, renderRepositoryAccess } from '../output/repository';

type Done = (code: Promise<number>) => void;

interface ProjectOptions {
  project?: string;
  json?: boolean;
}

export interface SetOptions extends ProjectOptions {
  httpsUser?: string;
  passwordStdin?: boolean;
  sshKey?: string;
  /** false with --no-credential (commander's negated option). */
  credential?: boolean;
  knownHosts?: string;
  ca?: string;
}

interface ClearOptions extends ProjectOptions {
  yes?: boolean;
}

/**
 * What the gateway answers for a key ssh-keygen cannot read without a passphrase
 * (apps/gateway/src/projects/repository-access.service.ts): the CLI refuses such a key with the same
 * sentence before sending it.
 */
export const PASSPHRASE_SENTENCE = 'The SSH private key cannot be read without a passphrase: give an unencrypted OpenSSH key made for this repository (ssh-keygen -t ed25519 -N "").';

/** The most the gateway takes of each file (libs/contracts' RepositoryAccess). */
const MAX_BYTES = { sshKey: 16_384, knownHosts: 65_536, ca: 65_536 } as const;

function fail(message: string): never {
  throw new CliError(message, 'usage');
}

const UNREADABLE: Record<string, string> = {
  ENOENT: 'there is no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
};

/**
 * A file's text, read up to `maxBytes` (a device or a huge file is refused, not read to its end).
 * The sentence of a failure names the file, never what it holds.
 */
function readInputFile(file: string, what: string, maxBytes: number): string {
  try {
    const fd = openSync(file, 'r');
    try {
      const buffer = Buffer.alloc(maxBytes + 1);
      let length = 0;
      while (length <= maxBytes) {
        const n = readSync(fd, buffer, length, buffer.length - length, null);
        if (n === 0) break;
        length += n;
      }
      if (length > maxBytes) fail(`${what.charAt(0).toUpperCase()}${what.slice(1)} ${file} is larger than ${maxBytes} bytes, the most the gateway takes.`);
      return buffer.subarray(0, length).toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if (isCliError(error)) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    return fail(`Cannot read ${what} ${file}: ${UNREADABLE[code] ?? code}.`);
  }
}

/** The cipher an OpenSSH private key is sealed with (`none` when it has no passphrase); null when the text is not one ssh-keygen writes. */
export function openSshKeyCipher(key: string): string | null {
  const body = /-----BEGIN OPENSSH PRIVATE KEY-----([\s\S]*?)-----END OPENSSH PRIVATE KEY-----/.exec(key)?.[1];
  if (body === undefined) return null;
  const blob = Buffer.from(body.replace(/\s+/g, ''), 'base64');
  const magic = Buffer.from('openssh-key-v1\0', 'latin1');
  if (blob.length < magic.length + 4 || !blob.subarray(0, magic.length).equals(magic)) return null;
  const length = blob.readUInt32BE(magic.length);
  const start = magic.length + 4;
  if (length === 0 || length > 64 || start + length > blob.length) return null;
  return blob.subarray(start, start + length).toString('latin1');
}

/** A key nobody can use without typing its passphrase: OpenSSH's own format, PEM's Proc-Type header, or encrypted PKCS#8. */
export function isPassphraseProtected(key: string): boolean {
  const cipher = openSshKeyCipher(key);
  return (cipher !== null && cipher !== 'none') || /Proc-Type: 4,ENCRYPTED/.test(key) || /-----BEGIN ENCRYPTED PRIVATE KEY-----/.test(key);
}

/** What the person gave for each part, to name it in a sentence (never its value). */
function partName(path: readonly PropertyKey[], opts: SetOptions): string {
  switch (path.join('.')) {
    case 'credential.privateKey':
      return `the SSH key in ${opts.sshKey}`;
    case 'credential.username':
      return 'the user name given with --https-user';
    case 'credential.password':
      return 'the password or token';
    case 'knownHosts':
      return `the known hosts in ${opts.knownHosts}`;
    case 'caPem':
      return `the CA certificate in ${opts.ca}`;
    default:
      return path.join('.') || 'the repository access';
  }
}

function issueText(issue: z.core.$ZodIssue): string {
  if (issue.code === 'too_big') return `is longer than ${String(issue.maximum)} characters`;
  return issue.message.replace(/\.$/, '');
}

/** The access checked with the contracts' schema, as the gateway checks it; the sentence names options and files, never a value. */
function checkedAccess(project: string, draft: RepositoryAccess, opts: SetOptions): RepositoryAccess {
  const parsed = RepositoryAccess.safeParse(draft);
  if (parsed.success) return parsed.data;
  const parts = parsed.error.issues.map((issue) => `${partName(issue.path, opts)} ${issueText(issue)}`);
  return fail(`The repository access of project "${project}" cannot be set: ${parts.join('; ')}.`);
}

/** The host and port an ssh:// or user@host:path source is reached at, for the ssh-keyscan line. */
function sshHostAndPort(source: string): { host: string; port: number } {
  if (/^ssh:\/\//i.test(source)) {
    const url = new URL(source);
    return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port === '' ? 22 : Number(url.port) };
  }
  return { host: /^[^@]+@([^:]+):/.exec(source)?.[1] ?? 'HOST', port: 22 };
}

/** Why this access cannot go with the project's source: the gateway's sentence, or, for missing host keys, how to get them. */
function accessRefusal(project: ProjectView, access: RepositoryAccess): string | null {
  const problem = repositoryAccessProblem(project.repositorySource, access);
  if (problem === null) return null;
  if (repositoryTransport(project.repositorySource) === 'ssh' && access.knownHosts === undefined && access.credential?.kind !== 'https' && access.caPem === undefined) {
    const { host, port } = sshHostAndPort(project.repositorySource);
    return `The repository of project "${project.name}" is reached over SSH, and the platform never trusts a host key on first use: give the server's host keys with --known-hosts FILE (\`ssh-keyscan -p ${port} ${host} > known_hosts\` writes them; compare them with the fingerprints the server's administrator publishes).`;
  }
  return `The repository access of project "${project.name}" cannot be set: ${problem}.`;
}

/**
 * The password or token: from standard input with --password-stdin (one trailing newline dropped, as
 * `docker login` does), else asked at the terminal without echo. Never an argument: other users of
 * the machine see arguments in `ps`.
 */
async function readPassword(ctx: CliContext, opts: SetOptions, user: string): Promise<string> {
  if (opts.passwordStdin) {
    const text = (await ctx.readStdin()).replace(/\r?\n$/, '');
    if (text === '') fail('Standard input held no password or token; nothing was set. Pipe it in: `printf \'%s\' "$TOKEN" | lemni repository set --https-user USER --password-stdin`.');
    return text;
  }
  if (!ctx.isTTY) {
    fail('No terminal to ask for the password or token: pipe it on standard input with --password-stdin (it is never taken as an argument, which other users of the machine can see).');
  }
  const text = await (await ctx.prompter()).text(`Password or token of ${user}`, { secret: true });
  if (text === '') fail('The password or token is empty; nothing was set.');
  return text;
}

/** The one credential option of `set`, checked before anything is read or sent. */
function credentialChoice(opts: SetOptions): 'https' | 'ssh' | 'none' {
  const given = [opts.httpsUser !== undefined ? '--https-user' : null, opts.sshKey !== undefined ? '--ssh-key' : null, opts.credential === false ? '--no-credential' : null].filter(
    (g): g is string => g !== null,
  );
  if (given.length === 0) {
    fail(
      'Say how the platform authenticates to the repository: --https-user USER (the password or token is then asked for, or read with --password-stdin), --ssh-key FILE, or --no-credential for a public repository.',
    );
  }
  if (given.length > 1) fail(`Give one of --https-user, --ssh-key and --no-credential, not ${given.join(' and ')}.`);
  if (opts.passwordStdin && opts.httpsUser === undefined) fail("--password-stdin goes with --https-user USER: it reads that user's password or token.");
  return opts.httpsUser !== undefined ? 'https' : opts.sshKey !== undefined ? 'ssh' : 'none';
}

/** What the person is told once the access is stored: the credential is sealed, never shown. */
function storedSentence(project: string, view: RepositoryAccessView): string {
  if (view.credential === null) return `No credential is stored: the platform fetches the repository of ${project} without one.`;
  const what = view.credential.kind === 'https' ? 'password or token' : 'private key';
  return `The ${what} is stored sealed (encrypted) by the gateway and is never shown again, to anyone; \`lemni repository set\` replaces it, \`lemni repository clear\` deletes it.`;
}

async function show(ctx: CliContext, opts: ProjectOptions, flags: Record<string, unknown>): Promise<number> {
  const { client, project } = await connectToProject(ctx, opts.project, flags);
  const view = await client.repositoryAccess(project.id);
  ctx.stdout(opts.json ? `${JSON.stringify(view)}\n` : renderRepositoryAccess(project.name, view, Date.now()));
  return EXIT_OK;
}

export async function setAccess(ctx: CliContext, opts: SetOptions, flags: Record<string, unknown>): Promise<number> {
  const kind = credentialChoice(opts);
  // The files first: a typo in a path is said before anything reaches the gateway.
  const privateKey = opts.sshKey === undefined ? undefined : readInputFile(opts.sshKey, 'the SSH key', MAX_BYTES.sshKey);
  const knownHosts = opts.knownHosts === undefined ? undefined : readInputFile(opts.knownHosts, 'the known hosts file', MAX_BYTES.knownHosts);
  const caPem = opts.ca === undefined ? undefined : readInputFile(opts.ca, 'the CA certificate file', MAX_BYTES.ca);
  if (privateKey !== undefined && isPassphraseProtected(privateKey)) fail(PASSPHRASE_SENTENCE);

  const { client, project } = await connectToProject(ctx, opts.project, flags);
  const user = opts.httpsUser ?? '';
  // Everything but the password, checked before it is asked for: nobody types a secret to be told the CA is wrong.
  const draft: RepositoryAccess = {
    ...(kind === 'https' ? { credential: { kind: 'https', username: user, password: 'unread' } } : {}),
    ...(privateKey !== undefined ? { credential: { kind: 'ssh', privateKey } } : {}),
    ...(knownHosts !== undefined ? { knownHosts } : {}),
    ...(caPem !== undefined ? { caPem } : {}),
  };
  const refusal = accessRefusal(project, draft);
  if (refusal) fail(refusal);
  checkedAccess(project.name, draft, opts);
  const access = kind === 'https' ? checkedAccess(project.name, { ...draft, credential: { kind: 'https', username: user, password: await readPassword(ctx, opts, user) } }, opts) : draft;

  const view = await client.setRepositoryAccess(project.id, access);
  const stored = `${storedSentence(project.name, view)}\n`;
  if (opts.json) {
    ctx.stdout(`${JSON.stringify(view)}\n`);
    ctx.stderr(stored);
  } else {
    ctx.stdout(`${renderRepositoryAccess(project.name, view, Date.now())}\n${stored}`);
  }
  return EXIT_OK;
}

/** "the https credential of ci-bot, 1 CA certificate", or "nothing is set": what a clear deletes, never a secret. */
function whatIsSet(view: RepositoryAccessView): string {
  const parts: string[] = [];
  const c = view.credential;
  if (c?.kind === 'https') parts.push(`the https credential of ${c.username ?? 'an unnamed user'}`);
  if (c?.kind === 'ssh') parts.push(`the SSH key ${c.keyFingerprint ?? ''}`.trimEnd());
  if (view.knownHosts !== null) parts.push(knownHostsSummary(view.knownHosts));
  if (view.caPem !== null) {
    const count = (view.caPem.match(/-----BEGIN CERTIFICATE-----/g) ?? []).length;
    parts.push(count === 1 ? '1 CA certificate' : `${count} CA certificates`);
  }
  return parts.length === 0 ? 'nothing is set' : parts.join(', ');
}

export async function clearAccess(ctx: CliContext, opts: ClearOptions, flags: Record<string, unknown>): Promise<number> {
  if (!opts.yes && !ctx.isTTY) fail("`lemni repository clear` deletes the project's repository credential: confirm with --yes (there is no terminal to ask).");
  const { client, project } = await connectToProject(ctx, opts.project, flags);
  if (!opts.yes) {
    const current = await client.repositoryAccess(project.id);
    const confirmed = await (await ctx.prompter()).confirm(`Clear the repository access of project ${project.name} (${whatIsSet(current)})? The credential is deleted for good.`, false);
    if (!confirmed) {
      ctx.stderr('Nothing was cleared.\n');
      return EXIT_FAILURE;
    }
  }
  const view = await client.clearRepositoryAccess(project.id);
  const said = `The repository access of project ${project.name} is cleared: no credential, known hosts or CA certificate is kept, and the platform fetches its repository without them.\n`;
  if (opts.json) {
    ctx.stdout(`${JSON.stringify(view)}\n`);
    ctx.stderr(said);
  } else {
    ctx.stdout(said);
  }
  return EXIT_OK;
}

/** An argument such as `--password=SECRET` is an unknown option; commander would repeat it whole in its error. */
export function redactOptionValues(text: string): string {
  return text.replace(/'(--?[^'=\s]+)=[^']*'/g, "'$1=…'");
}

export function registerRepository(program: Command, ctx: CliContext, done: Done): void {
  const repository = program
    .command('repository')
    .description("how the platform fetches a project's repository (ADR 0012): credential, known hosts, CA; the credential is sealed and never shown")
    // Set before the subcommands are added, which inherit it.
    .configureOutput({ outputError: (text, write) => write(redactOptionValues(text)) })
    .addHelpText(
      'after',
      '\nExamples:\n  $ lemni repository show --project demo\n  $ lemni --profile admin repository set --project demo --ssh-key deploy_key --known-hosts known_hosts\n  $ lemni --profile admin repository clear --project demo --yes',
    );

  repository
    .command('show')
    .description("the project's repository access: source, transport, default ref, credential (kind and user name or key fingerprint), known host keys, CA, last change; never a secret")
    .option('--project <name>', "the project (default: LEMNISCATE_PROJECT, then the profile's project)")
    .option('--json', "print the gateway's answer (RepositoryAccessView) as JSON")
    .addHelpText('after', '\nExamples:\n  $ lemni repository show --project demo\n  $ lemni repository show --project demo --json')
    .action((opts: ProjectOptions, cmd: Command) => done(show(ctx, opts, cmd.optsWithGlobals())));

  repository
    .command('set')
    .description("set how the platform fetches the project's repository (administrators; audited). Each set replaces the whole access: give the credential, known hosts and CA together")
    .option('--project <name>', "the project (default: LEMNISCATE_PROJECT, then the profile's project)")
    .option('--https-user <user>', 'an https:// repository: this user name; the password or token is asked for without echo, or read with --password-stdin')
    .option('--password-stdin', 'with --https-user: read the password or token from standard input (one line), for scripts')
    .option('--ssh-key <file>', 'an ssh:// repository: an OpenSSH private key without a passphrase, made for this repository')
    .option('--no-credential', 'set no credential (a public repository): only --known-hosts or --ca')
    .option('--known-hosts <file>', "an ssh:// repository (required): the server's host keys, as `ssh-keyscan -p PORT HOST > known_hosts` writes them")
    .option('--ca <file>', "an https:// repository: the organisation's CA certificates (PEM) the server's certificate is checked with")
    .option('--json', "print the gateway's answer (RepositoryAccessView) as JSON")
    .addHelpText(
      'after',
      [
        '',
        'The password or token is never an argument: other users of the machine can read arguments in `ps`.',
        '',
        'Examples:',
        '  $ lemni --profile admin repository set --project demo --https-user ci-bot',
        '  $ printf \'%s\' "$TOKEN" | lemni --profile admin repository set --project demo --https-user ci-bot --password-stdin --ca corp-ca.pem',
        '  $ ssh-keyscan -p 22 git.example.org > known_hosts',
        '  $ lemni --profile admin repository set --project demo --ssh-key deploy_key --known-hosts known_hosts',
        '  $ lemni --profile admin repository set --project demo --no-credential --known-hosts known_hosts',
      ].join('\n'),
    )
    .action((opts: SetOptions, cmd: Command) => done(setAccess(ctx, opts, cmd.optsWithGlobals())));

  repository
    .command('clear')
    .description("delete the project's repository access: its credential, known hosts and CA (administrators; audited); asks for confirmation at a terminal")
    .option('--project <name>', "the project (default: LEMNISCATE_PROJECT, then the profile's project)")
    .option('-y, --yes', 'do not ask for confirmation (required without a terminal)')
    .option('--json', "print the gateway's answer (RepositoryAccessView) as JSON")
    .addHelpText('after', '\nExamples:\n  $ lemni --profile admin repository clear --project demo\n  $ lemni --profile admin repository clear --project demo --yes')
    .action((opts: ClearOptions, cmd: Command) => done(clearAccess(ctx, opts, cmd.optsWithGlobals())));
}
