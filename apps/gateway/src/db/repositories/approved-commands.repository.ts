import { Inject, Injectable } from '@nestjs/common';
import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../database';
import { approvedCommands, type ApprovedCommandRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

/** "Approved once" memory: exact command strings a human approved in a session (P3, reapproval). */
@Injectable()
export class ApprovedCommandsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async remember(sessionId: string, command: string, approvedBy: string | null): Promise<void> {
    await this.db.insert(approvedCommands).values({ sessionId, command, approvedBy }).onConflictDoNothing();
  }

  /** Exact match only: a command differing by one character is a different command. */
  async has(sessionId: string, command: string): Promise<boolean> {
    const rows = await this.db
      .select({ command: approvedCommands.command })
      .from(approvedCommands)
      .where(and(eq(approvedCommands.sessionId, sessionId), eq(approvedCommands.command, command)));
    return rows.length > 0;
  }

  listForSession(sessionId: string): Promise<ApprovedCommandRow[]> {
    return this.db.select().from(approvedCommands).where(eq(approvedCommands.sessionId, sessionId)).orderBy(asc(approvedCommands.createdAt));
  }
}
