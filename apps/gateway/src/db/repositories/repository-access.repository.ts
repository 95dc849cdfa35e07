import { Inject, Injectable } from '@nestjs/common';
import { eq } from 'drizzle-orm';
import type { Db } from '../database';
import { repositoryAccess, type RepositoryAccessRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

export type RepositoryAccessValues = Omit<RepositoryAccessRow, 'projectId' | 'updatedAt'>;

/** A project's repository access (0011_repository_access): one row per project, replaced whole. */
@Injectable()
export class RepositoryAccessRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async find(projectId: string): Promise<RepositoryAccessRow | undefined> {
    const [row] = await this.db.select().from(repositoryAccess).where(eq(repositoryAccess.projectId, projectId));
    return row;
  }

  async put(projectId: string, values: RepositoryAccessValues, at: Date = new Date()): Promise<RepositoryAccessRow> {
    const [row] = await this.db
      .insert(repositoryAccess)
      .values({ projectId, ...values, updatedAt: at })
      .onConflictDoUpdate({ target: repositoryAccess.projectId, set: { ...values, updatedAt: at } })
      .returning();
    return row!;
  }

  /** True when there was one. */
  async remove(projectId: string): Promise<boolean> {
    const removed = await this.db.delete(repositoryAccess).where(eq(repositoryAccess.projectId, projectId)).returning({ projectId: repositoryAccess.projectId });
    return removed.length > 0;
  }
}
