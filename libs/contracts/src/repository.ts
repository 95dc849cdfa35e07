import { z } from 'zod';

/**
 * How a project's repository is reached (ADR 0012): a local path on the exec-host (single-host
 * deployments, demos), or a git URL over `https://` or `ssh://` (also scp-like `user@host:path`),
 * which is what many exec-hosts need. Plain `http://`, `git://` and `file://` are refused: the first
 * two carry code and credentials unauthenticated and in clear, the last is a local path in disguise.
 */
export type RepositoryTransport = 'local' | 'https' | 'ssh';

const SCP_LIKE = /^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!\/\/)/;

/** The transport of a repository source, or null when it is none the platform fetches from. */
export function repositoryTransport(source: string): RepositoryTransport | null {
  if (/^https:\/\//i.test(source)) return 'https';
  if (/^ssh:\/\//i.test(source) || SCP_LIKE.test(source)) return 'ssh';
  if (/^[a-z][a-z0-9+.-]*:/i.test(source)) return null;
  return source.startsWith('/') && !source.includes('\0') ? 'local' : null;
}

/**
 * Why a repository source cannot be a project's, as a sentence, or null when it can. A URL must
 * not carry a password or token: the source is shown in every view, event and export, while the
 * credential is held apart (encrypted, never shown).
 */
export function repositorySourceProblem(source: string): string | null {
  const transport = repositoryTransport(source);
  if (transport === null) {
    return 'must be an absolute path on the exec-host, an https:// URL or an ssh:// (or user@host:path) URL; plain http://, git:// and file:// are not fetched from';
  }
  if (transport === 'local') return null;
  if (transport === 'https' || /^ssh:\/\//i.test(source)) {
    let url: URL;
    try {
      url = new URL(source);
    } catch {
      return 'is not a valid URL';
    }
    if (url.hostname === '') return 'must name the host of the repository';
    // Read from the text too: "user:@host" parses with an empty password, and is still a secret's place.
    const authority = source.slice(source.indexOf('//') + 2).split('/')[0] ?? '';
    const userinfo = authority.includes('@') ? authority.slice(0, authority.lastIndexOf('@')) : '';
    if (url.password !== '' || userinfo.includes(':') || (transport === 'https' && userinfo !== '')) {
      return "must not carry a user name, password or token: set the project's repository credential instead (it is stored encrypted and never shown)";
    }
    if (url.search !== '' || url.hash !== '') return 'must not carry a query string or fragment';
  }
  if (/\s/.test(source)) return 'must not contain whitespace';
  return null;
}

const PemBlock = (label: RegExp, what: string) =>
  z
    .string()
    .max(65_536)
    .refine((s) => label.test(s), `must be ${what} in PEM form (-----BEGIN …-----)`);

/** A known_hosts text: one or more "host key-type base64-key" lines (comments and blank lines allowed). */
export const KnownHosts = z
  .string()
  .max(65_536)
  .refine(
    (s) =>
      s.split('\n').some((l) => /^\S+\s+(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)\s+[A-Za-z0-9+/=]+(\s.*)?$/.test(l.trim())),
    {
      message: 'must hold at least one known_hosts line ("host key-type key", as ssh-keyscan prints it)',
    },
  )
  .refine((s) => s.split('\n').every((l) => !l.trim().startsWith('@') || /^@(cert-authority|revoked)\s/.test(l.trim())), {
    message: 'holds a marker other than @cert-authority or @revoked',
  });

/** The secret part of a repository's access: never shown, never in events or exports, never in a sandbox. */
export const RepositoryCredential = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('https'),
      username: z
        .string()
        .min(1, 'must not be empty')
        .max(256)
        .regex(/^[^\s:]+$/, 'must not contain spaces or ":"'),
      /** A password or access token. */
      password: z
        .string()
        .min(1, 'must not be empty')
        .max(4096)
        .regex(/^[^\n\r\0]+$/, 'must be one line'),
    })
    .strict(),
  z
    .object({
      kind: z.literal('ssh'),
      /** An OpenSSH or PEM private key without a passphrase. */
      privateKey: z
        .string()
        .max(16_384)
        .refine(
          (s) => /-----BEGIN (OPENSSH|RSA|EC) PRIVATE KEY-----/.test(s) && /-----END (OPENSSH|RSA|EC) PRIVATE KEY-----/.test(s),
          'must be an OpenSSH private key (-----BEGIN OPENSSH PRIVATE KEY-----)',
        )
        .refine((s) => !/Proc-Type: 4,ENCRYPTED/.test(s), 'must not be protected by a passphrase: the platform fetches without anyone to type it'),
    })
    .strict(),
]);
export type RepositoryCredential = z.infer<typeof RepositoryCredential>;

/**
 * Everything needed to fetch a project's repository besides its URL: the credential (optional for a
 * public repository), the SSH server's host keys (required for ssh: the platform never trusts a host
 * key on first use), and a CA for an https server with a certificate from the organisation's own CA.
 * The gateway holds it and hands it to the exec-host over the control channel for each fetch.
 */
export const RepositoryAccess = z
  .object({
    credential: RepositoryCredential.optional(),
    knownHosts: KnownHosts.optional(),
    caPem: PemBlock(/-----BEGIN CERTIFICATE-----/, 'one or more CA certificates').optional(),
  })
  .strict();
export type RepositoryAccess = z.infer<typeof RepositoryAccess>;

/** Why an access cannot be used with a source, as a sentence, or null. */
export function repositoryAccessProblem(source: string, access: RepositoryAccess): string | null {
  const transport = repositoryTransport(source);
  if (transport === 'local') return 'the repository is a local path on the exec-host: it is read without a credential';
  if (transport === 'https') {
    if (access.credential?.kind === 'ssh') return 'the repository is reached over https://: give a user name and password or token, not an SSH key';
    if (access.knownHosts !== undefined) return 'known hosts apply to an ssh:// repository; this one is reached over https://';
  }
  if (transport === 'ssh') {
    if (access.credential?.kind === 'https') return 'the repository is reached over SSH: give an SSH private key, not a user name and password';
    if (access.caPem !== undefined) return 'a CA certificate applies to an https:// repository; this one is reached over SSH';
    if (access.knownHosts === undefined)
      return "an SSH repository needs the server's host key in knownHosts (`ssh-keyscan -p PORT HOST` prints it; compare it with what the server's administrator publishes)";
  }
  return null;
}
