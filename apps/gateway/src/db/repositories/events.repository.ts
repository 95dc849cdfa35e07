import { Inject, Injectable } from '@nestjs/common';
import { and, asc, eq, getTableColumns, gt, inArray, or, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../database';
import { events, type EventRow, type NewEvent } from '../schema';
import { DB } from '../tokens';
import { pageSize, Repository } from './repository';

export interface EventScope {
  sessionIds?: string[];
  projectIds?: string[];
}

/** Stored live events, replayed to a WebSocket client that reconnects with its last seq. */
@Injectable()
export class EventsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /**
   * Several events in one statement; the rows come back in the order given (ascending seq). Given a
   * channel (PostgreSQL), the same statement NOTIFYs each row's seq on it, row after row: delivered
   * when the insert commits, in that order, and never for an insert that did not commit.
   */
  async appendMany(rows: Omit<NewEvent, 'seq'>[], notifyChannel: string | null = null): Promise<EventRow[]> {
    const insert = this.db.insert(events).values(rows);
    const stored = (
      notifyChannel === null ? await insert.returning() : await insert.returning({ ...getTableColumns(events), notified: sql`pg_notify(${notifyChannel}, ${events.seq}::text)` })
    ) as (EventRow & { notified?: unknown })[];
    return stored.map(({ notified: _, ...row }) => row as EventRow).sort((a, b) => a.seq - b.seq);
  }

  async findBySeq(seq: number): Promise<EventRow | undefined> {
    const [row] = await this.db.select().from(events).where(eq(events.seq, seq));
    return row;
  }

  /** Events after `seq` that concern any of the given sessions or projects, oldest first. */
  async listAfter(seq: number, scope: EventScope, limit?: number): Promise<EventRow[]> {
    const matches: SQL[] = [];
    if (scope.sessionIds?.length) matches.push(inArray(events.sessionId, scope.sessionIds));
    if (scope.projectIds?.length) matches.push(inArray(events.projectId, scope.projectIds));
    if (matches.length === 0) return [];
    return this.db
      .select()
      .from(events)
      .where(and(gt(events.seq, seq), or(...matches)))
      .orderBy(asc(events.seq))
      .limit(pageSize(limit, 500, 5000));
  }
}
