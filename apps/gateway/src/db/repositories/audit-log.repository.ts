import { Inject, Injectable } from '@nestjs/common';
import { and, asc, desc, eq, gt, gte, inArray, isNull, lt, lte, or, sql, type SQL } from 'drizzle-orm';
import { Pool } from 'pg';
import type { Db } from '../database';
import { auditChainHead, auditLog, auditPending, type AuditLogRow } from '../schema';
import { DB } from '../tokens';
import { pageSize, Repository } from './repository';

const MAIN_CHAIN = 'main';
/**
 * Advisory locks (docs/decisions/0013-audit-across-replicas.md). CHAINER: taken with a try by whoever
 * wants to chain, held for one round (one transaction); only would-be chainers touch it, so a failed
 * try always means another connection is chaining. ROUND: held exclusively by the chainer from the
 * start of its round to its commit; writers whose entries are queued wait for it shared
 * (`audit_chained()`, migration 0012, which hard-codes the same number).
 */
const CHAINER_LOCK = 7_341_205_119;
const ROUND_LOCK = 7_341_205_120;
/** The most queued entries, and about the most payload bytes, one round takes from the queue. */
const ROUND_ENTRIES = 2000;
const ROUND_BYTES = 4 * 1024 * 1024;
/**
 * PostgreSQL only: a chainer that stops talking in the middle of its round (a frozen process, a
 * lost network) has its connection ended by the server after this long, which releases the locks
 * and rolls the round back; the queued entries wait for the next chainer.
 */
export const CHAINER_LEASE_MS = 10_000;

interface ChainHead {
  seq: number;
  hash: string;
}

/** An entry ready for the chain: checked, payload as canonical text, and the key its writer gave it. */
export interface QueuedEntry {
  key: string;
  actor: string;
  kind: string;
  projectId: string | null;
  sessionId: string | null;
  payload: string;
}

/** Numbers and links `entries` from `head`, at time `at`: the rows to write, in the same order. */
export type ChainLinker = (head: ChainHead, at: Date, entries: QueuedEntry[]) => AuditLogRow[];

/** Where an entry landed in the chain. */
export interface ChainPlace {
  seq: number;
  at: Date;
  prevHash: string;
  hash: string;
}

export type ChainRound =
  /** This connection chained: the queue's oldest entries first (`fromQueue` of them), then its own. */
  | { chained: true; rows: AuditLogRow[]; fromQueue: number }
  /** Another connection was chaining; the entries given were queued in this transaction instead. */
  | { chained: false };

export interface AuditFilter {
  projectId?: string;
  /** Entries of any of these projects (a scoped reader); an empty list matches nothing. */
  projectIds?: string[];
  /** With `projectIds`: also the entries that belong to no project (sign-ins, user changes). */
  orUnscoped?: boolean;
  actor?: string;
  sessionId?: string;
  kinds?: string[];
  /** Inclusive lower bound on `at`. */
  from?: Date;
  /** Exclusive upper bound on `at`. */
  to?: Date;
}

export interface AuditPageRequest {
  order?: 'asc' | 'desc';
  /** Keyset cursor: entries after this seq in the chosen order. */
  after?: number;
  limit?: number;
}

/**
 * The audit table and its queue, insert and read only (the database refuses changes to the log).
 * Hashing is the chain's business (audit/audit-chain.ts); this class guarantees that one connection
 * at a time chains, that the queue is chained oldest first, and that a round is all or nothing.
 */
@Injectable()
export class AuditLogRepository extends Repository {
  /** The chainer's lease (PostgreSQL); undefined on PGlite, where one process holds the only connection. */
  chainerLeaseMs: number | undefined;

  constructor(@Inject(DB) db: Db) {
    super(db);
    this.chainerLeaseMs = (db as { $client?: unknown }).$client instanceof Pool ? CHAINER_LEASE_MS : undefined;
  }

