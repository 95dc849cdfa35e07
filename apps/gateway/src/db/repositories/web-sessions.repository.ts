import { Inject, Injectable } from '@nestjs/common';
import { and, eq, isNull, lt, or, isNotNull } from 'drizzle-orm';
import type { Db } from '../database';
import { webSessions, type NewWebSession, type WebSessionRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

/** Console login sessions, keyed by a hash of the cookie. */
@Injectable()
export class WebSessionsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async create(session: NewWebSession): Promise<WebSessionRow> {
    const [row] = await this.db.insert(webSessions).values(session).returning();
    return row as WebSessionRow;
  }

  /** Records a check with the OpenID Provider (and the refresh token it answered with, sealed). */
  async oidcChecked(id: string, refreshToken: string, at: Date = new Date()): Promise<void> {
    await this.db.update(webSessions).set({ oidcRefreshToken: refreshToken, oidcCheckedAt: at }).where(eq(webSessions.id, id));
  }

  async findById(id: string): Promise<WebSessionRow | undefined> {
    const [row] = await this.db.select().from(webSessions).where(eq(webSessions.id, id));
    return row;
  }

  async revoke(id: string, at: Date = new Date()): Promise<boolean> {
    const rows = await this.db
      .update(webSessions)
      .set({ revokedAt: at })
      .where(and(eq(webSessions.id, id), isNull(webSessions.revokedAt)))
      .returning({ id: webSessions.id });
    return rows.length > 0;
  }

  async revokeAllForUser(userId: string, at: Date = new Date()): Promise<number> {
    const rows = await this.db
      .update(webSessions)
      .set({ revokedAt: at })
      .where(and(eq(webSessions.userId, userId), isNull(webSessions.revokedAt)))
      .returning({ id: webSessions.id });
    return rows.length;
  }

  /** Removes sessions that can no longer be used; returns how many. */
  async deleteExpired(now: Date = new Date()): Promise<number> {
    const rows = await this.db
      .delete(webSessions)
      .where(or(lt(webSessions.expiresAt, now), isNotNull(webSessions.revokedAt)))
      .returning({ id: webSessions.id });
    return rows.length;
  }
}
