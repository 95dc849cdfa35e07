import { Inject, Injectable } from '@nestjs/common';
import { and, asc, desc, eq, gt, gte, inArray, isNull, lt, lte, or, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../database';
import { auditChainHead, auditLog, type AuditLogRow } from '../schema';
import { DB } from '../tokens';
import { pageSize, Repository } from './repository';

const MAIN_CHAIN = 'main';

interface ChainHead {
  seq: number;
  hash: string;
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
 * The audit table, insert and read only (the database refuses the rest). Hashing is the chain's
 * business (audit/audit-chain.ts); this class only guarantees that appends happen one at a time.
 */
@Injectable()
export class AuditLogRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /**
   * Appends entries while holding the chain head's row lock: `build` receives the head and the
   * database's clock, and returns the rows to insert (numbered from head.seq + 1, linked from
   * head.hash); the last becomes the new head. Concurrent appends from any number of connections
   * or replicas queue on that one row, so the chain never forks and seq has no gaps.
   */
  append(build: (head: ChainHead, now: Date) => AuditLogRow[]): Promise<AuditLogRow[]> {
    return this.db.transaction(async (tx) => {
      const [head] = await tx
        .select({
          seq: auditChainHead.seq,
          hash: auditChainHead.hash,
          // Milliseconds: the precision a JavaScript Date carries, so the hashed text round-trips.
          now: sql`date_trunc('milliseconds', clock_timestamp())`.mapWith(auditLog.at),
        })
        .from(auditChainHead)
        .where(eq(auditChainHead.chain, MAIN_CHAIN))
        .for('update');
      if (!head) throw new Error('The audit chain head is missing: the database was not migrated.');
      const rows = build({ seq: head.seq, hash: head.hash }, head.now as Date);
      const last = rows[rows.length - 1];
      if (!last) return rows;
      await tx.insert(auditLog).values(rows);
      await tx.update(auditChainHead).set({ seq: last.seq, hash: last.hash }).where(eq(auditChainHead.chain, MAIN_CHAIN));
      return rows;
    });
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
   * Entries past the head, read in one statement (one snapshot): an append inserts its row and moves
   * the head together, so any such entry was written around the chain.
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