  /**
   * One chaining round, in one transaction. When no other connection is chaining: takes the chainer
   * lock, links the oldest queued entries and then `own` onto the head (with `link`, at the
   * database's clock), moves the queued ones into the log, writes `own`, moves the head, commits.
   * When another connection is chaining: commits `own` to the queue instead (without waiting), for
   * that chainer's next round, and says so.
   */
  append(own: QueuedEntry[], link: ChainLinker): Promise<ChainRound> {
    return this.db.transaction(async (tx) => {
      const lease = this.chainerLeaseMs === undefined ? sql`` : sql`, set_config('idle_in_transaction_session_timeout', ${String(this.chainerLeaseMs)}, true) AS lease`;
      // Its own statement: the snapshot the next one reads the queue with must be taken after the
      // lock is held, or it could still show entries the previous chainer has just moved.
      const [lock] = rowsOf<{ got: boolean }>(
        await tx.execute(
          sql`SELECT l.got, CASE WHEN l.got THEN pg_advisory_xact_lock(${ROUND_LOCK})::text END AS round${lease} FROM (SELECT pg_try_advisory_xact_lock(${CHAINER_LOCK}) AS got OFFSET 0) l`,
        ),
      );
      if (!lock?.got) {
        if (own.length > 0) await insertQueued(tx as unknown as Db, own);
        return { chained: false };
      }
      const found = rowsOf<QueueRead>(
        await tx.execute(sql`
          SELECT h.seq AS head_seq, h.hash AS head_hash, (extract(epoch FROM h.now) * 1000)::int8 AS now_ms, q.id, q.entry_key, q.actor, q.kind, q.project_id, q.session_id, q.payload
          FROM (
            SELECT seq, hash, date_trunc('milliseconds', clock_timestamp()) AS now FROM audit_chain_head WHERE chain = ${MAIN_CHAIN} FOR UPDATE
          ) h
          LEFT JOIN LATERAL (
            SELECT w.* FROM (
              SELECT p.*, sum(octet_length(p.payload)) OVER (ORDER BY p.id) - octet_length(p.payload) AS before
              FROM audit_pending p ORDER BY p.id LIMIT ${ROUND_ENTRIES}
            ) w
            WHERE w.before < ${ROUND_BYTES}
          ) q ON true
          ORDER BY q.id`),
      );
      const head = found[0];
      if (!head) throw new Error('The audit chain head is missing: the database was not migrated.');
      const queued = found.filter((r) => r.id !== null);
      const entries: QueuedEntry[] = [
        ...queued.map((r) => ({ key: r.entry_key as string, actor: r.actor as string, kind: r.kind as string, projectId: r.project_id, sessionId: r.session_id, payload: r.payload as string })),
        ...own,
      ];
      if (entries.length === 0) return { chained: true, rows: [], fromQueue: 0 };
      // Milliseconds: the precision a JavaScript Date carries, so the hashed text round-trips.
      const now = new Date(Number(head.now_ms));
      const rows = link({ seq: Number(head.head_seq), hash: head.head_hash }, now, entries);
      const last = rows[rows.length - 1] as AuditLogRow;
      const moved = rows.slice(0, queued.length);
      const direct = rows.slice(queued.length);
      const [written] = rowsOf<{ moved: string | number; direct: string | number }>(
        await tx.execute(sql`
          WITH taken AS (
            DELETE FROM audit_pending WHERE id = ANY(${sql.param(queued.map((r) => Number(r.id)))}::bigint[])
            RETURNING id, entry_key, actor, kind, project_id, session_id, payload
          ), linked AS (
            SELECT * FROM unnest(
              ${sql.param(queued.map((r) => Number(r.id)))}::bigint[], ${sql.param(moved.map((r) => r.seq))}::bigint[],
              ${sql.param(moved.map((r) => r.prevHash))}::text[], ${sql.param(moved.map((r) => r.hash))}::text[]
            ) AS x(id, seq, prev_hash, hash)
          ), from_queue AS (
            INSERT INTO audit_log (seq, at, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key)
            SELECT linked.seq, ${now}, taken.actor, taken.kind, taken.project_id, taken.session_id, taken.payload, linked.prev_hash, linked.hash, taken.entry_key
            FROM taken JOIN linked USING (id)
            RETURNING 1
          ), from_caller AS (
            INSERT INTO audit_log (seq, at, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key)
            SELECT seq, ${now}, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key FROM unnest(
              ${sql.param(direct.map((r) => r.seq))}::bigint[], ${sql.param(direct.map((r) => r.actor))}::text[], ${sql.param(direct.map((r) => r.kind))}::text[],
              ${sql.param(direct.map((r) => r.projectId))}::text[], ${sql.param(direct.map((r) => r.sessionId))}::text[], ${sql.param(direct.map((r) => r.payload))}::text[],
              ${sql.param(direct.map((r) => r.prevHash))}::text[], ${sql.param(direct.map((r) => r.hash))}::text[], ${sql.param(direct.map((r) => r.entryKey))}::uuid[]
            ) AS x(seq, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key)
            RETURNING 1
          ), moved_head AS (
            UPDATE audit_chain_head SET seq = ${last.seq}, hash = ${last.hash} WHERE chain = ${MAIN_CHAIN} RETURNING 1
          )
          SELECT (SELECT count(*) FROM from_queue) AS moved, (SELECT count(*) FROM from_caller) AS direct, (SELECT count(*) FROM moved_head) AS head`),
      );
      // Only the chainer removes queued entries and it holds the lock, so every one read is still
      // there; anything else is a fault, and the round is rolled back rather than leave a gap.
      if (Number(written?.moved) !== moved.length || Number(written?.direct) !== direct.length) {
        throw new Error(`An audit chaining round wrote ${String(written?.moved)} of ${moved.length} queued and ${String(written?.direct)} of ${direct.length} new entries; it was rolled back.`);
      }
      return { chained: true, rows, fromQueue: queued.length };
    });
  }

