import { Inject, Injectable } from '@nestjs/common';
import { and, desc, eq, max } from 'drizzle-orm';
import type { Db } from '../database';
import { policyVersions, projects, type PolicyVersionRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

interface PolicyPublication {
  document: unknown;
  sourceText: string;
  authorId: string | null;
  comment?: string | null;
}

/** Versions are immutable: this repository can add and read them, never change one. */
@Injectable()
export class PolicyVersionsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /**
   * Adds the project's next version. The project row is locked for the duration, so two publishes
   * at once get consecutive numbers instead of one failing. Undefined when the project does not exist.
   */
  publish(projectId: string, publication: PolicyPublication): Promise<PolicyVersionRow | undefined> {
    return this.db.transaction(async (tx) => {
      const [project] = await tx.select({ id: projects.id }).from(projects).where(eq(projects.id, projectId)).for('update');
      if (!project) return undefined;
      const [latest] = await tx
        .select({ version: max(policyVersions.version) })
        .from(policyVersions)
        .where(eq(policyVersions.projectId, projectId));
      const [row] = await tx
        .insert(policyVersions)
        .values({
          projectId,
          version: (latest?.version ?? 0) + 1,
          document: publication.document,
          sourceText: publication.sourceText,
          authorId: publication.authorId,
          comment: publication.comment ?? null,
        })
        .returning();
      return row;
    });
  }

  /** The version in force: the highest number. */
  async current(projectId: string): Promise<PolicyVersionRow | undefined> {
    const [row] = await this.db.select().from(policyVersions).where(eq(policyVersions.projectId, projectId)).orderBy(desc(policyVersions.version)).limit(1);
    return row;
  }

  /** The id and number of the version in force, without its document (read on every tool call). */
  async currentVersion(projectId: string): Promise<{ id: string; version: number } | undefined> {
    const [row] = await this.db
      .select({ id: policyVersions.id, version: policyVersions.version })
      .from(policyVersions)
      .where(eq(policyVersions.projectId, projectId))
      .orderBy(desc(policyVersions.version))
      .limit(1);
    return row;
  }

  async findByVersion(projectId: string, version: number): Promise<PolicyVersionRow | undefined> {
    const [row] = await this.db
      .select()
      .from(policyVersions)
      .where(and(eq(policyVersions.projectId, projectId), eq(policyVersions.version, version)));
    return row;
  }

  async findById(id: string): Promise<PolicyVersionRow | undefined> {
    const [row] = await this.db.select().from(policyVersions).where(eq(policyVersions.id, id));
    return row;
  }

  /** Newest first. */
  list(projectId: string): Promise<PolicyVersionRow[]> {
    return this.db.select().from(policyVersions).where(eq(policyVersions.projectId, projectId)).orderBy(desc(policyVersions.version));
  }
}
