import { Inject, Injectable } from '@nestjs/common';
import { asc, eq, inArray } from 'drizzle-orm';
import type { Db } from '../database';
import { projectMemberships, projects, type NewProject, type ProjectRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

type ProjectPatch = Partial<Pick<ProjectRow, 'name' | 'repositorySource' | 'defaultRef'>>;

@Injectable()
export class ProjectsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  async create(project: NewProject): Promise<ProjectRow> {
    const [row] = await this.db.insert(projects).values(project).returning();
    return row as ProjectRow;
  }

  async findById(id: string): Promise<ProjectRow | undefined> {
    const [row] = await this.db.select().from(projects).where(eq(projects.id, id));
    return row;
  }

  /** The names of these projects, read in one query (as UsersRepository.emailsOf reads emails). */
  async namesOf(ids: Iterable<string>): Promise<Map<string, string>> {
    const wanted = [...new Set(ids)];
    if (wanted.length === 0) return new Map();
    const rows = await this.db.select({ id: projects.id, name: projects.name }).from(projects).where(inArray(projects.id, wanted));
    return new Map(rows.map((r) => [r.id, r.name]));
  }

  async findByName(name: string): Promise<ProjectRow | undefined> {
    const [row] = await this.db.select().from(projects).where(eq(projects.name, name));
    return row;
  }

  list(): Promise<ProjectRow[]> {
    return this.db.select().from(projects).orderBy(asc(projects.name));
  }

  /** The projects a user is a member of. */
  async listForUser(userId: string): Promise<ProjectRow[]> {
    const rows = await this.db
      .select({ project: projects })
      .from(projects)
      .innerJoin(projectMemberships, eq(projectMemberships.projectId, projects.id))
      .where(eq(projectMemberships.userId, userId))
      .orderBy(asc(projects.name));
    return rows.map((r) => r.project);
  }

  async update(id: string, patch: ProjectPatch): Promise<ProjectRow | undefined> {
    const [row] = await this.db.update(projects).set(patch).where(eq(projects.id, id)).returning();
    return row;
  }

  /** Refused by the database while sessions still reference the project (they are history). */
  async delete(id: string): Promise<boolean> {
    const rows = await this.db.delete(projects).where(eq(projects.id, id)).returning({ id: projects.id });
    return rows.length > 0;
  }
}