  /** Commits entries to the queue, without taking any lock: for a writer that knows a chainer is busy. */
  async enqueue(entries: QueuedEntry[]): Promise<void> {
    if (entries.length > 0) await insertQueued(this.db, entries);
  }

  /**
   * Waits for a chaining round in progress (if any) to commit, then returns where each of `keys`
   * is in the chain; keys still queued (or unknown) are absent from the map.
   */
  async chained(keys: string[]): Promise<Map<string, ChainPlace>> {
    const rows = rowsOf<PlaceRead>(await this.db.execute(sql`SELECT entry_key, seq, (extract(epoch FROM at) * 1000)::int8 AS at_ms, prev_hash, hash FROM audit_chained(${sql.param(keys)}::uuid[])`));
    return places(rows);
  }

  /** Where `keys` are now, without waiting: those in the chain, and how many are still queued. */
  async locate(keys: string[]): Promise<{ chained: Map<string, ChainPlace>; queued: number }> {
    const rows = rowsOf<PlaceRead & { place: string }>(
      await this.db.execute(sql`
        SELECT 'log' AS place, entry_key, seq, (extract(epoch FROM at) * 1000)::int8 AS at_ms, prev_hash, hash FROM audit_log WHERE entry_key = ANY(${sql.param(keys)}::uuid[])
        UNION ALL
        SELECT 'queue', entry_key, NULL, NULL, NULL, NULL FROM audit_pending WHERE entry_key = ANY(${sql.param(keys)}::uuid[])`),
    );
    return { chained: places(rows.filter((r) => r.place === 'log')), queued: rows.filter((r) => r.place === 'queue').length };
  }

  /** True when another connection holds the chainer lock at this instant (a round is under way). */
  async chainerBusy(): Promise<boolean> {
    const [row] = rowsOf<{ free: boolean }>(await this.db.execute(sql`SELECT pg_try_advisory_xact_lock(${CHAINER_LOCK}) AS free`));
    return row?.free === false;
  }

  /** How many entries wait in the queue, and since when the oldest has. */
  async queue(): Promise<{ entries: number; oldest: Date | null }> {
    const [row] = await this.db.select({ entries: sql<number>`count(*)::int`, oldest: sql<Date | null>`min(${auditPending.queuedAt})`.mapWith(auditPending.queuedAt) }).from(auditPending);
    return { entries: Number(row?.entries ?? 0), oldest: row?.oldest ?? null };
  }

  async head(): Promise<ChainHead> {
    const [head] = await this.db.select({ seq: auditChainHead.seq, hash: auditChainHead.hash }).from(auditChainHead).where(eq(auditChainHead.chain, MAIN_CHAIN));
    if (!head) throw new Error('The audit chain head is missing: the database was not migrated.');
    return head;
  }

