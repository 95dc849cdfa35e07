import { Inject, Injectable } from '@nestjs/common';
import { and, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { Db } from '../database';
import { auditSinkCursors, type AuditSinkCursorRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

/**
 * Audit sinks' cursors and leases (0014_audit_sinks). Every write that moves a cursor is fenced by
 * the lease: it changes nothing unless this gateway still holds the sink, so a gateway that lost
 * its lease (frozen past it) cannot move a cursor another one has moved since.
 */
@Injectable()
export class AuditSinkCursorsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /** Creates the sink's row if it is new, its cursor at `startSeq`. */
  async ensure(name: string, startSeq: number): Promise<void> {
    await this.db.insert(auditSinkCursors).values({ name, seq: startSeq }).onConflictDoNothing();
  }

  list(names: string[]): Promise<AuditSinkCursorRow[]> {
    if (names.length === 0) return Promise.resolve([]);
    return this.db.select().from(auditSinkCursors).where(inArray(auditSinkCursors.name, names));
  }

  /**
   * Takes or renews the sink's lease for `leaseMs` when it is free, expired or already this
   * holder's. Answers the row when held, undefined when another holder has it.
   */
  async lease(name: string, holder: string, leaseMs: number): Promise<AuditSinkCursorRow | undefined> {
    const [row] = await this.db
      .update(auditSinkCursors)
      .set({ holder, leaseUntil: sql`now() + ${`${leaseMs} milliseconds`}::interval`, updatedAt: sql`now()` })
      .where(and(eq(auditSinkCursors.name, name), or(isNull(auditSinkCursors.holder), eq(auditSinkCursors.holder, holder), lt(auditSinkCursors.leaseUntil, sql`now()`))))
      .returning();
    return row;
  }

  /** Moves the cursor after a delivery and renews the lease; false when the lease was lost. */
  async advance(name: string, holder: string, seq: number, leaseMs: number): Promise<boolean> {
    const rows = await this.db
      .update(auditSinkCursors)
      .set({
        seq: sql`GREATEST(${auditSinkCursors.seq}, ${seq})`,
        deliveredAt: sql`now()`,
        lastAttemptAt: sql`now()`,
        failingSince: null,
        lastError: null,
        leaseUntil: sql`now() + ${`${leaseMs} milliseconds`}::interval`,
        updatedAt: sql`now()`,
      })
      .where(and(eq(auditSinkCursors.name, name), eq(auditSinkCursors.holder, holder)))
      .returning({ name: auditSinkCursors.name });
    return rows.length > 0;
  }

  /** Records a failed attempt (keeping when the failing began). */
  async failed(name: string, holder: string, error: string): Promise<void> {
    await this.db
      .update(auditSinkCursors)
      .set({ failingSince: sql`COALESCE(${auditSinkCursors.failingSince}, now())`, lastError: error.slice(0, 1000), lastAttemptAt: sql`now()`, updatedAt: sql`now()` })
      .where(and(eq(auditSinkCursors.name, name), eq(auditSinkCursors.holder, holder)));
  }

  /** Gives the lease up (a gateway stopping), so another takes over at once. */
  async release(name: string, holder: string): Promise<void> {
    await this.db
      .update(auditSinkCursors)
      .set({ holder: null, leaseUntil: null, updatedAt: sql`now()` })
      .where(and(eq(auditSinkCursors.name, name), eq(auditSinkCursors.holder, holder)));
  }
}
