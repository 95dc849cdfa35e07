import { Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import { Readable } from 'node:stream';
import { AppError, ErrorCode } from '../common/errors';
import { AuditLogRepository, type AuditFilter, type AuditPageRequest } from '../db/repositories/audit-log.repository';
import { withDbRetry } from '../db/retry';
import type { AuditLogRow } from '../db/schema';
import { CanonicalJsonError, canonicalJson, chainHash, ChainVerifier, type ChainAnchor, type ChainBreak, type ChainEntry, type ChainProblem } from './audit-chain';
import { CSV_HEADER, csvLine, jsonlLine, type ActorIdentity, type AuditExportFormat } from './audit-export';

/** Resolves actors (`user:<id>`) to people for an export page; actors it does not know are left out. */
type IdentityResolver = (actors: string[]) => Promise<Map<string, ActorIdentity>>;

export type { AuditFilter, AuditPageRequest } from '../db/repositories/audit-log.repository';

interface AuditAppend {
  /** Who acted: a user id, `system`, or an agent's label; the app decides the convention. */
  actor: string;
  /** What happened, dotted lower case: `session.instruction`, `policy.publish`, `auth.login_failed`. */
  kind: string;
  projectId?: string | null;
  sessionId?: string | null;
  /** Any JSON value; it is stored and hashed in canonical form. */
  payload: unknown;
}

export interface AuditEntry {
  seq: number;
  at: string;
  actor: string;
  kind: string;
  projectId: string | null;
  sessionId: string | null;
  payload: unknown;
  prevHash: string;
  hash: string;
}

export type AuditVerification = { ok: true; checked: number; lastSeq: number; lastHash: string } | { ok: false; checked: number; seq: number; problem: ChainProblem; message: string };

/**
 * A guard for the table, not a format: command output should arrive as a bounded digest (T1), but a
 * proposed Write carries the whole file, and a lock file of a few megabytes must still be recorded.
 */
export const MAX_PAYLOAD_BYTES = 16 * 1024 * 1024;
const KIND = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$/;
const VERIFY_PAGE = 5000;
const MAX_BATCH_ENTRIES = 500;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
const EXPORT_PAGE = 1000;

/**
 * The audit log (T1–T3): append, verify, read with filters, export as a stream. Appends are
 * serialised on the chain head (see AuditLogRepository.append), so concurrent requests and
 * replicas never fork the chain.
 */
@Injectable()
export class AuditService implements BeforeApplicationShutdown {
  private readonly logger = new Logger('Audit');

  constructor(private readonly log: AuditLogRepository) {}

  private readonly queue: PendingAppend[] = [];
  private flushing: Promise<void> | undefined;

  /**
   * Records one entry and resolves once it is committed. Appends arriving while a write is in
   * flight are written together in the next transaction: one commit (one disk flush) for many
   * entries, in the order they were called, instead of each waiting its turn for the lock.
   */
  async append(input: AuditAppend): Promise<AuditEntry> {
    const entry = prepare(input);
    const row = await new Promise<AuditLogRow>((resolve, reject) => {
      this.queue.push({ entry, bytes: Buffer.byteLength(entry.payload, 'utf8'), resolve, reject });
      this.flushing ??= this.flush();
    });
    return toEntry(row);
  }

  /** Resolves once every append already called is committed (or has failed). */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  /** Runs before the database closes (its module closes it on application shutdown). */
  async beforeApplicationShutdown(): Promise<void> {
    await this.drain();
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = takeBatch(this.queue);
        try {
          const rows = await this.writeBatch(batch);
          batch.forEach((pending, i) => pending.resolve(rows[i] as AuditLogRow));
        } catch (error) {
          for (const pending of batch) pending.reject(error);
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  /**
   * Writes one batch, retrying across a short database outage (db/retry.ts). The batch is chained
   * afresh from the head on every attempt, so a retry links to whatever the chain holds by then; and
   * before a retry, the rows of earlier attempts are looked up by their last hash: when the connection
   * broke after the commit had landed, that attempt is the batch, and it is not written twice. The
   * next batch waits for this one, so entries keep the order they were appended in.
   */
  private async writeBatch(batch: PendingAppend[]): Promise<AuditLogRow[]> {
    const unknown: AuditLogRow[][] = [];
    return withDbRetry(
      async () => {
        for (const attempt of unknown) {
          if (await this.landed(attempt)) return attempt;
        }
        unknown.length = 0;
        return this.log.append((head, now) => {
          let prevHash = head.hash;
          const rows = batch.map((pending, i) => {
            const entry = { ...pending.entry, seq: head.seq + 1 + i, at: now };
            const hash = chainHash(prevHash, entry);
            const row = { ...entry, prevHash, hash };
            prevHash = hash;
            return row;
          });
          unknown.push(rows);
          return rows;
        });
      },
      {
        onRetry: ({ attempt, reason, delayMs }) => this.logger.warn({ attempt, reason, delayMs, entries: batch.length }, 'audit append: the database is unreachable; retrying'),
      },
    );
  }

  /** True when the last row of `rows` is in the log with the same hash (the same seq, time and content). */
  private async landed(rows: AuditLogRow[]): Promise<boolean> {
    const last = rows[rows.length - 1];
    if (!last) return false;
    const [stored] = await this.log.range(last.seq - 1, last.seq, 1);
    return stored?.hash === last.hash;
  }

  /**
   * Walks the whole chain in pages, in constant memory, and names the first entry at which it stops
   * holding: altered, removed, reordered, cut off at the end, or written around the chain. With an
   * anchor (the `lastSeq`/`lastHash` of an earlier verification, kept outside the database), it also
   * catches a log rewritten and re-hashed from end to end by someone holding the database.
   */
  async verify(anchor?: ChainAnchor): Promise<AuditVerification> {
    let verifier: ChainVerifier;
    try {
      verifier = new ChainVerifier(anchor);
    } catch (error) {
      throw new AppError(ErrorCode.ValidationFailed, (error as Error).message, { field: 'anchor' });
    }
    const head = await this.log.head();
    let after = 0;
    while (after < head.seq) {
      const rows = await this.log.range(after, head.seq, VERIFY_PAGE);
      if (rows.length === 0) break;
      for (const row of rows) {
        const problem = verifier.check(row);
        if (problem) return broken(verifier, problem);
      }
      after = (rows[rows.length - 1] as AuditLogRow).seq;
    }
    const end = verifier.finish(head);
    if (end) return broken(verifier, end);
    const intruder = await this.log.beyondHead();
    if (intruder !== undefined) {
      return broken(verifier, {
        seq: intruder,
        problem: 'inserted',
        message: `Entry ${intruder} was inserted around the chain: it lies beyond the last entry the log recorded (${head.seq}).`,
      });
    }
    return { ok: true, checked: verifier.checked, lastSeq: verifier.lastSeq, lastHash: verifier.lastHash };
  }

  async list(filter: AuditFilter = {}, page: AuditPageRequest = {}): Promise<AuditEntry[]> {
    checkFilter(filter);
    const rows = await this.log.list(filter, page);
    return rows.map(toEntry);
  }

  /**
   * The matching entries, oldest first, as chunks of text: read a page at a time, so exporting the
   * whole log holds one page in memory. The header (CSV) comes first even when nothing matches.
   */
  async *export(filter: AuditFilter, format: AuditExportFormat, identify: IdentityResolver = async () => new Map()): AsyncGenerator<string> {
    checkFilter(filter);
    const line = format === 'csv' ? csvLine : format === 'jsonl' ? jsonlLine : undefined;
    if (!line) throw new AppError(ErrorCode.ValidationFailed, `The export format "${String(format)}" is not one of jsonl, csv.`, { field: 'format' });
    if (format === 'csv') yield CSV_HEADER;
    let after: number | undefined;
    for (;;) {
      const rows = await this.log.list(filter, { order: 'asc', after, limit: EXPORT_PAGE });
      if (rows.length === 0) return;
      const people = await identify([...new Set(rows.map((r) => r.actor))]);
      yield rows.map((r) => line(r, people.get(r.actor) ?? null)).join('');
      after = (rows[rows.length - 1] as AuditLogRow).seq;
      if (rows.length < EXPORT_PAGE) return;
    }
  }

  /** `export` as a Node stream, with back-pressure: pipe it into an HTTP response. */
  exportStream(filter: AuditFilter, format: AuditExportFormat, identify?: IdentityResolver): Readable {
    return Readable.from(this.export(filter, format, identify), { objectMode: false });
  }
}

type PreparedEntry = Omit<ChainEntry, 'seq' | 'at'>;

interface PendingAppend {
  entry: PreparedEntry;
  bytes: number;
  resolve: (row: AuditLogRow) => void;
  reject: (error: unknown) => void;
}

function takeBatch(queue: PendingAppend[]): PendingAppend[] {
  let count = 0;
  let bytes = 0;
  while (count < queue.length && count < MAX_BATCH_ENTRIES) {
    const next = (queue[count] as PendingAppend).bytes;
    if (count > 0 && bytes + next > MAX_BATCH_BYTES) break;
    bytes += next;
    count += 1;
  }
  return queue.splice(0, count);
}

function prepare(input: AuditAppend): PreparedEntry {
  const actor = requireText('actor', input.actor, 200);
  const kind = requireText('kind', input.kind, 100);
  if (!KIND.test(kind)) {
    throw new AppError(ErrorCode.ValidationFailed, `The audit kind "${kind}" must be dotted lower-case words, like "session.stop".`, { field: 'kind' });
  }
  const projectId = optionalText('projectId', input.projectId);
  const sessionId = optionalText('sessionId', input.sessionId);
  let payload: string;
  try {
    payload = canonicalJson(input.payload === undefined ? null : input.payload);
  } catch (error) {
    if (error instanceof CanonicalJsonError) {
      throw new AppError(ErrorCode.ValidationFailed, `The audit payload cannot be recorded: ${error.message.replace(/^\$/, 'the payload')}`, { field: 'payload' });
    }
    throw error;
  }
  if (Buffer.byteLength(payload, 'utf8') > MAX_PAYLOAD_BYTES) {
    throw new AppError(ErrorCode.ValidationFailed, `The audit payload is larger than ${MAX_PAYLOAD_BYTES} bytes; record a digest of large output instead.`, {
      field: 'payload',
    });
  }
  return { actor, kind, projectId, sessionId, payload };
}

function broken(verifier: ChainVerifier, problem: ChainBreak): AuditVerification {
  return { ok: false, checked: verifier.checked, ...problem };
}

function toEntry(row: AuditLogRow): AuditEntry {
  return {
    seq: row.seq,
    at: row.at.toISOString(),
    actor: row.actor,
    kind: row.kind,
    projectId: row.projectId,
    sessionId: row.sessionId,
    payload: JSON.parse(row.payload) as unknown,
    prevHash: row.prevHash,
    hash: row.hash,
  };
}

function requireText(field: string, value: unknown, max: number): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new AppError(ErrorCode.ValidationFailed, `The audit ${field} is required and must be a non-empty string.`, { field });
  }
  if (value.length > max) throw new AppError(ErrorCode.ValidationFailed, `The audit ${field} is longer than ${max} characters.`, { field });
  // The database stores text as UTF-8 without NUL: anything else would be stored differently from
  // what was hashed, and the entry would later read as altered.
  if (value.includes('\u0000') || LONE_SURROGATE.test(value)) {
    throw new AppError(ErrorCode.ValidationFailed, `The audit ${field} contains a NUL character or a lone surrogate, which cannot be stored as written.`, { field });
  }
  return value;
}

function optionalText(field: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  return requireText(field, value, 200);
}

function checkFilter(filter: AuditFilter): void {
  for (const key of ['from', 'to'] as const) {
    const value = filter[key];
    if (value !== undefined && Number.isNaN(value.getTime())) {
      throw new AppError(ErrorCode.ValidationFailed, `The audit filter "${key}" is not a valid date.`, { field: key });
    }
  }
  if (filter.from && filter.to && filter.from.getTime() > filter.to.getTime()) {
    throw new AppError(ErrorCode.ValidationFailed, 'The audit filter "from" is later than "to"; the range would match nothing.', { field: 'from' });
  }
}
