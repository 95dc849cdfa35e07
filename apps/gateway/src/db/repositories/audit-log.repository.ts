import { Inject, Injectable } from '@nestjs/common';
import { and, asc, count, desc, eq, gt, gte, inArray, isNull, lt, lte, or, sql, type SQL } from 'drizzle-orm';
import type { PGlite } from '@electric-sql/pglite';
import { Client, Pool, type QueryResult } from 'pg';
import type { Db } from '../database';
import { pgErrorOf } from '../errors';
import { auditArchives, auditChainHead, auditLog, auditPending, type AuditArchiveRow, type AuditLogRow } from '../schema';
import { DB } from '../tokens';
import { pageSize, Repository } from './repository';

const MAIN_CHAIN = 'main';
/**
 * The advisory lock a chaining round holds (docs/decisions/0013-audit-across-replicas.md): taken with
 * a try, for one transaction. Only would-be chainers touch it, so a failed try means another
 * connection is chaining at that instant.
 */
export const CHAINER_LOCK = 7_341_205_119;
/** The channel on which every round that wrote entries says where the queued ones went. */
export const AUDIT_CHANNEL = 'lemniscate_audit';
/** The most queued entries, and about the most payload bytes, one round takes from the queue. */
const ROUND_ENTRIES = 2000;
const ROUND_BYTES = 4 * 1024 * 1024;
/** A NOTIFY payload is capped at 8000 bytes; a round's news is cut into pieces below that. */
const NOTICE_BYTES = 7800;
/**
 * PostgreSQL only: a chainer that stops talking in the middle of its round (a frozen process, a
 * lost network) has its connection ended by the server after this long, which releases the lock
 * and rolls the round back; the queued entries wait for the next chainer.
 */
export const CHAINER_LEASE_MS = 10_000;
/** idle_in_transaction_session_timeout: the server ended a connection that idled in a transaction. */
const LEASE_ENDED = '25P03';

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
  /** Another connection was chaining; the entries given were queued in this transaction instead (their queue ids). */
  | { chained: false; queued: Map<string, number> };

/**
 * What one round announced (a part of it when it moved many entries): the queued entries it placed,
 * by queue id, and whether its chainer goes on to another round (it moved queued entries, so there
 * may be more). A round that moved none says it stops: whoever still has entries queued then chains.
 */
export interface RoundNotice {
  more: boolean;
  placed: Map<number, ChainPlace>;
}

