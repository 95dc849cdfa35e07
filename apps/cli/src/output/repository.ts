import type { ProjectAgentsView, RepositoryAccessView } from '@lemniscate/contracts';
import { X509Certificate } from 'node:crypto';
import { ago, clock } from './exec-hosts';
import { count as countOf } from './table';

/** The hosts of a known_hosts text and how many keys it holds ("@cert-authority" lines included, comments not). */
export function knownHostsSummary(text: string | null): string {
  if (text === null) return 'none';
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const hosts = new Set<string>();
  for (const line of lines) {
    const fields = line.split(/\s+/);
    const field = (fields[0]?.startsWith('@') ? fields[1] : fields[0]) ?? '';
    // A hashed entry (`ssh-keygen -H`) does not say its host: it is counted, not named.
    for (const host of field.split(',')) hosts.add(host.startsWith('|') ? 'a hashed host' : host);
  }
  const keys = countOf(lines.length, 'host key');
  return hosts.size === 0 ? keys : `${keys} for ${[...hosts].join(', ')}`;
}

/** "given: 1 certificate (CN=Example Root CA, valid until 2030-01-01)", or "none". */
export function caSummary(pem: string | null): string {
  if (pem === null) return 'none';
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  const described = blocks.map((block) => {
    try {
      const certificate = new X509Certificate(block);
      const subject = certificate.subject.split('\n');
      const name = subject.find((part) => part.startsWith('CN=')) ?? subject[0] ?? 'no subject';
      return `${name}, valid until ${new Date(certificate.validTo).toISOString().slice(0, 10)}`;
    } catch {
      return 'not readable here';
    }
  });
  const count = countOf(blocks.length, 'certificate');
  return described.length === 0 ? 'given' : `given: ${count} (${described.join('; ')})`;
}

/** The credential as it may be shown: its kind and user name or key fingerprint, never the secret (the view has none). */
export function credentialSummary(view: Pick<RepositoryAccessView, 'credential' | 'transport'>): string {
  const c = view.credential;
  if (c === null) return view.transport === 'local' ? 'none (a local path on the exec-host is read without one)' : 'none';
  if (c.kind === 'https') return `https, user name ${c.username ?? '(none)'}; the password or token is sealed, never shown`;
  return `ssh key ${c.keyFingerprint ?? '(no fingerprint)'}; the key is sealed, never shown`;
}

const TRANSPORTS: Record<RepositoryAccessView['transport'], string> = {
  local: 'a local path on the exec-host',
  https: 'https',
  ssh: 'ssh',
};

/** `lemni repository show`: how the platform fetches the project's repository, as a short block. */
export function renderRepositoryAccess(project: string, view: RepositoryAccessView, now: number): string {
  const updated = view.updatedAt === null ? 'never (no access set)' : `${clock(view.updatedAt, now)} (${ago(view.updatedAt, now)})${view.updatedBy === null ? '' : ` by user ${view.updatedBy}`}`;
  const rows: [string, string][] = [
    ['Project', project],
    ['Source', view.repositorySource],
    ['Transport', TRANSPORTS[view.transport]],
    ['Default ref', view.defaultRef],
    ['Credential', credentialSummary(view)],
    ['Known hosts', knownHostsSummary(view.knownHosts)],
    ['CA', caSummary(view.caPem)],
    ['Updated', updated],
  ];
  return `${rows.map(([label, value]) => `${label.padEnd(12)} ${value}`).join('\n')}\n`;
}

/** Where `lemni agents --project` read the agents: the ref and, when the repository was read, its commit. */
export function describeAgentsSource(project: string, view: Pick<ProjectAgentsView, 'ref' | 'commit'>): string {
  return view.commit === null
    ? `The repository of project ${project} could not be read at ${view.ref}: no agent of its own is listed.`
    : `Agents defined in the repository of project ${project} at ${view.ref} (commit ${view.commit.slice(0, 12)}); general and explore are built in.`;
}
