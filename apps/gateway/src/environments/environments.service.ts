import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EnvironmentJobView, EnvironmentLog, EnvironmentRequestParsed, EnvironmentStatus, PrepareEnvironmentBody, RepositoryAccess } from '@lemniscate/contracts';
import type { Policy } from '@lemniscate/policy';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { EnvironmentJobsRepository } from '../db/repositories/environment-jobs.repository';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import type { ProjectRow } from '../db/schema';
import { EXEC_HOST, ExecHostCallError, toAppError, type ExecHostPort } from '../exec-host/exec-host.port';
import { PoliciesService } from '../projects/policies.service';
import { RepositoryAccessService } from '../projects/repository-access.service';
import { environmentRequestFor } from './environment-request';
import { LogTail, pageOfTail } from './log-tail';

/** How often a preparation the gateway follows is asked about, in milliseconds (tests set it lower). */
export const ENVIRONMENT_POLL_MS = Symbol('ENVIRONMENT_POLL_MS');
/** Calls in a row that may fail (an exec-host restarting) before a follower gives up; the next status read resumes it. */
const MAX_FOLLOW_FAILURES = 20;
/** A follower stops this long after the set-up's own time limit; a job still preparing then is picked up by the next status read. */
const FOLLOW_MARGIN_MS = 10 * 60_000;

const LOST_MESSAGE = "The exec-host no longer reports this preparation's result (the project's inputs changed since, or the exec-host lost the job).";

type Project = Pick<ProjectRow, 'id' | 'name' | 'repositorySource' | 'defaultRef'>;

/**
 * A project's environment (S8): the devcontainer at the project's default ref, prepared by the
 * exec-host with network to the policy's mirrors only and cached by a hash of its inputs.
 *
 * The gateway reads its status, asks for preparations (a person's, or one a session start asks for
 * when nothing was ever prepared for the current inputs), serves the preparation's log, and records
 * every preparation of the project in `environment_jobs`: a job's end is seen by a follower that
 * polls the exec-host, or by the next status read after a restart, and whichever sees it first moves
 * the row out of `preparing` and audits it; the row keeps the final state and the log's last 64 KiB
 * once the exec-host has cleaned its cache. Who may read: the project's members; who may prepare:
 * whoever may start a session in it (administrators and developer members), never a security officer.
 */
@Injectable()
export class EnvironmentsService implements OnModuleDestroy {
  private readonly logger = new Logger('Environments');
  /** Followers running in this process, by project and job. */
  private readonly followers = new Map<string, Promise<void>>();
  /** What each follower has read of its job's log so far. */
  private readonly tails = new Map<string, LogTail>();
  /** Preparations session starts asked for and the exec-host has not answered yet, by project: concurrent starts share one. */
  private readonly starting = new Map<string, Promise<EnvironmentStatus>>();
  private readonly stopping = new AbortController();

  constructor(
    @Inject(EXEC_HOST) private readonly execHost: ExecHostPort,
    private readonly projects: ProjectsRepository,
    private readonly policies: PoliciesService,
    private readonly jobs: EnvironmentJobsRepository,
    private readonly access: AccessService,
    private readonly audit: AuditService,
    @Inject(ENVIRONMENT_POLL_MS) private readonly pollMs: number,
    private readonly repositoryAccess: RepositoryAccessService,
  ) {}

  // ───────────────────────────── the API

  async status(principal: Principal, projectId: string): Promise<EnvironmentStatus> {
    const project = await this.find(projectId);
    await this.mayRead(principal, project);
    return this.observe(project, await this.requestFor(project));
  }