/** A LISTEN connection for round notices (PostgreSQL). */
export interface AuditListener {
  close(): Promise<void>;
}

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
  /** Whether entries can be queued (PostgreSQL); on PGlite one connection chains every append itself. */
  get queues(): boolean {
    return this.pool !== undefined;
  }

  /** The chainer's lease (PostgreSQL); undefined on PGlite, where one process holds the only connection. */
  chainerLeaseMs: number | undefined;
  private readonly pool: Pool | undefined;

  constructor(@Inject(DB) db: Db) {
    super(db);
    const client = (db as { $client?: unknown }).$client;
    this.pool = client instanceof Pool ? client : undefined;
    this.chainerLeaseMs = this.pool ? CHAINER_LEASE_MS : undefined;
  }

  /**
   * One chaining round, in one transaction. When no other connection is chaining: takes the chainer
   * lock, links the oldest queued entries and then `own` onto the head (with `link`, at the
   * database's clock), moves the queued ones into the log, writes `own`, moves the head, announces
   * where the queued ones went (PostgreSQL), commits. When another connection is chaining: commits
   * `own` to the queue instead, without waiting, for that chainer's next round.
   */
  async append(own: QueuedEntry[], link: ChainLinker): Promise<ChainRound> {
    // The clock reading is refreshed by a full round at least every KNOWN_HEAD_MS: the time elapsed here and the database's clock may drift apart.
    if (own.length > 0 && this.knownHead && performance.now() - this.knownHead.readAt < KNOWN_HEAD_MS) {
      const round = await this.appendAtKnownHead(this.knownHead, own, link);
      if (round) return round;
    }
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transaction((session) => this.round(session, own, link));
      } catch (error) {
        // Both roll the round back before anything is committed, so it is simply done again: a
        // stale read of the queue, and a lease that ran out (this process stalled mid-round, and
        // the server ended the connection, 25P03).
        const again = error instanceof StaleQueueRead || pgErrorOf(error)?.code === LEASE_ENDED;
        if (!again || attempt >= 3) throw error;
      }
    }
  }

  /**
   * The head this repository's last round left, with the database's clock read then: set after a
   * round that moved nothing from the queue (no other replica is writing). The next round links its
   * entries from it without reading it, in one statement (`KNOWN_HEAD_ROUND`) that takes the chainer
   * lock, and moves the head and writes the entries only if the lock was free, nothing is queued,
   * the head is still this very seq and hash, and the entries' time (that clock reading plus the
   * time elapsed here since, so never before the last entry's) is not ahead of the database's clock.
   * Anything else — another replica chaining or queueing, a tamper, a clock that drifted — makes it
   * write nothing, and a full round reads the head.
   */
  private knownHead: KnownHead | undefined;

  private async appendAtKnownHead(head: KnownHead, own: QueuedEntry[], link: ChainLinker): Promise<ChainRound | undefined> {
    this.knownHead = undefined;
    const at = new Date(head.clockMs + Math.floor(performance.now() - head.readAt));
    const rows = link(head, at, own);
    const last = rows[rows.length - 1] as AuditLogRow;
    const params = [...directParams(rows, at), last.seq, last.hash, head.seq, head.hash, this.pool ? noticesOf([], [], at) : []];
    const written = this.pool
      ? (await this.pool.query<KnownHeadWrite>({ name: KNOWN_HEAD_ROUND.name, text: KNOWN_HEAD_ROUND.text, values: params })).rows[0]
      : (await (this.db as unknown as { $client: PGlite }).$client.query<KnownHeadWrite>(KNOWN_HEAD_ROUND.text, params)).rows[0];
    if (Number(written?.head) !== 1) return undefined;
    if (Number(written?.direct) !== rows.length) throw new Error(`An audit round wrote ${String(written?.direct)} of ${rows.length} new entries.`);
    this.knownHead = { ...head, seq: last.seq, hash: last.hash };
    return { chained: true, rows, fromQueue: 0 };
  }

  private async round(session: RoundSession, own: QueuedEntry[], link: ChainLinker): Promise<ChainRound> {
    this.knownHead = undefined;
    const found = await session.begin<QueueRead>(this.roundRead());
    const readAt = performance.now();
    const head = found[0];
    if (!head?.got) return { chained: false, queued: own.length > 0 ? queuedIds(await session.query(ENQUEUE, enqueueParams(own))) : new Map() };
    if (head.head_seq === null) throw new Error('The audit chain head is missing: the database was not migrated.');
    const queued = found.filter((r) => r.id !== null);
    const entries: QueuedEntry[] = [
      ...queued.map((r) => ({ key: r.entry_key as string, actor: r.actor as string, kind: r.kind as string, projectId: r.project_id, sessionId: r.session_id, payload: r.payload as string })),
      ...own,
    ];
    if (entries.length === 0) {
      // Nothing to chain: say so, for writers that were told a round was owed.
      if (this.pool) await session.query(NOTIFY, [AUDIT_CHANNEL, stopNotice(new Date())]);
      return { chained: true, rows: [], fromQueue: 0 };
    }
    // Milliseconds: the precision a JavaScript Date carries, so the hashed text round-trips.
    const now = new Date(Number(head.now_ms));
    const rows = link({ seq: Number(head.head_seq), hash: head.head_hash as string }, now, entries);
    const last = rows[rows.length - 1] as AuditLogRow;
    const ids = queued.map((r) => Number(r.id));
    const moved = rows.slice(0, queued.length);
    const direct = rows.slice(queued.length);
    const [written] = await session.query<{ moved: string | number; direct: string | number }>(ROUND_WRITE, [
      ids,
      moved.map((r) => r.seq),
      moved.map((r) => r.prevHash),
      moved.map((r) => r.hash),
      ...directParams(direct, now),
      last.seq,
      last.hash,
      this.pool ? noticesOf(ids, moved, now) : [],
    ]);
    if (Number(written?.moved) !== moved.length) {
      // The queue was read in the snapshot the statement began with, and the lock taken during it:
      // a chainer that committed in between had moved some of these already. Roll back, read again.
      throw new StaleQueueRead(`An audit chaining round found ${String(written?.moved)} of the ${moved.length} queued entries it read; it was rolled back.`);
    }
    if (Number(written?.direct) !== direct.length) throw new Error(`An audit chaining round wrote ${String(written?.direct)} of ${direct.length} new entries; it was rolled back.`);
    // Should the commit fail after all, the next round's statement finds the head elsewhere and writes nothing.
    if (queued.length === 0) this.knownHead = { seq: last.seq, hash: last.hash, clockMs: now.getTime(), readAt };
    return { chained: true, rows, fromQueue: queued.length };
  }

  /**
   * The round's first statement: the chainer lock (tried), the head (locked), the database's clock
   * and the oldest queued entries, up to ROUND_ENTRIES and about ROUND_BYTES of payload. Constants
   * only, so that on PostgreSQL it travels with BEGIN in one round trip.
   */
  private roundRead(): string {
    const lease = this.chainerLeaseMs === undefined ? '' : `, set_config('idle_in_transaction_session_timeout', '${Math.round(this.chainerLeaseMs)}', true) AS lease`;
    return `SELECT l.got, h.seq AS head_seq, h.hash AS head_hash, (extract(epoch FROM h.now) * 1000)::int8 AS now_ms,
              q.id, q.entry_key, q.actor, q.kind, q.project_id, q.session_id, q.payload${lease}
       FROM (SELECT pg_try_advisory_xact_lock(${CHAINER_LOCK}) AS got OFFSET 0) l
       LEFT JOIN LATERAL (
         SELECT seq, hash, date_trunc('milliseconds', clock_timestamp()) AS now FROM audit_chain_head WHERE chain = '${MAIN_CHAIN}' AND l.got FOR UPDATE
       ) h ON true
       LEFT JOIN LATERAL (
         SELECT w.* FROM (
           SELECT p.*, sum(octet_length(p.payload)) OVER (ORDER BY p.id) - octet_length(p.payload) AS before
           FROM audit_pending p WHERE l.got ORDER BY p.id LIMIT ${ROUND_ENTRIES}
         ) w
         WHERE w.before < ${ROUND_BYTES}
       ) q ON true
       ORDER BY q.id`;
  }

  /**
   * A transaction on one connection, outside Drizzle: on PostgreSQL, BEGIN travels with the first
   * statement and the others are prepared once per connection (a round is on every append's path).
   */
  private async transaction<T>(fn: (session: RoundSession) => Promise<T>): Promise<T> {
    if (!this.pool) {
      const client = (this.db as unknown as { $client: PGlite }).$client;
      return client.transaction((tx) =>
        fn({
          begin: async <R>(text: string) => (await tx.query<R>(text)).rows,
          query: async <R>(statement: Statement, params: unknown[]) => (await tx.query<R>(statement.text, params)).rows,
        }),
      );
    }
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      const result = await fn({
        begin: async <R>(text: string) => {
          const results = (await client.query(`BEGIN; ${text}`)) as unknown as QueryResult[];
          return (results[1] as QueryResult).rows as R[];
        },
        query: async <R>(statement: Statement, params: unknown[]) => (await client.query({ name: statement.name, text: statement.text, values: params })).rows as R[],
      });
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((lost: Error) => {
        broken = lost;
      });
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /** Commits entries to the queue, without taking any lock: for a writer that knows a chainer is busy. Returns their queue ids by key. */
  async enqueue(entries: QueuedEntry[]): Promise<Map<string, number>> {
    const [one] = entries;
    if (this.pool && entries.length === 1 && one) {
      // One entry (a replica with one action in flight): a plain insert, no arrays to build or unnest.
      const values = [one.key, one.actor, one.kind, one.projectId, one.sessionId, one.payload];
      return queuedIds((await this.pool.query({ name: ENQUEUE_ONE.name, text: ENQUEUE_ONE.text, values })).rows);
    }
    if (this.pool) return queuedIds((await this.pool.query({ name: ENQUEUE.name, text: ENQUEUE.text, values: enqueueParams(entries) })).rows);
    return this.transaction((session) => session.query(ENQUEUE, enqueueParams(entries)).then(queuedIds));
  }

  /**
   * Announces that this connection will not do the round it owes (it moved queued entries in its last
   * round, and is shutting down): writers waiting for it chain their entries themselves.
   */
  async announceStop(): Promise<void> {
    if (this.pool) await this.pool.query({ name: NOTIFY.name, text: NOTIFY.text, values: [AUDIT_CHANNEL, stopNotice(new Date())] });
  }

  /**
   * True when some connection is in a chaining round at this instant. Read from pg_locks rather than
   * by trying the lock: a try would hold it for a moment, and a chainer failing its own try then
   * would wrongly believe another round under way.
   */
  async chainerBusy(): Promise<boolean> {
    const [row] = rowsOf<{ busy: boolean }>(
      await this.db.execute(sql`
        SELECT EXISTS (
          SELECT 1 FROM pg_locks
          WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock' AND objsubid = 1
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND classid = ${Math.floor(CHAINER_LOCK / 2 ** 32)} AND objid = ${CHAINER_LOCK % 2 ** 32}
        ) AS busy`),
    );
    return row?.busy === true;
  }

  /** Where `keys` are now, without waiting: those in the chain, and those still queued (by queue id). */
  async locate(keys: string[]): Promise<{ chained: Map<string, ChainPlace>; queued: Map<string, number> }> {
    const rows = rowsOf<{ place: string; entry_key: string; id: string | number | null; seq: string | number | null; at_ms: string | number | null; prev_hash: string | null; hash: string | null }>(
      await this.db.execute(sql`
        SELECT 'log' AS place, entry_key, NULL::int8 AS id, seq, (extract(epoch FROM at) * 1000)::int8 AS at_ms, prev_hash, hash FROM audit_log WHERE entry_key = ANY(${sql.param(keys)}::uuid[])
        UNION ALL
        SELECT 'queue', entry_key, id, NULL, NULL, NULL, NULL FROM audit_pending WHERE entry_key = ANY(${sql.param(keys)}::uuid[])`),
    );
    const chained = new Map<string, ChainPlace>();
    const queued = new Map<string, number>();
    for (const r of rows) {
      if (r.place === 'queue') queued.set(r.entry_key, Number(r.id));
      else chained.set(r.entry_key, { seq: Number(r.seq), at: new Date(Number(r.at_ms)), prevHash: r.prev_hash as string, hash: r.hash as string });
    }
    return { chained, queued };
  }

  /** The queue's first and last ids (both null when it is empty): rounds chain it in id order. */
  async queueBounds(): Promise<{ first: number | null; last: number | null }> {
    const [row] = rowsOf<{ first: string | number | null; last: string | number | null }>(await this.db.execute(sql`SELECT min(id) AS first, max(id) AS last FROM audit_pending`));
    const at = (v: string | number | null | undefined) => (v === null || v === undefined ? null : Number(v));
    return { first: at(row?.first), last: at(row?.last) };
  }

  /** How many entries wait in the queue, and since when the oldest has. */
  async queue(): Promise<{ entries: number; oldest: Date | null }> {
    const [row] = await this.db.select({ entries: sql<number>`count(*)::int`, oldest: sql<Date | null>`min(${auditPending.queuedAt})`.mapWith(auditPending.queuedAt) }).from(auditPending);
    return { entries: Number(row?.entries ?? 0), oldest: row?.oldest ?? null };
  }

  /**
   * Listens for round notices on a connection of its own (PostgreSQL; undefined on PGlite, where no
   * entry is ever queued). `lost` is called once if that connection fails; open a new one when needed.
   * The connection does not keep the process alive.
   */
  async listen(heard: (notice: RoundNotice) => void, lost: (error?: Error) => void): Promise<AuditListener | undefined> {
    if (!this.pool) return undefined;
    const client = new Client(this.pool.options);
    let ended = false;
    const end = (error?: Error) => {
      if (ended) return;
      ended = true;
      lost(error);
    };
    client.on('notification', (message) => {
      if (message.channel !== AUDIT_CHANNEL || message.payload === undefined) return;
      const notice = parseNotice(message.payload);
      if (notice) heard(notice);
    });
    client.on('error', (error) => end(error));
    client.on('end', () => end());
    try {
      await client.connect();
      (client as unknown as { connection?: { stream?: { unref?(): void } } }).connection?.stream?.unref?.();
      await client.query(`LISTEN ${AUDIT_CHANNEL}`);
    } catch (error) {
      ended = true;
      await client.end().catch(() => undefined);
      throw error;
    }
    return {
      close: async () => {
        ended = true;
        await client.end().catch(() => undefined);
      },
    };
  }

  async head(): Promise<ChainHead> {
    const [head] = await this.db.select({ seq: auditChainHead.seq, hash: auditChainHead.hash }).from(auditChainHead).where(eq(auditChainHead.chain, MAIN_CHAIN));
    if (!head) throw new Error('The audit chain head is missing: the database was not migrated.');
    return head;
  }

  /** The last archive of the oldest entries (0015_audit_archives), or undefined when none was made. */
  async lastArchive(): Promise<AuditArchiveRow | undefined> {
    const [row] = await this.db.select().from(auditArchives).orderBy(desc(auditArchives.throughSeq)).limit(1);
    return row;
  }

  /**
   * Removes the entries up to `through`, already written to `file` (its SHA-256 given), through the
   * database's audit_prune(): only a prefix of the chain, never past the head; answers how many went.
   */
  async prune(through: number, file: string, sha256: string): Promise<number> {
    const result = await this.db.execute(sql`SELECT audit_prune(${through}, ${file}, ${sha256}) AS removed`);
    const [row] = rowsOf<{ removed: string | number }>(result);
    return Number(row?.removed ?? 0);
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

  async count(filter: AuditFilter): Promise<number> {
    const conditions = filterConditions(filter);
    if (!conditions) return 0;
    const [row] = await this.db
      .select({ n: count() })
      .from(auditLog)
      .where(and(...conditions));
    return Number(row?.n ?? 0);
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
  got: boolean;
  head_seq: string | number | null;
  head_hash: string | null;
  now_ms: string | number | null;
  id: string | number | null;
  entry_key: string | null;
  actor: string | null;
  kind: string | null;
  project_id: string | null;
  session_id: string | null;
  payload: string | null;
}

/** A round read queued entries another chainer had just moved (see `round`); it is tried again. */
class StaleQueueRead extends Error {
  override readonly name = 'StaleQueueRead';
}

/** The rows of a raw statement: both drivers (pg, PGlite) answer with `{ rows }`. */
function rowsOf<T>(result: unknown): T[] {
  return (result as { rows: T[] }).rows;
}

interface Statement {
  /** Prepared once per connection under this name (PostgreSQL). */
  name: string;
  text: string;
}

interface RoundSession {
  /** Opens the transaction and runs `text` (constants only). */
  begin<R>(text: string): Promise<R[]>;
  query<R>(statement: Statement, params: unknown[]): Promise<R[]>;
}

/**
 * Rows get ids in the order given, which is the order they will be chained in. The transaction
 * commits synchronously, like any other: a writer that asked only for its entry to be recorded
 * (AuditService.record) is answered once this insert is on disk, before a round has chained it.
 */
const ENQUEUE: Statement = {
  name: 'lemniscate_audit_enqueue',
  text: `INSERT INTO audit_pending (entry_key, actor, kind, project_id, session_id, payload)
         SELECT x.entry_key, x.actor, x.kind, x.project_id, x.session_id, x.payload
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS x(entry_key, actor, kind, project_id, session_id, payload, n)
         ORDER BY x.n
         RETURNING id, entry_key`,
};

/** ENQUEUE for a single entry. */
const ENQUEUE_ONE: Statement = {
  name: 'lemniscate_audit_enqueue_one',
  text: `INSERT INTO audit_pending (entry_key, actor, kind, project_id, session_id, payload) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, entry_key`,
};

const NOTIFY: Statement = { name: 'lemniscate_audit_notify', text: 'SELECT pg_notify($1, $2)' };

/** How long a round may link from a known head and clock reading before a full round reads them again. */
const KNOWN_HEAD_MS = 30_000;

/**
 * The caller's entries inserted into the log from a round's parameters (`directParams`): `$<first>`
 * the time, then the columns, one array each; `where` limits it (a round at a known head).
 */
function callerInsert(first: number, where = ''): string {
  const p = (i: number) => `$${first + i}`;
  return `INSERT INTO audit_log (seq, at, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key)
           SELECT seq, ${p(0)}::timestamptz, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key
           FROM unnest(${p(1)}::bigint[], ${p(2)}::text[], ${p(3)}::text[], ${p(4)}::text[], ${p(5)}::text[], ${p(6)}::text[], ${p(7)}::text[], ${p(8)}::text[], ${p(9)}::uuid[])
             AS x(seq, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key)${where}
           RETURNING 1`;
}

/** A round at a known head (`appendAtKnownHead`): $1–$10 the entries, $11–$12 the new head, $13–$14 the head it moves from, $15 the notices. */
const KNOWN_HEAD_ROUND: Statement = {
  name: 'lemniscate_audit_known_head_round',
  text: `WITH lock AS (
           SELECT pg_try_advisory_xact_lock(${CHAINER_LOCK}) AS got
         ), moved_head AS (
           UPDATE audit_chain_head SET seq = $11, hash = $12
           WHERE chain = '${MAIN_CHAIN}' AND seq = $13 AND hash = $14
             AND (SELECT got FROM lock)
             AND NOT EXISTS (SELECT 1 FROM audit_pending)
             AND $1::timestamptz <= clock_timestamp()
           RETURNING 1
         ), from_caller AS (
           ${callerInsert(1, '\n           WHERE EXISTS (SELECT 1 FROM moved_head)')}
         )
         SELECT (SELECT count(*) FROM from_caller) AS direct, (SELECT count(*) FROM moved_head) AS head,
                (SELECT count(pg_notify('${AUDIT_CHANNEL}', n)) FROM unnest($15::text[]) AS n WHERE EXISTS (SELECT 1 FROM moved_head)) AS notices`,
};

interface KnownHeadWrite extends Record<string, unknown> {
  direct: string | number;
  head: string | number;
}

/** A head as a round left it, with the database's clock (ms) read then and this process's `performance.now()` at that moment. */
interface KnownHead extends ChainHead {
  clockMs: number;
  readAt: number;
}

/** A round's new entries as the statements' array parameters: the time, then a column each. */
function directParams(rows: AuditLogRow[], at: Date): unknown[] {
  return [
    at.toISOString(),
    rows.map((r) => r.seq),
    rows.map((r) => r.actor),
    rows.map((r) => r.kind),
    rows.map((r) => r.projectId),
    rows.map((r) => r.sessionId),
    rows.map((r) => r.payload),
    rows.map((r) => r.prevHash),
    rows.map((r) => r.hash),
    rows.map((r) => r.entryKey),
  ];
}

/**
 * A round's writes, in one statement: the queued entries read are deleted from the queue and
 * inserted into the log with the seq and hashes given (their content moves inside the database),
 * then the caller's entries, then the head; the notices are sent on commit. The counts let the
 * round check that every queued entry it read was still there.
 */
const ROUND_WRITE: Statement = {
  name: 'lemniscate_audit_round',
  text: `WITH taken AS (
           DELETE FROM audit_pending WHERE id = ANY($1::bigint[])
           RETURNING id, entry_key, actor, kind, project_id, session_id, payload
         ), linked AS (
           SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS x(id, seq, prev_hash, hash)
         ), from_queue AS (
           INSERT INTO audit_log (seq, at, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key)
           SELECT linked.seq, $5::timestamptz, taken.actor, taken.kind, taken.project_id, taken.session_id, taken.payload, linked.prev_hash, linked.hash, taken.entry_key
           FROM taken JOIN linked USING (id)
           RETURNING 1
         ), from_caller AS (
           ${callerInsert(5)}
         ), moved_head AS (
           UPDATE audit_chain_head SET seq = $15, hash = $16 WHERE chain = '${MAIN_CHAIN}' RETURNING 1
         )
         SELECT (SELECT count(*) FROM from_queue) AS moved, (SELECT count(*) FROM from_caller) AS direct, (SELECT count(*) FROM moved_head) AS head,
                (SELECT count(pg_notify('${AUDIT_CHANNEL}', n)) FROM unnest($17::text[]) AS n) AS notices`,
};

function enqueueParams(entries: QueuedEntry[]): unknown[] {
  return [entries.map((e) => e.key), entries.map((e) => e.actor), entries.map((e) => e.kind), entries.map((e) => e.projectId), entries.map((e) => e.sessionId), entries.map((e) => e.payload)];
}

function queuedIds(rows: unknown[]): Map<string, number> {
  return new Map((rows as { id: string | number; entry_key: string }[]).map((r) => [r.entry_key, Number(r.id)]));
}

/**
 * A round's news as NOTIFY payloads: `a1 <more> <at ms>`, then for a run of consecutive entries the
 * seq and previous hash of the first, then `<queue id>:<hash>` for each. `more` is 1 when the round
 * moved queued entries: its chainer goes on to another round.
 */
export function noticesOf(ids: number[], moved: AuditLogRow[], at: Date): string[] {
  const more = ids.length > 0 ? 1 : 0;
  const notices: string[] = [];
  let text = '';
  ids.forEach((id, i) => {
    const row = moved[i] as AuditLogRow;
    const item = ` ${id}:${row.hash}`;
    if (text === '' || text.length + item.length > NOTICE_BYTES) {
      if (text !== '') notices.push(text);
      text = `a1 ${more} ${at.getTime()} ${row.seq} ${row.prevHash}`;
    }
    text += item;
  });
  notices.push(text === '' ? `a1 ${more} ${at.getTime()}` : text);
  return notices;
}

function stopNotice(at: Date): string {
  return `a1 0 ${at.getTime()}`;
}

/** The inverse of noticesOf; undefined for a payload it did not write. */
export function parseNotice(payload: string): RoundNotice | undefined {
  const parts = payload.split(' ');
  if (parts[0] !== 'a1' || parts.length < 3) return undefined;
  const at = new Date(Number(parts[2]));
  const placed = new Map<number, ChainPlace>();
  if (parts.length > 3) {
    let seq = Number(parts[3]);
    let prevHash = parts[4] as string;
    for (const item of parts.slice(5)) {
      const [id, hash] = item.split(':') as [string, string];
      placed.set(Number(id), { seq, at, prevHash, hash });
      prevHash = hash;
      seq += 1;
    }
  }
  return { more: parts[1] === '1', placed };
}
