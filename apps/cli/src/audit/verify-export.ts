import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { AUDIT_GENESIS_HASH, auditEntryText } from '@lemniscate/contracts';

/**
 * An exported audit file (`lemni audit export`, JSON lines) verified offline, without the gateway:
 * every entry's hash recomputed from its own content and the hash before it, every link between
 * consecutive entries followed, and, with an anchor (a head printed by `lemni audit verify`), the
 * entry at the anchor's number compared with it. A filtered export has gaps: the links across them
 * cannot be checked from the file, and the result says how many there were.
 */
export interface ExportVerification {
  ok: boolean;
  entries: number;
  firstSeq: number | null;
  lastSeq: number | null;
  lastHash: string | null;
  /** Places where the export skips entries (a filter): the links across them were not checked. */
  gaps: number;
  /** Whether the anchor's entry was in the file and matched (null without an anchor). */
  anchorChecked: boolean | null;
  /** The first problem, as a sentence naming the line and the entry. */
  problem: string | null;
}

interface Line {
  seq: number;
  at: string;
  actor: string;
  kind: string;
  projectId: string | null;
  sessionId: string | null;
  prevHash: string;
  hash: string;
}

const HEX64 = /^[0-9a-f]{64}$/;

/**
 * The payload's text exactly as exported: between the first `,"payload":` and the last `,"prevHash":"`.
 * Neither sequence can occur inside a JSON string before the payload (quotes are escaped there), and
 * anything after the payload's own text ends with the entry's prevHash, hash and identity.
 */
function payloadText(line: string): string | null {
  const start = line.indexOf(',"payload":');
  const end = line.lastIndexOf(',"prevHash":"');
  if (start < 0 || end < start) return null;
  return line.slice(start + ',"payload":'.length, end);
}

function fields(value: unknown): Line | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'is not a JSON object';
  const v = value as Record<string, unknown>;
  if (!Number.isSafeInteger(v.seq) || (v.seq as number) < 1) return 'has no entry number ("seq")';
  if (typeof v.at !== 'string' || Number.isNaN(Date.parse(v.at))) return 'has no valid time ("at")';
  if (typeof v.actor !== 'string' || typeof v.kind !== 'string') return 'has no "actor" or "kind"';
  if (!(v.projectId === null || typeof v.projectId === 'string') || !(v.sessionId === null || typeof v.sessionId === 'string')) return 'has an invalid "projectId" or "sessionId"';
  if (typeof v.prevHash !== 'string' || !HEX64.test(v.prevHash) || typeof v.hash !== 'string' || !HEX64.test(v.hash)) return 'has no SHA-256 "prevHash" and "hash"';
  return v as unknown as Line;
}

export interface VerifyOptions {
  anchor?: { seq: number; hash: string } | undefined;
  /** The export was filtered: missing entries between two are expected, and the links across them are not checked. */
  filtered?: boolean;
  /**
   * The file continues the chain after this entry (the last of an archive, or of an earlier export):
   * its first entry must be the next one and link to this hash.
   */
  after?: { seq: number; hash: string } | undefined;
}

export async function verifyExportFile(file: string, options: VerifyOptions = {}): Promise<ExportVerification> {
  const lines = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
  return verifyExportLines(lines, options);
}

export async function verifyExportLines(lines: AsyncIterable<string> | Iterable<string>, { anchor, filtered = false, after }: VerifyOptions = {}): Promise<ExportVerification> {
  const result: ExportVerification = { ok: true, entries: 0, firstSeq: null, lastSeq: null, lastHash: null, gaps: 0, anchorChecked: anchor ? false : null, problem: null };
  const fail = (problem: string): ExportVerification => ({ ...result, ok: false, problem });
  let number = 0;
  for await (const raw of lines) {
    number += 1;
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return fail(`Line ${number} is not JSON: the file is not an audit export in JSON lines, or it was cut.`);
    }
    const entry = fields(parsed);
    if (typeof entry === 'string') return fail(`Line ${number} ${entry}: it is not an audit entry as exported.`);
    const payload = payloadText(line);
    if (payload === null) return fail(`Line ${number} (entry ${entry.seq}) does not carry its payload as exported.`);
    if (result.lastSeq !== null && entry.seq <= result.lastSeq) {
      return fail(`Entry ${entry.seq} (line ${number}) comes after entry ${result.lastSeq}: the entries were reordered or repeated.`);
    }
    const text = auditEntryText({ seq: entry.seq, at: new Date(entry.at), actor: entry.actor, kind: entry.kind, projectId: entry.projectId, sessionId: entry.sessionId, payload });
    const hash = createHash('sha256').update(entry.prevHash, 'utf8').update(text, 'utf8').digest('hex');
    if (new Date(entry.at).toISOString() !== entry.at || hash !== entry.hash) {
      return fail(`Entry ${entry.seq} (line ${number}) was altered: its hash does not match its content.`);
    }
    if (entry.seq === 1 && entry.prevHash !== AUDIT_GENESIS_HASH) return fail(`Entry 1 (line ${number}) does not start the chain: its previous hash is not the genesis hash.`);
    if (result.lastSeq === null && after) {
      if (entry.seq !== after.seq + 1)
        return fail(`Entry ${entry.seq} (line ${number}) is the first in the file, but the file should continue the chain after entry ${after.seq}: it should start at entry ${after.seq + 1}.`);
      if (entry.prevHash !== after.hash)
        return fail(`Entry ${entry.seq} (line ${number}) does not follow entry ${after.seq}: the hash it records for its predecessor is not the one given for entry ${after.seq}.`);
    } else if (result.lastSeq === null && entry.seq > 1 && !filtered) {
      return fail(
        `Entry ${entry.seq} (line ${number}) is the first in the file: ${entry.seq === 2 ? 'entry 1 is' : `entries 1 to ${entry.seq - 1} are`} missing (removed, or the export was filtered or started later: pass --filtered to check it entry by entry).`,
      );
    }
    if (result.lastSeq !== null) {
      if (entry.seq === result.lastSeq + 1) {
        if (entry.prevHash !== result.lastHash) return fail(`Entry ${entry.seq} (line ${number}) does not follow entry ${result.lastSeq}: an entry between them was removed, replaced or slipped in.`);
      } else if (filtered) result.gaps += 1;
      else {
        const missing = entry.seq - result.lastSeq - 1;
        return fail(
          `Entry ${entry.seq} (line ${number}) follows entry ${result.lastSeq}: ${missing === 1 ? `entry ${result.lastSeq + 1} is` : `entries ${result.lastSeq + 1} to ${entry.seq - 1} are`} missing (removed, or the export was filtered: pass --filtered to check a filtered export entry by entry).`,
        );
      }
    }
    if (anchor && entry.seq === anchor.seq) {
      if (entry.hash !== anchor.hash) return fail(`Entry ${entry.seq} (line ${number}) is not the anchor's entry: the log was rewritten since the anchor was taken.`);
      result.anchorChecked = true;
    }
    result.entries += 1;
    result.firstSeq ??= entry.seq;
    result.lastSeq = entry.seq;
    result.lastHash = entry.hash;
  }
  if (result.entries === 0) return fail('The file holds no audit entry.');
  if (anchor && !result.anchorChecked) return fail(`The file does not hold entry ${anchor.seq}, the anchor's: export a range that includes it to check it.`);
  return result;
}
