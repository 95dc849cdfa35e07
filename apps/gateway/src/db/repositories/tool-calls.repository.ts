import { Inject, Injectable } from '@nestjs/common';
import { asc, eq, sql } from 'drizzle-orm';
import type { Db } from '../database';
import { sessions, toolCalls, type NewToolCall, type ToolCallRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

type ToolCallPatch = Partial<Pick<ToolCallRow, 'decision' | 'result'>>;

@Injectable()
export class ToolCallsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /**
   * Records a proposed call with the session's next sequence number (unless one is given), and, in
   * the same statement, the session's counters when `progress` is given.
   */
  async create(call: Omit<NewToolCall, 'seq'> & { seq?: number }, progress?: { actionsUsed: number; extensionsUsed: number }): Promise<ToolCallRow> {
    const seq = call.seq ?? sql<number>`(SELECT coalesce(max(${toolCalls.seq}), 0) + 1 FROM ${toolCalls} WHERE ${toolCalls.sessionId} = ${call.sessionId})`;
    const counters = progress
      ? this.db
          .$with('counters', {})
          .as(
            sql`UPDATE ${sessions} SET ${sql.identifier(sessions.actionsUsed.name)} = ${progress.actionsUsed}, ${sql.identifier(sessions.extensionsUsed.name)} = ${progress.extensionsUsed} WHERE ${sessions.id} = ${call.sessionId}`,
          )
      : undefined;
    const [row] = await (counters ? this.db.with(counters) : this.db)
      .insert(toolCalls)
      .values({ ...call, seq })
      .returning();
    return row as ToolCallRow;
  }

  async findById(id: string): Promise<ToolCallRow | undefined> {
    const [row] = await this.db.select().from(toolCalls).where(eq(toolCalls.id, id));
    return row;
  }

  async update(id: string, patch: ToolCallPatch): Promise<ToolCallRow | undefined> {
    const [row] = await this.db.update(toolCalls).set(patch).where(eq(toolCalls.id, id)).returning();
    return row;
  }

  listForSession(sessionId: string): Promise<ToolCallRow[]> {
    return this.db.select().from(toolCalls).where(eq(toolCalls.sessionId, sessionId)).orderBy(asc(toolCalls.seq));
  }
}
