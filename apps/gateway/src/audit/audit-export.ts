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

/**
 * The CSV columns: the entry's own fields, who the actor is, then the payload flattened into the
 * columns a SIEM filters on (the tool, its command or path, the policy's decision and rule, the
 * approval and its answer, the exit code) and `details` for the rest, as `key=value` pairs with
 * dotted keys. JSONL keeps the payload exactly as hashed; CSV is for reading and filtering.
 */
export const CSV_COLUMNS = [
  'seq',
  'at',
  'actor',
  'actor_email',
  'actor_name',
  'kind',
  'project_id',
  'session_id',
  'tool',
  'command',
  'path',
  'decision',
  'rule',
  'reason',
  'approval_id',
  'answer',
  'exit_code',
  'details',
  'prev_hash',
  'hash',
] as const;

export const CSV_HEADER = `${CSV_COLUMNS.join(',')}\r\n`;

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

type Flat = Record<'tool' | 'command' | 'path' | 'decision' | 'rule' | 'reason' | 'approval_id' | 'answer' | 'exit_code' | 'details', string | number | null>;

/** Where each flattened column is read from in a payload (the first path present wins); the rest goes to `details`. */
const FROM: [keyof Flat, string[][]][] = [
  ['tool', [['name']]],
  ['command', [['arguments', 'command'], ['command']]],
  ['path', [['arguments', 'path'], ['path']]],
  ['decision', [['effect']]],
  ['rule', [['rule']]],
  ['reason', [['reason']]],
  ['approval_id', [['approvalId']]],
  ['answer', [['answer']]],
  ['exit_code', [['exitCode']]],
];

function scalar(value: unknown): string | number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string' || typeof value === 'number') return value;
  return JSON.stringify(value);
}

/** The payload's columns; a payload that is not an object goes whole into `details`. */
export function flattenPayload(payloadText: string): Flat {
  const flat: Flat = { tool: null, command: null, path: null, decision: null, rule: null, reason: null, approval_id: null, answer: null, exit_code: null, details: null };
  let payload: unknown;
  try {
    payload = JSON.parse(payloadText);
  } catch {
    return { ...flat, details: payloadText };
  }
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return { ...flat, details: scalar(payload) };
  const used = new Set<string>();
  for (const [column, paths] of FROM) {
    for (const keys of paths) {
      let at: unknown = payload;
      for (const k of keys) at = at !== null && typeof at === 'object' && !Array.isArray(at) ? (at as Record<string, unknown>)[k] : undefined;
      if (at === undefined || (typeof at === 'object' && at !== null)) continue;
      flat[column] = scalar(at);
      used.add(keys.join('.'));
      break;
    }
  }
  const rest: string[] = [];
  const walk = (value: unknown, prefix: string) => {
    if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
      for (const [k, v] of Object.entries(value)) walk(v, prefix === '' ? k : `${prefix}.${k}`);
    } else if (prefix !== '' && !used.has(prefix)) rest.push(`${prefix}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  };
  walk(payload, '');
  flat.details = rest.length > 0 ? rest.join('; ') : null;
  return flat;
}

export function csvLine(entry: StoredEntry, identity: ActorIdentity | null = null): string {
  const flat = flattenPayload(entry.payload);
  const values: Record<(typeof CSV_COLUMNS)[number], string | number | null> = {
    seq: entry.seq,
    at: entry.at.toISOString(),
    actor: entry.actor,
    actor_email: identity?.email ?? null,
    actor_name: identity?.displayName ?? null,
    kind: entry.kind,
    project_id: entry.projectId,
    session_id: entry.sessionId,
    ...flat,
    prev_hash: entry.prevHash,
    hash: entry.hash,
  };
  return CSV_COLUMNS.map((c) => csvField(values[c])).join(',') + '\r\n';
}
