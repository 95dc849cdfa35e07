import { Inject, Injectable } from '@nestjs/common';
import { and, eq, gt, isNull, lt, sql } from 'drizzle-orm';
import type { Db } from '../database';
import { oidcLogins } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

export type OidcLoginRow = typeof oidcLogins.$inferSelect;

/** Sign-ins started with the OpenID Provider (0016_oidc): a state is taken once, before it expires. */
@Injectable()
export class OidcLoginsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async create(row: { stateHash: string; codeVerifier: string; nonce: string; returnTo: string; expiresAt: Date; cliPort?: number | null; cliChallenge?: string | null }): Promise<void> {
    await this.db.insert(oidcLogins).values(row);
    // Rows a day past their expiry go as new ones come (kept that long so a replay is named as one).
    await this.db.delete(oidcLogins).where(lt(oidcLogins.expiresAt, sql`now() - interval '1 day'`));
  }

  /**
   * Marks the sign-in of this state used and answers it, in one statement: a second use of the same
   * state (a replayed callback), an unknown state and an expired one all answer undefined.
   */
  async take(stateHash: string): Promise<OidcLoginRow | undefined> {
    const [row] = await this.db
      .update(oidcLogins)
      .set({ usedAt: sql`now()` })
      .where(and(eq(oidcLogins.stateHash, stateHash), isNull(oidcLogins.usedAt), gt(oidcLogins.expiresAt, sql`now()`)))
      .returning();
    return row;
  }

  async find(stateHash: string): Promise<OidcLoginRow | undefined> {
    const [row] = await this.db.select().from(oidcLogins).where(eq(oidcLogins.stateHash, stateHash));
    return row;
  }

  /** The sign-in's answer for the CLI: a one-time code (hashed), whom it signs in and the sealed refresh token. */
  async handToCli(stateHash: string, handoff: { codeHash: string; userId: string; refreshToken: string | null; expiresAt: Date }): Promise<void> {
    await this.db
      .update(oidcLogins)
      .set({ cliCodeHash: handoff.codeHash, cliUserId: handoff.userId, cliRefreshToken: handoff.refreshToken, cliCodeExpiresAt: handoff.expiresAt })
      .where(eq(oidcLogins.stateHash, stateHash));
  }

  /** Takes a CLI's one-time code in one statement: a second use, an unknown code and an expired one answer undefined. */
  async takeCliCode(codeHash: string): Promise<OidcLoginRow | undefined> {
    const [row] = await this.db
      .update(oidcLogins)
      .set({ cliCodeUsedAt: sql`now()` })
      .where(and(eq(oidcLogins.cliCodeHash, codeHash), isNull(oidcLogins.cliCodeUsedAt), gt(oidcLogins.cliCodeExpiresAt, sql`now()`)))
      .returning();
    return row;
  }

  async findCliCode(codeHash: string): Promise<OidcLoginRow | undefined> {
    const [row] = await this.db.select().from(oidcLogins).where(eq(oidcLogins.cliCodeHash, codeHash));
    return row;
  }
}
