import { Inject, Injectable } from '@nestjs/common';
import { and, eq, isNull, sql } from 'drizzle-orm';
import type { Db } from '../database';
import { environmentJobs, type EnvironmentJobRow, type EnvironmentJobState } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

interface TrackedJob {
  projectId: string;
  jobId: string;
  key: string;
  requestedBy: string | null;
  startedAt: Date;
}

interface JobEnd {
  state: Exclude<EnvironmentJobState, 'preparing'>;
  message: string | null;
  finishedAt: Date;
  logTail: string | null;
  logTailOffset: number | null;
}

/** The preparations of project environments the gateway follows (S8). */
@Injectable()
export class EnvironmentJobsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  /**
   * Records a job of a project as preparing, and names who asked for it when `requestedBy` is given
   * and nobody is named yet. True when this call recorded the job or named its requester: whoever
   * asked first is the one audited as asking, however the row came to be recorded (a status read
   * may record it before the request that began it is answered).
   */
  async track(job: TrackedJob): Promise<boolean> {
    const rows = await this.db
      .insert(environmentJobs)
      .values({ ...job, state: 'preparing' })
      .onConflictDoUpdate({
        target: [environmentJobs.projectId, environmentJobs.jobId],
        set: { requestedBy: sql`excluded.requested_by` },
        setWhere: and(isNull(environmentJobs.requestedBy), sql`excluded.requested_by IS NOT NULL`),
      })
      .returning({ jobId: environmentJobs.jobId });
    return rows.length > 0;
  }

  async find(projectId: string, jobId: string): Promise<EnvironmentJobRow | undefined> {
    const [row] = await this.db
      .select()
      .from(environmentJobs)
      .where(and(eq(environmentJobs.projectId, projectId), eq(environmentJobs.jobId, jobId)));
    return row;
  }

  /** The project's jobs whose end has not been recorded yet. */
  unfinished(projectId: string): Promise<EnvironmentJobRow[]> {
    return this.db
      .select()
      .from(environmentJobs)
      .where(and(eq(environmentJobs.projectId, projectId), eq(environmentJobs.state, 'preparing')));
  }

  /**
   * Records a job's end, once: only a row still `preparing` changes, so of several gateways (or
   * several readers of one) that see the same end, exactly one gets the row back and audits it.
   */
  async finish(projectId: string, jobId: string, end: JobEnd): Promise<EnvironmentJobRow | undefined> {
    const [row] = await this.db
      .update(environmentJobs)
      .set(end)
      .where(and(eq(environmentJobs.projectId, projectId), eq(environmentJobs.jobId, jobId), eq(environmentJobs.state, 'preparing')))
      .returning();
    return row;
  }
}
