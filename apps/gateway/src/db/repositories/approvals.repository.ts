import { Inject, Injectable } from '@nestjs/common';
import { and, desc, eq, inArray, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../database';
import { approvals, sessions, type ApprovalRow, type ApprovalState, type NewApproval } from '../schema';
import { DB } from '../tokens';
import { pageSize, Repository } from './repository';

export type ApprovalWithProject = ApprovalRow & { projectId: string };

interface ApprovalFilter {
  state?: ApprovalState;
  sessionId?: string;
  /** Approvals whose id starts with these characters (a person's short form of an id). */
  idPrefix?: string;
  projectId?: string;
  /** Approvals of any of these projects (a non-admin's scope); an empty list matches nothing. */
  projectIds?: string[];
  limit?: number;
}

export interface ApprovalAnswer {
  state: Exclude<ApprovalState, 'pending'>;
  decidedBy: string | null;
  reason?: string | null;
  /** The developer's answer to a question (kind `question`, approved only). */
  response?: string | null;
  at?: Date;
}

@Injectable()
export class ApprovalsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /**
   * Inserts `approval` only while its session is running; answers undefined once it has ended. The
   * session's row is held (FOR SHARE) until the insert commits, so a transaction ending the session
   * (a revocation, an orphan's sweep) either comes first, and nothing is inserted, or waits and then
   * finds this approval pending and closes it. Checking the status first and inserting after would let
   * a request land in a session that ended in between, pending forever.
   */
  async create(approval: NewApproval): Promise<ApprovalRow | undefined> {
    return this.db.transaction(async (tx) => {
      const [session] = await tx.select({ status: sessions.status }).from(sessions).where(eq(sessions.id, approval.sessionId)).for('share');
      if (session?.status !== 'running') return undefined;
      const [row] = await tx.insert(approvals).values(approval).returning();
      return row as ApprovalRow;
    });
  }

  /** With the project it belongs to (through its session), which permission checks need. */
  async findById(id: string): Promise<ApprovalWithProject | undefined> {
    const [row] = await this.db.select({ approval: approvals, projectId: sessions.projectId }).from(approvals).innerJoin(sessions, eq(sessions.id, approvals.sessionId)).where(eq(approvals.id, id));
    return row && { ...row.approval, projectId: row.projectId };
  }

  /** Newest first. */
  async list(filter: ApprovalFilter = {}): Promise<ApprovalWithProject[]> {
    const conditions: SQL[] = [];
    if (filter.state !== undefined) conditions.push(eq(approvals.state, filter.state));
    if (filter.sessionId !== undefined) conditions.push(eq(approvals.sessionId, filter.sessionId));
    if (filter.idPrefix !== undefined) conditions.push(sql`starts_with(${approvals.id}, ${filter.idPrefix})`);
    if (filter.projectId !== undefined) conditions.push(eq(sessions.projectId, filter.projectId));
    if (filter.projectIds !== undefined) {
      if (filter.projectIds.length === 0) return [];
      conditions.push(inArray(sessions.projectId, filter.projectIds));
    }
    const rows = await this.db
      .select({ approval: approvals, projectId: sessions.projectId })
      .from(approvals)
      .innerJoin(sessions, eq(sessions.id, approvals.sessionId))
      .where(and(...conditions))
      .orderBy(desc(approvals.createdAt), desc(approvals.id))
      .limit(pageSize(filter.limit));
    return rows.map((r) => ({ ...r.approval, projectId: r.projectId }));
  }

  /**
   * Answers a pending approval. Undefined when it is no longer pending: two answers racing, the
   * second learns it lost (a 409 for the API), and nothing is overwritten.
   */
  async answer(id: string, answer: ApprovalAnswer): Promise<ApprovalRow | undefined> {
    const [row] = await this.db
      .update(approvals)
      .set({ state: answer.state, decidedBy: answer.decidedBy, decidedAt: answer.at ?? new Date(), reason: answer.reason ?? null, response: answer.response ?? null })
      .where(and(eq(approvals.id, id), eq(approvals.state, 'pending')))
      .returning();
    return row;
  }

  /** Closes every pending approval of a session (stop, revocation); returns those closed. */
  closePendingForSession(sessionId: string, answer: ApprovalAnswer): Promise<ApprovalRow[]> {
    return this.db
      .update(approvals)
      .set({ state: answer.state, decidedBy: answer.decidedBy, decidedAt: answer.at ?? new Date(), reason: answer.reason ?? null })
      .where(and(eq(approvals.sessionId, sessionId), eq(approvals.state, 'pending')))
      .returning();
  }
}
