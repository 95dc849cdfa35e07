import { Inject, Injectable } from '@nestjs/common';
import { and, count, desc, eq, exists, gte, inArray, isNotNull, isNull, lt, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../database';
import { approvals, sessions, type NewSession, type SessionRow, type SessionStatus } from '../schema';
import { DB } from '../tokens';
import { pageSize, Repository } from './repository';

interface SessionFilter {
  projectId?: string;
  /** Sessions of any of these projects (a non-admin's scope); an empty list matches nothing. */
  projectIds?: string[];
  userId?: string;
  /** Sessions whose id starts with these characters (a person's short form of an id). */
  idPrefix?: string;
  status?: SessionStatus;
  /** Only sessions with an approval (or question) waiting for a person. */
  waiting?: boolean;
  parentSessionId?: string;
  /** Keyset cursor: sessions started strictly before this instant. */
  startedBefore?: Date;
  /** Sessions started at or after this instant. */
  startedFrom?: Date;
  limit?: number;
}

type SessionPatch = Partial<
  Pick<
    SessionRow,
    'policyVersionId' | 'actionsUsed' | 'extensionsUsed' | 'baseCommit' | 'branch' | 'includedUncommitted' | 'fingerprintStart' | 'fingerprintEnd' | 'finalPatch' | 'summary' | 'sandboxId' | 'execHost'
  >
>;

interface SessionEnding {
  status: Exclude<SessionStatus, 'running'>;
  stopReason?: string | null;
  endedAt?: Date;
  summary?: string | null;
  finalPatch?: string | null;
  fingerprintEnd?: string | null;
}

@Injectable()
export class SessionsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async create(session: NewSession): Promise<SessionRow> {
    const [row] = await this.db.insert(sessions).values(session).returning();
    return row as SessionRow;
  }

  async findById(id: string): Promise<SessionRow | undefined> {
    const [row] = await this.db.select().from(sessions).where(eq(sessions.id, id));
    return row;
  }

  /** Newest first. */
  list(filter: SessionFilter = {}): Promise<SessionRow[]> {
    const conditions: SQL[] = [];
    if (filter.projectId !== undefined) conditions.push(eq(sessions.projectId, filter.projectId));
    if (filter.projectIds !== undefined) {
      if (filter.projectIds.length === 0) return Promise.resolve([]);
      conditions.push(inArray(sessions.projectId, filter.projectIds));
    }
    if (filter.userId !== undefined) conditions.push(eq(sessions.userId, filter.userId));
    if (filter.idPrefix !== undefined) conditions.push(sql`starts_with(${sessions.id}, ${filter.idPrefix})`);
    if (filter.status !== undefined) conditions.push(eq(sessions.status, filter.status));
    if (filter.waiting === true)
      conditions.push(
        exists(
          this.db
            .select({ one: sql`1` })
            .from(approvals)
            .where(and(eq(approvals.sessionId, sessions.id), eq(approvals.state, 'pending'))),
        ),
      );
    if (filter.parentSessionId !== undefined) conditions.push(eq(sessions.parentSessionId, filter.parentSessionId));
    if (filter.startedBefore !== undefined) conditions.push(lt(sessions.startedAt, filter.startedBefore));
    if (filter.startedFrom !== undefined) conditions.push(gte(sessions.startedAt, filter.startedFrom));
    return this.db
      .select()
      .from(sessions)
      .where(and(...conditions))
      .orderBy(desc(sessions.startedAt), desc(sessions.id))
      .limit(pageSize(filter.limit));
  }

  /** How many approvals of each of these sessions wait for a person (sessions without any are absent). */
  async pendingApprovals(ids: readonly string[]): Promise<Map<string, number>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db
      .select({ sessionId: approvals.sessionId, n: count() })
      .from(approvals)
      .where(and(eq(approvals.state, 'pending'), inArray(approvals.sessionId, [...ids])))
      .groupBy(approvals.sessionId);
    return new Map(rows.map((r) => [r.sessionId, Number(r.n)]));
  }

  listRunningForUser(userId: string): Promise<SessionRow[]> {
    return this.db
      .select()
      .from(sessions)
      .where(and(eq(sessions.userId, userId), eq(sessions.status, 'running')))
      .orderBy(desc(sessions.startedAt));
  }

  async update(id: string, patch: SessionPatch): Promise<SessionRow | undefined> {
    const [row] = await this.db.update(sessions).set(patch).where(eq(sessions.id, id)).returning();
    return row;
  }

  /** Counts one more action; atomic, so concurrent tool calls never lose an increment. */
  async addAction(id: string, n = 1): Promise<number | undefined> {
    const [row] = await this.db
      .update(sessions)
      .set({ actionsUsed: sql`${sessions.actionsUsed} + ${n}` })
      .where(eq(sessions.id, id))
      .returning({ actionsUsed: sessions.actionsUsed });
    return row?.actionsUsed;
  }

  async addExtension(id: string): Promise<number | undefined> {
    const [row] = await this.db
      .update(sessions)
      .set({ extensionsUsed: sql`${sessions.extensionsUsed} + 1` })
      .where(eq(sessions.id, id))
      .returning({ extensionsUsed: sessions.extensionsUsed });
    return row?.extensionsUsed;
  }

  /** This gateway runs these sessions' loops: records it, with the time (a heartbeat). */
  async markRunner(ids: readonly string[], runner: string, at: Date = new Date()): Promise<void> {
    if (ids.length === 0) return;
    await this.db
      .update(sessions)
      .set({ runner, runnerSeenAt: at })
      .where(and(inArray(sessions.id, [...ids]), eq(sessions.status, 'running')));
  }

  /** Running root sessions whose loop's gateway has not said it runs them since `before`. */
  listOrphans(before: Date): Promise<SessionRow[]> {
    return this.db
      .select()
      .from(sessions)
      .where(and(eq(sessions.status, 'running'), isNull(sessions.parentSessionId), isNotNull(sessions.runner), lt(sessions.runnerSeenAt, before)))
      .orderBy(sessions.startedAt);
  }

  /** Every running session below a root (subagents, their subagents…). */
  async listRunningDescendants(rootId: string): Promise<SessionRow[]> {
    const found: SessionRow[] = [];
    let parents = [rootId];
    // Depth is bounded by subagentMaxDepth; the bound also guards against a cycle.
    for (let level = 0; parents.length > 0 && level < 64; level++) {
      const children = await this.db.select().from(sessions).where(inArray(sessions.parentSessionId, parents));
      found.push(...children.filter((c) => c.status === 'running'));
      parents = children.map((c) => c.id);
    }
    return found;
  }

  /**
   * Ends a running session. Undefined when it is not running (already ended, or unknown): the
   * first stop, revocation or completion wins and the others learn it.
   */
  async end(id: string, ending: SessionEnding): Promise<SessionRow | undefined> {
    const patch: Partial<SessionRow> = { status: ending.status, stopReason: ending.stopReason ?? null, endedAt: ending.endedAt ?? new Date() };
    if (ending.summary !== undefined) patch.summary = ending.summary;
    if (ending.finalPatch !== undefined) patch.finalPatch = ending.finalPatch;
    if (ending.fingerprintEnd !== undefined) patch.fingerprintEnd = ending.fingerprintEnd;
    const [row] = await this.db
      .update(sessions)
      .set(patch)
      .where(and(eq(sessions.id, id), eq(sessions.status, 'running')))
      .returning();
    return row;
  }
}
