/** The `prev_hash` of the audit chain's first entry. */
export const AUDIT_GENESIS_HASH = '0'.repeat(64);

/** An audit entry as hashed: `payload` is its canonical JSON text, kept byte for byte. */
export interface AuditChainEntry {
  seq: number;
  at: Date;
  actor: string;
  kind: string;
  projectId: string | null;
  sessionId: string | null;
  payload: string;
}

/**
 * The canonical JSON of an audit entry (RFC 8785 for these fields): keys sorted, `at` as an ISO-8601
 * UTC string with milliseconds, the payload's own canonical text in place. An entry's hash is
 * hex(sha256(prev_hash || this text)), both as UTF-8; the gateway writes it, and an exported file is
 * verified with it offline (`lemni audit verify --file`).
 */
export function auditEntryText(entry: AuditChainEntry): string {
  return (
    `{"actor":${JSON.stringify(entry.actor)}` +
    `,"at":${JSON.stringify(entry.at.toISOString())}` +
    `,"kind":${JSON.stringify(entry.kind)}` +
    `,"payload":${entry.payload}` +
    `,"projectId":${entry.projectId === null ? 'null' : JSON.stringify(entry.projectId)}` +
    `,"seq":${entry.seq}` +
    `,"sessionId":${entry.sessionId === null ? 'null' : JSON.stringify(entry.sessionId)}}`
  );
}

/**
 * What an audit archive's signature covers (retention, T2): the archive file (its name and SHA-256),
 * the range of entries it holds and the links at both ends, the chain's head when it was made, and
 * the signing key. Signed with Ed25519 over `auditArchiveManifestText`; the manifest sits beside the
 * archive as `<archive>.sig.json` with `signature` (base64) added.
 */
export interface AuditArchiveManifest {
  format: 'lemniscate-audit-archive/1';
  /** The archive's file name (no directory). */
  file: string;
  sha256: string;
  entries: number;
  firstSeq: number;
  /** The hash before the first entry: the genesis hash, or the last hash of the archive before. */
  firstPrevHash: string;
  lastSeq: number;
  lastHash: string;
  /** The chain's head when the archive was made. */
  headSeq: number;
  headHash: string;
  archivedAt: string;
  /** SHA-256 of the public key's DER (SPKI), hex. */
  keyId: string;
  /** The signing key's public half, PEM (SPKI). */
  publicKey: string;
}

/** The manifest's canonical text (keys sorted, no whitespace), what the signature covers. */
export function auditArchiveManifestText(manifest: AuditArchiveManifest): string {
  const record = manifest as unknown as Record<string, unknown>;
  return `{${Object.keys(record)
    .filter((k) => k !== 'signature')
    .sort()
    .map((k) => `${JSON.stringify(k)}:${JSON.stringify(record[k])}`)
    .join(',')}}`;
}
