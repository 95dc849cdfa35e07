// Export formats (T3). JSONL is exact: each line carries the entry's hashed payload text byte for
// byte, so the chain can be re-verified from the file alone. CSV is for spreadsheets.
import type { StoredEntry } from './audit-chain';

export type AuditExportFormat = 'jsonl' | 'csv';

/** Who a `user:<id>` actor is, resolved at export time; not part of the hashed entry. */
export interface ActorIdentity {
  email: string;
  displayName: string;
}

export function jsonlLine(entry: StoredEntry, identity: ActorIdentity | null = null): string {
  return (
    `{"seq":${entry.seq}` +
    `,"at":${JSON.stringify(entry.at.toISOString())}` +
    `,"actor":${JSON.stringify(entry.actor)}` +
    `,"kind":${JSON.stringify(entry.kind)}` +
    `,"projectId":${entry.projectId === null ? 'null' : JSON.stringify(entry.projectId)}` +
    `,"sessionId":${entry.sessionId === null ? 'null' : JSON.stringify(entry.sessionId)}` +
    `,"payload":${entry.payload}` +
    `,"prevHash":${JSON.stringify(entry.prevHash)}` +
    `,"hash":${JSON.stringify(entry.hash)}` +
    `,"actorIdentity":${identity ? JSON.stringify({ email: identity.email, displayName: identity.displayName }) : 'null'}}\n`
  );
}

export const CSV_HEADER = 'seq,at,actor,kind,project_id,session_id,payload,prev_hash,hash,actor_email,actor_name\r\n';

/**
 * One RFC 4180 field. A value a spreadsheet would run as a formula (leading = + - @, tab or CR) is
 * prefixed with an apostrophe: the log records what an agent proposed, and opening an export must
 * not execute it. JSONL keeps such values untouched.
 */
export function csvField(value: string | number | null): string {
  if (value === null) return '';
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvLine(entry: StoredEntry, identity: ActorIdentity | null = null): string {
  return (
    [entry.seq, entry.at.toISOString(), entry.actor, entry.kind, entry.projectId, entry.sessionId, entry.payload, entry.prevHash, entry.hash, identity?.email ?? null, identity?.displayName ?? null]
      .map(csvField)
      .join(',') + '\r\n'
  );
}
