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
