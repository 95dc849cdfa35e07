import { Inject, Injectable } from '@nestjs/common';
import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../database';
import { approvedCommands, type ApprovedCommandRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

/** One command a person approved "with its identical repeats" (P3). */
interface RememberedCommand {
  command: string;
  workingDirectory: string;
  approvalId: string;
}

/**
 * "Approved once" memory (P3, `commands.reapproval: exempt`): the exact command text and the
 * directory it runs in, per session, with the approval that allowed it. Never read across sessions.
 */
@Injectable()
export class ApprovedCommandsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async remember(sessionId: string, entry: RememberedCommand, approvedBy: string | null): Promise<void> {
    await this.db.insert(approvedCommands).values({ sessionId, command: entry.command, workingDirectory: entry.workingDirectory, approvalId: entry.approvalId, approvedBy }).onConflictDoNothing();
  }

  /** Exact match only: a command differing by one character, or run elsewhere, is a different command. */
  async has(sessionId: string, command: string, workingDirectory: string): Promise<boolean> {
    const rows = await this.db
      .select({ command: approvedCommands.command })
      .from(approvedCommands)
      .where(and(eq(approvedCommands.sessionId, sessionId), eq(approvedCommands.workingDirectory, workingDirectory), eq(approvedCommands.command, command)));
    return rows.length > 0;
  }

  listForSession(sessionId: string): Promise<ApprovedCommandRow[]> {
    return this.db.select().from(approvedCommands).where(eq(approvedCommands.sessionId, sessionId)).orderBy(asc(approvedCommands.createdAt));
  }
}
