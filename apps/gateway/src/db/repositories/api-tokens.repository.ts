import { Inject, Injectable } from '@nestjs/common';
import { and, desc, eq, isNull } from 'drizzle-orm';
import type { Db } from '../database';
import { apiTokens, type ApiTokenRow, type NewApiToken } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

/** Tokens are stored as hashes only; the caller hashes before every lookup. */
@Injectable()
export class ApiTokensRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async create(token: NewApiToken): Promise<ApiTokenRow> {
    const [row] = await this.db.insert(apiTokens).values(token).returning();
    return row as ApiTokenRow;
  }

  async findByHash(tokenHash: string): Promise<ApiTokenRow | undefined> {
    const [row] = await this.db.select().from(apiTokens).where(eq(apiTokens.tokenHash, tokenHash));
    return row;
  }

  async findById(id: string): Promise<ApiTokenRow | undefined> {
    const [row] = await this.db.select().from(apiTokens).where(eq(apiTokens.id, id));
    return row;
  }

  listForUser(userId: string): Promise<ApiTokenRow[]> {
    return this.db.select().from(apiTokens).where(eq(apiTokens.userId, userId)).orderBy(desc(apiTokens.createdAt));
  }

  /** Revokes one token; false when it does not exist or was already revoked. */
  async revoke(id: string, at: Date = new Date()): Promise<boolean> {
    const rows = await this.db
      .update(apiTokens)
      .set({ revokedAt: at })
      .where(and(eq(apiTokens.id, id), isNull(apiTokens.revokedAt)))
      .returning({ id: apiTokens.id });
    return rows.length > 0;
  }

  /** Revokes every live token of a user; returns how many. */
  async revokeAllForUser(userId: string, at: Date = new Date()): Promise<number> {
    const rows = await this.db
      .update(apiTokens)
      .set({ revokedAt: at })
      .where(and(eq(apiTokens.userId, userId), isNull(apiTokens.revokedAt)))
      .returning({ id: apiTokens.id });
    return rows.length;
  }

  /** A token made from a console session opened through the provider: the provider's refresh token (sealed) and the check. */
  async oidcChecked(id: string, refreshToken: string, at: Date = new Date()): Promise<void> {
    await this.db.update(apiTokens).set({ oidcRefreshToken: refreshToken, oidcCheckedAt: at }).where(eq(apiTokens.id, id));
  }

  async touch(id: string, at: Date = new Date()): Promise<void> {
    await this.db.update(apiTokens).set({ lastUsedAt: at }).where(eq(apiTokens.id, id));
  }
}
