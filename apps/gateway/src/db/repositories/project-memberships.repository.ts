import { Inject, Injectable } from '@nestjs/common';
import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../database';
import { projectMemberships, users, type ProjectMembershipRow, type UserRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

@Injectable()
export class ProjectMembershipsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /** Adding a member twice is not an error: the membership simply exists. */
  async add(userId: string, projectId: string): Promise<void> {
    await this.db.insert(projectMemberships).values({ userId, projectId }).onConflictDoNothing();
  }

  async remove(userId: string, projectId: string): Promise<boolean> {
    const rows = await this.db
      .delete(projectMemberships)
      .where(and(eq(projectMemberships.userId, userId), eq(projectMemberships.projectId, projectId)))
      .returning({ userId: projectMemberships.userId });
    return rows.length > 0;
  }

  async isMember(userId: string, projectId: string): Promise<boolean> {
    const rows = await this.db
      .select({ userId: projectMemberships.userId })
      .from(projectMemberships)
      .where(and(eq(projectMemberships.userId, userId), eq(projectMemberships.projectId, projectId)));
    return rows.length > 0;
  }

  /** Project ids of a user's memberships: what a CASL ability is built from. */
  async projectIdsOf(userId: string): Promise<string[]> {
    const rows = await this.db.select({ projectId: projectMemberships.projectId }).from(projectMemberships).where(eq(projectMemberships.userId, userId)).orderBy(asc(projectMemberships.projectId));
    return rows.map((r) => r.projectId);
  }

  /** A project's members with their accounts, by email. */
  async membersOf(projectId: string): Promise<{ user: UserRow; addedAt: Date }[]> {
    const rows = await this.db
      .select({ user: users, addedAt: projectMemberships.createdAt })
      .from(projectMemberships)
      .innerJoin(users, eq(users.id, projectMemberships.userId))
      .where(eq(projectMemberships.projectId, projectId))
      .orderBy(asc(users.email));
    return rows;
  }

  listForProject(projectId: string): Promise<ProjectMembershipRow[]> {
    return this.db.select().from(projectMemberships).where(eq(projectMemberships.projectId, projectId)).orderBy(asc(projectMemberships.userId));
  }
}