  /** Entries in (after, upTo], by seq: one page of a chain walk. */
  range(after: number, upTo: number, limit: number): Promise<AuditLogRow[]> {
    return this.db
      .select()
      .from(auditLog)
      .where(and(gt(auditLog.seq, after), lte(auditLog.seq, upTo)))
      .orderBy(asc(auditLog.seq))
      .limit(limit);
  }

  /**
   * Entries past the head, read in one statement (one snapshot): a chaining round inserts its rows
   * and moves the head together, so any such entry was written around the chain.
   */
  async beyondHead(): Promise<number | undefined> {
    const [row] = await this.db
      .select({ seq: auditLog.seq })
      .from(auditLog)
      .where(gt(auditLog.seq, sql`(SELECT ${auditChainHead.seq} FROM ${auditChainHead} WHERE ${auditChainHead.chain} = ${MAIN_CHAIN})`))
      .orderBy(asc(auditLog.seq))
      .limit(1);
    return row?.seq;
  }

  list(filter: AuditFilter, page: AuditPageRequest = {}): Promise<AuditLogRow[]> {
    const conditions = filterConditions(filter);
    if (!conditions) return Promise.resolve([]);
    const descending = page.order === 'desc';
    if (page.after !== undefined) conditions.push(descending ? lt(auditLog.seq, page.after) : gt(auditLog.seq, page.after));
    return this.db
      .select()
      .from(auditLog)
      .where(and(...conditions))
      .orderBy(descending ? desc(auditLog.seq) : asc(auditLog.seq))
      .limit(pageSize(page.limit, 100, 5000));
  }
}

/** Undefined when the filter can match nothing (an empty project scope). */
function filterConditions(filter: AuditFilter): SQL[] | undefined {
  const conditions: SQL[] = [];
  if (filter.projectId !== undefined) conditions.push(eq(auditLog.projectId, filter.projectId));
  if (filter.projectIds !== undefined) {
    const inScope = filter.projectIds.length > 0 ? inArray(auditLog.projectId, filter.projectIds) : undefined;
    const unscoped = filter.orUnscoped ? isNull(auditLog.projectId) : undefined;
    if (!inScope && !unscoped) return undefined;
    conditions.push(inScope && unscoped ? (or(inScope, unscoped) as SQL) : ((inScope ?? unscoped) as SQL));
  }
  if (filter.actor !== undefined) conditions.push(eq(auditLog.actor, filter.actor));
  if (filter.sessionId !== undefined) conditions.push(eq(auditLog.sessionId, filter.sessionId));
  if (filter.kinds !== undefined) {
    if (filter.kinds.length === 0) return undefined;
    conditions.push(inArray(auditLog.kind, filter.kinds));
  }
  if (filter.from !== undefined) conditions.push(gte(auditLog.at, filter.from));
  if (filter.to !== undefined) conditions.push(lt(auditLog.at, filter.to));
  return conditions;
}

interface QueueRead extends Record<string, unknown> {
  head_seq: string | number;
  head_hash: string;
  now_ms: string | number;
  id: string | number | null;
  entry_key: string | null;
  actor: string | null;
  kind: string | null;
  project_id: string | null;
  session_id: string | null;
  payload: string | null;
}

interface PlaceRead extends Record<string, unknown> {
  entry_key: string;
  seq: string | number;
  at_ms: string | number;
  prev_hash: string;
  hash: string;
}

/** The rows of a raw statement: both drivers (pg, PGlite) answer with `{ rows }`. */
function rowsOf<T>(result: unknown): T[] {
  return (result as { rows: T[] }).rows;
}

function places(rows: PlaceRead[]): Map<string, ChainPlace> {
  return new Map(rows.map((r) => [r.entry_key, { seq: Number(r.seq), at: new Date(Number(r.at_ms)), prevHash: r.prev_hash, hash: r.hash }]));
}

/** One multi-row INSERT: rows get ids in the order given, which is the order they will be chained in. */
async function insertQueued(db: Db, entries: QueuedEntry[]): Promise<void> {
  await db.insert(auditPending).values(
    entries.map((e) => ({ entryKey: e.key, actor: e.actor, kind: e.kind, projectId: e.projectId, sessionId: e.sessionId, payload: e.payload })),
  );
}
