import { Inject, Injectable } from '@nestjs/common';
import { and, asc, count, eq, inArray, isNull, sql } from 'drizzle-orm';
import type { Db } from '../database';
import { users, type NewUser, type UserRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

type UserPatch = Partial<Pick<UserRow, 'displayName' | 'role' | 'passwordHash' | 'disabledAt' | 'revokedAt' | 'oidcIssuer' | 'oidcSubject'>>;

@Injectable()
export class UsersRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async create(user: NewUser): Promise<UserRow> {
    const [row] = await this.db.insert(users).values(user).returning();
    return row as UserRow;
  }

  async findById(id: string): Promise<UserRow | undefined> {
    const [row] = await this.db.select().from(users).where(eq(users.id, id));
    return row;
  }

  /** Emails compare without case, as the unique index does. */
  /** The person an OpenID Provider names (issuer, subject). */
  async findByOidc(issuer: string, subject: string): Promise<UserRow | undefined> {
    const [row] = await this.db
      .select()
      .from(users)
      .where(and(eq(users.oidcIssuer, issuer), eq(users.oidcSubject, subject)));
    return row;
  }

  async findByEmail(email: string): Promise<UserRow | undefined> {
    const [row] = await this.db
      .select()
      .from(users)
      .where(sql`lower(${users.email}) = lower(${email})`);
    return row;
  }

  /** The emails of these users, by id, for display ("approved by alice@…"); ids of deleted users are absent. */
  async emailsOf(ids: Iterable<string>): Promise<Map<string, string>> {
    const wanted = [...new Set(ids)];
    if (wanted.length === 0) return new Map();
    const rows = await this.db.select({ id: users.id, email: users.email }).from(users).where(inArray(users.id, wanted));
    return new Map(rows.map((r) => [r.id, r.email]));
  }

  list(): Promise<UserRow[]> {
    return this.db.select().from(users).orderBy(asc(users.createdAt), asc(users.id));
  }

  /**
   * Applies a change unless it would leave no active administrator. The active administrators' rows
   * are locked first, so two administrators demoting each other at once cannot both succeed.
   */
  async updateKeepingAnAdmin(id: string, patch: UserPatch): Promise<UserRow | 'last_admin' | undefined> {
    return this.db.transaction(async (tx) => {
      const admins = await tx
        .select({ id: users.id })
        .from(users)
        .where(and(eq(users.role, 'admin'), isNull(users.revokedAt), isNull(users.disabledAt)))
        .for('update');
      const demotes = patch.role !== undefined && patch.role !== 'admin' && admins.some((a) => a.id === id);
      if (demotes && admins.length <= 1) return 'last_admin';
      const [row] = await tx.update(users).set(patch).where(eq(users.id, id)).returning();
      return row;
    });
  }

  async count(): Promise<number> {
    const [row] = await this.db.select({ n: count() }).from(users);
    return row?.n ?? 0;
  }

  async update(id: string, patch: UserPatch): Promise<UserRow | undefined> {
    const [row] = await this.db.update(users).set(patch).where(eq(users.id, id)).returning();
    return row;
  }
}
