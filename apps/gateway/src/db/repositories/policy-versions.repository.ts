import { Inject, Injectable } from '@nestjs/common';
import { and, desc, eq, max } from 'drizzle-orm';
import { Pool } from 'pg';
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

type VersionInForce = { id: string; version: number };

/** The most projects whose version in force is kept in memory (PGlite). */
const MAX_KEPT_PROJECTS = 1024;

/** Versions are immutable: this repository can add and read them, never change one. */
@Injectable()
export class PolicyVersionsRepository extends Repository {
  /**
   * On PGlite, the version in force per project, kept in memory: one process holds that database,
   * and every version is added through `publish` below, which forgets its project's entry before
   * and after. A read that began before a publish does not keep what it read (the generation moved).
   * On PostgreSQL other replicas publish too, so it is read on every call.
   */
  private readonly kept: { generation: number; byProject: Map<string, VersionInForce | null> } | undefined;

  constructor(@Inject(DB) db: Db) {
    super(db);
    this.kept = (db as { $client?: unknown }).$client instanceof Pool ? undefined : { generation: 0, byProject: new Map() };
  }

  /**
   * Adds the project's next version. The project row is locked for the duration, so two publishes
   * at once get consecutive numbers instead of one failing. Undefined when the project does not exist.
   * Not to be called inside a caller's transaction: the version in force kept on PGlite is forgotten
   * when this one ends.
   */
  async publish(projectId: string, publication: PolicyPublication): Promise<PolicyVersionRow | undefined> {
    this.forget(projectId);
    try {
      return await this.insertNext(projectId, publication);
    } finally {
      this.forget(projectId);
    }
  }

  private forget(projectId: string): void {
    if (!this.kept) return;
    this.kept.generation++;
    this.kept.byProject.delete(projectId);
  }

  private insertNext(projectId: string, publication: PolicyPublication): Promise<PolicyVersionRow | undefined> {
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

  /** The id and number of the version in force, without its document (asked on every tool call). */
  async currentVersion(projectId: string): Promise<VersionInForce | undefined> {
    const kept = this.kept;
    if (kept?.byProject.has(projectId)) return kept.byProject.get(projectId) ?? undefined;
    const generation = kept?.generation;
    const [row] = await this.db
      .select({ id: policyVersions.id, version: policyVersions.version })
      .from(policyVersions)
      .where(eq(policyVersions.projectId, projectId))
      .orderBy(desc(policyVersions.version))
      .limit(1);
    if (kept && kept.generation === generation) {
      if (kept.byProject.size >= MAX_KEPT_PROJECTS) kept.byProject.delete(kept.byProject.keys().next().value as string);
      kept.byProject.set(projectId, row ?? null);
    }
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
