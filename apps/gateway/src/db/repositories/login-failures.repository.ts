import { Inject, Injectable } from '@nestjs/common';
import { and, eq, gt, inArray, lt } from 'drizzle-orm';
import type { Db } from '../database';
import { loginFailures } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

/** Failed sign-ins, shared by every gateway replica (the login pacing's memory). */
@Injectable()
export class LoginFailuresRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /** The failures of these keys since `since`, as epoch milliseconds per key, oldest first. */
  async recent(keys: readonly string[], since: Date): Promise<Map<string, number[]>> {
    const found = new Map<string, number[]>(keys.map((k) => [k, []]));
    if (keys.length === 0) return found;
    const rows = await this.db
      .select()
      .from(loginFailures)
      .where(and(inArray(loginFailures.key, [...keys]), gt(loginFailures.at, since)))
      .orderBy(loginFailures.at);
    for (const row of rows) found.get(row.key)?.push(row.at.getTime());
    return found;
  }

  /** Records one failure for each key, and forgets what is older than `forgetBefore`. */
  async record(keys: readonly string[], at: Date, forgetBefore: Date): Promise<void> {
    await this.db.delete(loginFailures).where(lt(loginFailures.at, forgetBefore));
    if (keys.length > 0) await this.db.insert(loginFailures).values(keys.map((key) => ({ key, at })));
  }

  async clear(key: string): Promise<void> {
    await this.db.delete(loginFailures).where(eq(loginFailures.key, key));
  }
}