  async prepare(principal: Principal, projectId: string, body: PrepareEnvironmentBody): Promise<EnvironmentStatus> {
    const project = await this.find(projectId);
    await this.mayPrepare(principal, project);
    const request = await this.requestFor(project);
    let status: EnvironmentStatus;
    try {
      status = await this.execHost.prepareEnvironment({ ...request, force: body.force });
    } catch (err) {
      const error = toAppError(err, `prepare the environment of project "${project.name}"`);
      await this.audit.record({
        actor: actorOf(principal),
        kind: 'environment.prepare_requested',
        projectId: project.id,
        payload: { key: null, force: body.force, automatic: false, jobId: null, state: null, refused: error.message },
      });
      throw error;
    }
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'environment.prepare_requested',
      projectId: project.id,
      payload: { key: status.key, force: body.force, automatic: false, jobId: status.job?.jobId ?? null, state: status.state },
    });
    if (status.job) await this.track(project.id, status.job, principal.userId);
    await this.reconcile(project, status);
    return status;
  }

  async log(principal: Principal, projectId: string, jobId: string, offset: number): Promise<EnvironmentLog> {
    const project = await this.find(projectId);
    await this.mayRead(principal, project);
    let row = await this.jobs.find(project.id, jobId);
    if (!row) {
      // The exec-host's latest job for the project's inputs, not seen here yet: a status read records it.
      await this.observe(project, await this.requestFor(project)).catch(() => undefined);
      row = await this.jobs.find(project.id, jobId);
    }
    if (!row) throw new AppError(ErrorCode.NotFound, `Project "${project.name}" has no environment preparation ${jobId}; \`lemni env status --project ${project.name}\` names the latest.`);
    try {
      return await this.execHost.environmentLog(jobId, offset);
    } catch (err) {
      // The exec-host cleaned its cache: the end of the log kept with the job's end is what remains.
      if (err instanceof ExecHostCallError && err.code === 'job_not_found' && row.state !== 'preparing' && row.logTail !== null) {
        return pageOfTail(jobId, row.logTail, row.logTailOffset ?? 0, offset);
      }
      throw toAppError(err, `read the log of environment preparation ${jobId}`);
    }
  }

  // ───────────────────────────── session starts

  /**
   * For a session start (after its access check): the environment request every sandbox of the session
   * is created with, once the project's environment is ready or the repository has none. Otherwise the
   * start is refused with a sentence: preparing (follow it), failed (read the log, prepare again), or
   * never prepared for the current inputs, in which case a preparation starts now, once, whoever else
   * starts a session meanwhile. A status the exec-host cannot give (not reachable, an older exec-host)
   * does not refuse the start here: the sandbox's creation carries the same request and decides.
   */
  async forSession(principal: Principal, project: Project, policy: Policy, access: RepositoryAccess | undefined): Promise<EnvironmentRequestParsed> {
    const request = environmentRequestFor(project, policy, access);
    let status: EnvironmentStatus;
    try {
      status = await this.observe(project, request);
    } catch (err) {
      if (err instanceof AppError && err.code === ErrorCode.EnvironmentInvalid) throw err;
      this.logger.warn({ err, projectId: project.id }, 'the environment status could not be read; the sandbox creation decides');
      return request;
    }
    const started = status.state === 'not_prepared';
    if (started) status = await this.startForSession(principal, project, request);
    switch (status.state) {
      case 'base':
      case 'ready':
        return request;
      case 'preparing':
        throw new AppError(ErrorCode.EnvironmentNotReady, started ? startedSentence(project.name, status) : preparingSentence(project.name, status));
      case 'failed':
        throw new AppError(ErrorCode.EnvironmentNotReady, failedSentence(project.name, status));
      case 'not_prepared':
        throw new AppError(ErrorCode.EnvironmentNotReady, `${status.message} Prepare it with \`lemni env prepare --project ${project.name}\`.`);
    }
  }

  /** One preparation per project for concurrent session starts on this gateway; the exec-host joins those of other gateways. */
  private startForSession(principal: Principal, project: Project, request: EnvironmentRequestParsed): Promise<EnvironmentStatus> {
    const pending = this.starting.get(project.id);
    if (pending) return pending;
    const started = (async () => {
      let status: EnvironmentStatus;
      try {
        status = await this.execHost.prepareEnvironment({ ...request, force: false });
      } catch (err) {
        throw toAppError(err, `prepare the environment of project "${project.name}"`);
      }
      // Audited by whichever start names itself as the job's requester first: one entry per preparation
      // session starts caused, whether this gateway or a status read elsewhere recorded the job's row.
      if (status.job && (await this.track(project.id, status.job, principal.userId))) {
        await this.audit.record({
          actor: actorOf(principal),
          kind: 'environment.prepare_requested',
          projectId: project.id,
          payload: { key: status.key, force: false, automatic: true, jobId: status.job.jobId, state: status.state },
        });
      }
      await this.reconcile(project, status);
      return status;
    })().finally(() => this.starting.delete(project.id));
    this.starting.set(project.id, started);
    return started;
  }

  // ───────────────────────────── following preparations

  /** The exec-host's status of the project's environment, with the project's jobs brought up to date from it. */
  private async observe(project: Project, request: EnvironmentRequestParsed): Promise<EnvironmentStatus> {
    let status: EnvironmentStatus;
    try {
      status = await this.execHost.environmentStatus(request);
    } catch (err) {
      throw toAppError(err, `read the environment of project "${project.name}"`);
    }
    await this.reconcile(project, status);
    return status;
  }

  /**
   * Records the job the exec-host names, follows it while it prepares or records its end, and
   * resumes following the project's jobs whose end was not seen (after a restart of this gateway).
   */
  private async reconcile(project: Project, status: EnvironmentStatus): Promise<void> {
    const job = status.job;
    if (job) {
      await this.track(project.id, job, null);
      if (job.state === 'preparing') this.follow(project.id, job.jobId);
      else await this.recordEnd(project.id, job);
    }
    for (const row of await this.jobs.unfinished(project.id)) if (row.jobId !== job?.jobId) this.follow(project.id, row.jobId);
  }

  /** Records a job as preparing, naming `requestedBy` as its requester if nobody is yet: true when this call recorded it or named them. */
  private track(projectId: string, job: EnvironmentJobView, requestedBy: string | null): Promise<boolean> {
    return this.jobs.track({ projectId, jobId: job.jobId, key: job.key, requestedBy, startedAt: new Date(job.startedAt) });
  }

  /** Starts following a job in the background unless this process already does. */
  private follow(projectId: string, jobId: string): void {
    const id = `${projectId}\u0000${jobId}`;
    if (this.followers.has(id) || this.stopping.signal.aborted) return;
    const tail = new LogTail();
    this.tails.set(id, tail);
    const run = this.followLoop(projectId, jobId, tail)
      .catch((err: unknown) => this.logger.warn({ err, projectId, jobId }, 'stopped following an environment preparation; the next status read resumes it'))
      .finally(() => {
        this.followers.delete(id);
        this.tails.delete(id);
      });
    this.followers.set(id, run);
  }

  private async followLoop(projectId: string, jobId: string, tail: LogTail): Promise<void> {
    const signal = this.stopping.signal;
    let failures = 0;
    let deadline = Number.POSITIVE_INFINITY;
    for (;;) {
      try {
        await sleep(this.pollMs, undefined, { signal });
      } catch {
        return; // shutting down
      }
      try {
        const row = await this.jobs.find(projectId, jobId);
        const project = await this.projects.findById(projectId);
        if (!row || row.state !== 'preparing' || !project) return;
        const request = await this.requestFor(project);
        if (deadline === Number.POSITIVE_INFINITY) deadline = Date.now() + request.setupTimeoutSeconds * 1000 + FOLLOW_MARGIN_MS;
        const status = await this.execHost.environmentStatus(request, signal);
        const seen = await tail.readOn(this.execHost, jobId, signal);
        if (status.job?.jobId === jobId) {
          if (status.job.state !== 'preparing') return await this.recordEnd(projectId, status.job, tail);
        } else if (seen === 'gone' || seen.complete) {
          // Over, but the exec-host no longer names it for the project's inputs: its result cannot be known.
          return await this.recordLost(projectId, row.key, jobId, row.startedAt, seen === 'gone' ? null : tail);
        }
        failures = 0;
      } catch (err) {
        if (signal.aborted) return;
        if (++failures >= MAX_FOLLOW_FAILURES) throw err;
      }
      if (Date.now() > deadline) return;
    }
  }

  /** Records a job's end and audits it, once: only the caller that moves the row out of `preparing` audits. */
  private async recordEnd(projectId: string, job: EnvironmentJobView, followed?: LogTail): Promise<void> {
    if (job.state === 'preparing') return;
    const row = await this.jobs.find(projectId, job.jobId);
    if (!row || row.state !== 'preparing') return;
    const tail = followed?.clone() ?? this.tails.get(`${projectId}\u0000${job.jobId}`)?.clone() ?? new LogTail();
    const read = await tail.readOn(this.execHost, job.jobId).catch(() => 'gone' as const);
    const finishedAt = job.finishedAt ? new Date(job.finishedAt) : new Date();
    const ended = await this.jobs.finish(projectId, job.jobId, {
      state: job.state,
      message: job.message,
      finishedAt,
      ...(read === 'gone' && tail.offset === 0 ? { logTail: null, logTailOffset: null } : { logTail: storable(tail.text), logTailOffset: tail.start }),
    });
    if (!ended) return;
    await this.audit.record({
      actor: 'system',
      kind: job.state === 'ready' ? 'environment.prepared' : 'environment.prepare_failed',
      projectId,
      payload: { key: job.key, jobId: job.jobId, message: job.message, warnings: job.warnings, durationMs: Math.max(0, finishedAt.getTime() - ended.startedAt.getTime()) },
    });
  }

  private async recordLost(projectId: string, key: string, jobId: string, startedAt: Date, tail: LogTail | null): Promise<void> {
    const finishedAt = new Date();
    const ended = await this.jobs.finish(projectId, jobId, {
      state: 'lost',
      message: LOST_MESSAGE,
      finishedAt,
      ...(tail && tail.offset > 0 ? { logTail: storable(tail.text), logTailOffset: tail.start } : { logTail: null, logTailOffset: null }),
    });
    if (!ended) return;
    await this.audit.record({
      actor: 'system',
      kind: 'environment.prepare_lost',
      projectId,
      payload: { key, jobId, message: LOST_MESSAGE, durationMs: Math.max(0, finishedAt.getTime() - startedAt.getTime()) },
    });
  }

  /** Followers end with the application, before the database closes. */
  async onModuleDestroy(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.followers.values(), ...this.starting.values()]);
  }

  /** Resolves once every follower running now has ended (tests). */
  async settled(): Promise<void> {
    while (this.followers.size > 0) await Promise.allSettled([...this.followers.values()]);
  }

  // ───────────────────────────── helpers

  private async requestFor(project: Project): Promise<EnvironmentRequestParsed> {
    return environmentRequestFor(project, (await this.policies.inForce(project.id)).policy, await this.repositoryAccess.accessFor(project));
  }

  private async find(projectId: string): Promise<ProjectRow> {
    const project = await this.projects.findById(projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${projectId}.`);
    return project;
  }

  /** Any member of the project reads its environment, as its other routes (`read Project`). */
  private mayRead(principal: Principal, project: Project): Promise<void> {
    return this.access.require(principal, 'read', 'Project', { id: project.id });
  }

  /** Preparing is what a session start does when nothing is prepared: whoever may start a session in the project may prepare. */
  private mayPrepare(principal: Principal, project: Project): Promise<void> {
    return this.access.require(principal, 'create', 'Session', { projectId: project.id, userId: principal.userId });
  }
}

/** "3/5 running postCreateCommand" */
export function progressOf(job: EnvironmentJobView): string {
  return `${job.progress.done}/${job.progress.total} ${job.progress.label}`;
}

function sentenceBody(text: string): string {
  return text.trim().replace(/[.\s]+$/, '');
}

function preparingSentence(name: string, status: EnvironmentStatus): string {
  const job = status.job ? ` (job ${status.job.jobId}, ${progressOf(status.job)})` : '';
  return `The environment of project "${name}" is being prepared${job}; sessions start once it is ready. Follow it with \`lemni env logs --project ${name} --follow\`.`;
}

function startedSentence(name: string, status: EnvironmentStatus): string {
  const job = status.job ? ` (job ${status.job.jobId})` : '';
  return `The environment of project "${name}" was never prepared for its current inputs: its preparation has started${job}, and sessions start once it is ready. Follow it with \`lemni env logs --project ${name} --follow\`.`;
}

function failedSentence(name: string, status: EnvironmentStatus): string {
  const why = status.job?.message ?? status.message;
  return `The preparation of the environment of project "${name}" failed${why ? `: ${sentenceBody(why)}` : ''}. Sessions are refused until it is prepared: read its log with \`lemni env logs --project ${name}\`, fix the devcontainer, or prepare it again with \`lemni env prepare --project ${name} --force\`.`;
}

/** PostgreSQL text cannot hold U+0000. */
function storable(text: string): string {
  return text.replace(/\u0000/g, '\uFFFD');
}
