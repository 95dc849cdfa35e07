// What a sink receives for one audit entry. `json` is the export's JSONL line (the hashed payload
// text byte for byte, so a receiver can re-verify the chain); `ocsf` maps the entry onto the Open
// Cybersecurity Schema Framework 1.1: sign-ins to Authentication (3002), everything else to API
// Activity (6003), with the entry itself under `unmapped`.
import type { StoredEntry } from '../audit/audit-chain';
import { jsonlLine, type ActorIdentity } from '../audit/audit-export';

export type SinkFormat = 'json' | 'ocsf';

const OCSF_VERSION = '1.1.0';
const PRODUCT = { name: 'Lemniscate', vendor_name: 'Lemniscate', feature: { name: 'audit log' } };

/** One record as text (no trailing newline). */
export function formatRecord(entry: StoredEntry, identity: ActorIdentity | null, format: SinkFormat): string {
  return format === 'json' ? jsonlLine(entry, identity).slice(0, -1) : JSON.stringify(ocsfRecord(entry, identity));
}

/** The same record with its payload replaced by its size, for a transport that cannot carry it whole. */
export function shortenedRecord(entry: StoredEntry, identity: ActorIdentity | null, format: SinkFormat): string {
  const bytes = Buffer.byteLength(entry.payload, 'utf8');
  return formatRecord({ ...entry, payload: JSON.stringify({ truncated: true, bytes }) }, identity, format);
}

interface OcsfClass {
  class_uid: number;
  class_name: string;
  category_uid: number;
  category_name: string;
  activity_id: number;
  activity_name: string;
}

/** OCSF's activity of an entry kind (`policy.publish` → Update). */
export function ocsfClass(kind: string): OcsfClass {
  if (kind.startsWith('auth.')) {
    const logoff = /\.(logout|sign_out|signout)$/.test(kind);
    const logon = /\.(login|login_failed|login_throttled|token_rejected)$/.test(kind);
    const [activity_id, activity_name] = logoff ? [2, 'Logoff'] : logon ? [1, 'Logon'] : [99, 'Other'];
    return { class_uid: 3002, class_name: 'Authentication', category_uid: 3, category_name: 'Identity & Access Management', activity_id, activity_name };
  }
  const last = kind.slice(kind.lastIndexOf('.') + 1);
  const [activity_id, activity_name] = /^(create|created|start|started|proposed|instruction|request|requested|member_add|registered|granted|bootstrap_admin|token_created)$/.test(last)
    ? [1, 'Create']
    : /^(export|verify|listed|read|view)$/.test(last)
      ? [2, 'Read']
      : /^(update|publish|rollback|decision|answer|answered|result|configured|prepared|finished|ended|drained|undrained|returned|repository_access_set|compaction|reached|blocked|password_changed)$/.test(
            last,
          )
        ? [3, 'Update']
        : /^(revoke|stop|member_remove|expired|repository_access_cleared|reverted|orphaned|lost|destroy_failed|token_revoked)$/.test(last)
          ? [4, 'Delete']
          : [99, 'Other'];
  return { class_uid: 6003, class_name: 'API Activity', category_uid: 6, category_name: 'Application Activity', activity_id, activity_name };
}

/** The payload's text as JSON: its fields when it is an object, else `{}` (and the parsed value). */
function payloadOf(text: string): { value: unknown; fields: Record<string, unknown> } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = text;
  }
  return { value, fields: value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {} };
}

/** A refusal or a failure (syslog's notice severity, OCSF's Failure status): by its kind, a denying decision, or `ok: false`. */
export function entryFailed(kind: string, payloadText: string): boolean {
  const { fields } = payloadOf(payloadText);
  return /failed|denied|refused|rejected|throttled|blocked|lost|unavailable/.test(kind) || fields.decision === 'deny' || fields.ok === false;
}

export function ocsfRecord(entry: StoredEntry, identity: ActorIdentity | null): Record<string, unknown> {
  const cls = ocsfClass(entry.kind);
  const { value: payload, fields } = payloadOf(entry.payload);
  const bad = entryFailed(entry.kind, entry.payload);
  const user = {
    uid: entry.actor,
    ...(identity ? { name: identity.displayName, email_addr: identity.email } : {}),
  };
  const ip = typeof fields.ip === 'string' ? fields.ip : typeof fields.address === 'string' ? fields.address : undefined;
  const record: Record<string, unknown> = {
    ...cls,
    type_uid: cls.class_uid * 100 + cls.activity_id,
    type_name: `${cls.class_name}: ${cls.activity_name}`,
    time: entry.at.getTime(),
    severity_id: bad ? 3 : 1,
    severity: bad ? 'Medium' : 'Informational',
    status_id: bad ? 2 : 1,
    status: bad ? 'Failure' : 'Success',
    message: `${entry.kind} by ${identity?.email ?? entry.actor}`,
    actor: { user },
    metadata: {
      version: OCSF_VERSION,
      product: PRODUCT,
      uid: String(entry.seq),
      sequence: entry.seq,
      log_name: 'audit',
      ...(entry.sessionId ? { correlation_uid: entry.sessionId } : {}),
    },
    unmapped: {
      seq: entry.seq,
      kind: entry.kind,
      projectId: entry.projectId,
      sessionId: entry.sessionId,
      payload,
      prevHash: entry.prevHash,
      hash: entry.hash,
    },
  };
  if (cls.class_uid === 3002) {
    const email = typeof fields.email === 'string' ? fields.email : identity?.email;
    record.user = email ? { email_addr: email, ...(identity ? { uid: entry.actor, name: identity.displayName } : {}) } : user;
    if (ip) record.src_endpoint = { ip };
  } else {
    record.api = { operation: entry.kind, service: { name: 'lemniscate-gateway' } };
    record.src_endpoint = ip ? { ip } : {};
    if (entry.projectId) record.resources = [{ uid: entry.projectId, type: 'project' }];
  }
  return record;
}
