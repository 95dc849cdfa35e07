import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import type { ApprovedCommand } from '@lemniscate/policy';
import type { PolicyDecision, SandboxInfo } from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { AppError, ErrorCode } from '../common/errors';
import { withDbRetry } from '../db/retry';
import { ApprovedCommandsRepository } from '../db/repositories/approved-commands.repository';
import { ApprovalsRepository } from '../db/repositories/approvals.repository';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { ToolCallsRepository } from '../db/repositories/tool-calls.repository';
import { EventsService } from '../events/events.service';
import { ApprovalsService } from '../sessions/approvals.service';
import { ProposalNotRecorded, type ApprovalDraft, type ApprovalOutcome, type EventDraft, type Progress, type SessionEnd, type SessionRecorder, type ToolResultRecord } from './ports';
import { SessionWrites } from './session-writes';

export interface DbRecorderDeps {
  sessions: SessionsRepository;
  toolCalls: ToolCallsRepository;
  approvals: ApprovalsRepository;
  approvalsService: ApprovalsService;
  approvedCommands: ApprovedCommandsRepository;
  audit: AuditService;
  events: EventsService;
}

/** Opens the database recorder of each session a tree runs: what the recorders write to, injected once. */
@Injectable()
export class DbRecorders implements DbRecorderDeps {
  constructor(
    readonly sessions: SessionsRepository,
    readonly toolCalls: ToolCallsRepository,
    readonly approvals: ApprovalsRepository,
    readonly approvalsService: ApprovalsService,
    readonly approvedCommands: ApprovedCommandsRepository,
    readonly audit: AuditService,
    readonly events: EventsService,
  ) {}

  private readonly logger = new Logger('SessionWrites');

  /**
   * The recorder of one session. The sessions of a tree share `writes`, so the events of a subagent
   * and of its parent keep the order they were emitted in on the root's stream.
   */
  open(session: { id: string; projectId: string; rootId: string; agent: string }, writes: SessionWrites = this.writes()): DbSessionRecorder {
    return new DbSessionRecorder(this, session, writes);
  }

  /** The queue of a new session tree's writes that its loop does not wait for. */
  writes(): SessionWrites {
    return new SessionWrites(this.events, (what, work) =>
      withDbRetry(work, { onRetry: ({ attempt, reason, delayMs }) => this.logger.warn({ what, attempt, reason, delayMs }, 'session writes: the database is unreachable; retrying') }),
    );
  }
}

/**
 * Events the gateway's services publish themselves when the loop calls them (an approval opened or
 * answered); the loop's own copies are not published twice.
 */
const PUBLISHED_BY_SERVICES = new Set(['approval_requested', 'approval_answered']);
const TERMINAL = new Set(['session_completed', 'session_stopped', 'session_failed']);

/**
 * The session loop's recorder on the gateway's database: tool calls and decisions, approvals through
 * the approvals service (one queue for the whole session tree, labelled with the agent), audit
 * entries and live events. Events of a subagent go out on the root session's stream, carrying the
 * child's id, so the developer follows one stream and answers at one approval point.
 *
 * Every write is retried across a short database outage (db/retry.ts; the audit and events services
 * retry their own): a PostgreSQL restart pauses the session instead of ending it. A write that may
 * have landed before the connection broke is made idempotent (the tool call's id and number are
 * chosen here and looked up before a retry; updates set values rather than add to them).
 *
 * What guards a call is awaited: its row and the audit entries of its proposal and decision. Live
 * events, progress counters and a call's later decision and result rows are queued (SessionWrites)
 * and written while the loop goes on; an approval request and the ending wait for them.
 */
export class DbSessionRecorder implements SessionRecorder {
  private endedByOthers = false;
  /** The number of the session's last tool call (its row's `seq`): this recorder is the session's only writer of calls. */
  private calls = 0;
  /** Set once this recorder started writing the ending: a status found afterwards may be its own. */
  private ending = false;
  private readonly logger = new Logger('SessionRecorder');

  constructor(
    private readonly deps: DbRecorderDeps,
    private readonly session: { id: string; projectId: string; rootId: string; agent: string },
    private readonly writes: SessionWrites = new SessionWrites(deps.events, (what, work) => withDbRetry(work)),
  ) {}

  async emit(event: EventDraft): Promise<void> {
    if (PUBLISHED_BY_SERVICES.has(event.type)) return;
    // A stop or a revocation already announced the ending (and said why); the loop's copy is redundant.
    if (TERMINAL.has(event.type) && this.endedByOthers) return;
    // The root's stream ends at a terminal event, so a child's ending must not look like one: its
    // parent announces it with `subagent_finished`, and the child's own row records it.
    if (TERMINAL.has(event.type) && this.session.rootId !== this.session.id) return;
    const { type, ...fields } = event;
    const payload: Record<string, unknown> = { ...fields };
    if (this.session.rootId !== this.session.id) payload.subSessionId = this.session.id;
    this.writes.event({ type, sessionId: this.session.rootId, projectId: this.session.projectId, payload });
  }

  async flush(): Promise<void> {
    await this.writes.flush();
  }

  async audit(kind: string, payload: Record<string, unknown>): Promise<void> {
    await this.deps.audit.record({ actor: `agent:${this.session.agent}`, kind, projectId: this.session.projectId, sessionId: this.session.id, payload });
  }

  async proposeToolCall(call: { name: string; arguments: Record<string, unknown>; agent: string }, decision?: PolicyDecision, progress?: Progress): Promise<string> {
    // The deployment refuses what no audit sink can record: the call is not proposed, nor run.
    const refusal = this.deps.audit.refusal();
    if (refusal) throw new AppError(ErrorCode.AuditUnrecorded, refusal);
    const id = randomUUID();
    const seq = ++this.calls;
    // The row and the audit entries are written at once: the entries are queued in this order (the
    // audit service chains them as called), and usually share one transaction with other sessions'.
    const inserted = this.retry('tool call', async (attempt) => {
      // A retry after a broken connection: the first insert may have committed.
      const landed = attempt > 1 ? await this.deps.toolCalls.findById(id) : undefined;
      return landed ?? (await this.deps.toolCalls.create({ id, seq, sessionId: this.session.id, name: call.name, arguments: call.arguments, decision: decision ?? null, agent: call.agent }, progress));
    });
    const proposed = this.deps.audit.record({
      actor: `agent:${call.agent}`,
      kind: 'tool_call.proposed',
      projectId: this.session.projectId,
      sessionId: this.session.id,
      payload: { callId: id, seq, name: call.name, arguments: call.arguments },
    });
    const decided = decision ? this.audit('policy.decision', { callId: id, tool: call.name, arguments: call.arguments, ...decision }) : undefined;
    const [row, ...entries] = await Promise.allSettled([inserted, proposed, ...(decided ? [decided] : [])]);
    const entryFailed = entries.find((e): e is PromiseRejectedResult => e.status === 'rejected');
    if (entryFailed) throw entryFailed.reason;
    if (row.status === 'rejected') throw new ProposalNotRecorded(id, row.reason);
    return id;
  }

  async recordDecision(callId: string, decision: PolicyDecision): Promise<void> {
    this.writes.op(() => this.retry('decision', () => this.deps.toolCalls.update(callId, { decision })));
  }

  async recordResult(callId: string, result: ToolResultRecord): Promise<void> {
    this.writes.op(() => this.retry('result', () => this.deps.toolCalls.update(callId, { result })));
  }

  async requestApproval(draft: ApprovalDraft, signal: AbortSignal, timeoutMs: number): Promise<ApprovalOutcome> {
    // Listen before asking, so an answer arriving at once is not missed.
    let settle!: (o: ApprovalOutcome) => void;
    let fail!: (e: unknown) => void;
    const answered = new Promise<ApprovalOutcome>((resolve, reject) => {
      settle = resolve;
      fail = reject;
    });
    let approvalId: string | null = null;
    const check = async () => {
      if (!approvalId) return;
      const id = approvalId;
      const row = await this.retry('approval', () => this.deps.approvals.findById(id));
      if (!row || row.state === 'pending') return;
      if (row.state === 'approved') {
        settle({ state: 'approved', approvalId, decidedBy: row.decidedBy ?? 'unknown', response: row.response });
      } else if (row.state === 'refused_headless') {
        settle({ state: 'refused_headless', approvalId });
      } else {
        settle({ state: row.state === 'expired' ? 'expired' : 'rejected', approvalId, decidedBy: row.decidedBy ?? null, reason: row.state === 'rejected' ? row.reason : null });
      }
    };
    const unsubscribe = this.deps.events.subscribe((event) => {
      if (event.type === 'approval_answered' && event.payload.approvalId === approvalId) void check().catch(fail);
    });
    const onAbort = () => fail(signal.reason ?? new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    const expiresAt = new Date(Date.now() + timeoutMs);
    let timer: NodeJS.Timeout | undefined;
    try {
      // The request's own events follow what the loop has emitted so far.
      await this.writes.flush();
      if (signal.aborted) throw signal.reason ?? new Error('aborted');
      const view = await this.deps.approvalsService.request({
        sessionId: this.session.id,
        toolCallId: draft.toolCallId,
        kind: draft.kind,
        payload: draft.payload,
        flags: draft.flags,
        agent: draft.agent,
        expiresAt,
      });
      approvalId = view.id;
      if (view.state === 'refused_headless') return { state: 'refused_headless', approvalId: view.id };
      const id = view.id;
      // Nothing waits forever (L1, X4): unanswered at its deadline, the request expires; a person who
      // answered a moment before wins, since only a pending row is updated.
      timer = setTimeout(
        () => {
          const seconds = Math.round(timeoutMs / 1000);
          void this.deps.approvalsService
            .expire(id, `nobody answered within ${seconds} second${seconds === 1 ? '' : 's'}`)
            .then(() => check())
            .catch(fail);
        },
        Math.max(0, expiresAt.getTime() - Date.now()),
      );
      await check();
      return await answered;
    } finally {
      if (timer) clearTimeout(timer);
      unsubscribe();
      signal.removeEventListener('abort', onAbort);
      // The wait ended without an answer because the loop was cancelled (a clean gateway stop, an
      // ending elsewhere): the request must not stay pending, answerable, for a session that is over.
      // A stop or revocation has already closed it, and then nothing changes (only pending rows are).
      if (approvalId && signal.aborted) {
        await this.deps.approvalsService.expire(approvalId, 'the session ended before anyone answered').catch(() => undefined);
      }
    }
  }

  async approvedCommands(): Promise<ApprovedCommand[]> {
    // A row whose approval is gone (never, short of a deleted session) names no approval: not used.
    return (await this.retry('approved commands', () => this.deps.approvedCommands.listForSession(this.session.id))).flatMap((r) =>
      r.approvalId ? [{ command: r.command, workingDirectory: r.workingDirectory, approvalId: r.approvalId }] : [],
    );
  }

  async recordWorkingCopy(info: SandboxInfo): Promise<void> {
    if (this.session.rootId !== this.session.id) return;
    await this.retry('working copy', () =>
      this.deps.sessions.update(this.session.id, {
        baseCommit: info.baseCommit,
        branch: info.branch,
        includedUncommitted: info.includedUncommitted,
        fingerprintStart: info.fingerprint,
        // Nothing kept yet: the tree kept so far is the start's (X3).
        fingerprintEnd: info.fingerprint,
        sandboxId: info.sandboxId,
      }),
    );
  }

  async recordProgress(progress: Progress): Promise<void> {
    this.writes.op(() => this.retry('progress', () => this.deps.sessions.update(this.session.id, progress)));
  }

  async recordPatch(patch: string, fingerprint: string): Promise<void> {
    await this.retry('patch', () => this.deps.sessions.update(this.session.rootId, { finalPatch: patch, fingerprintEnd: fingerprint }));
  }

  async keepingChange(): Promise<void> {
    await this.retry('keeping change', () => this.deps.sessions.update(this.session.rootId, { fingerprintEnd: null }));
  }

  async finish(end: SessionEnd): Promise<void> {
    // The events, counters and results still queued are written first: the ending's own are the
    // last word. A write that failed is still queued (the database was away): its failure is thrown
    // once, by the first flush (the loop has ended on it, or ends now), and the second writes it,
    // so a call in the audit log is never missing from the stream.
    await this.writes.flush().catch(() => this.writes.flush());
    await this.retry('session end', () => this.end(end));
  }

  /** Idempotent: run again after a broken connection, it finds its own ending already written and keeps it. */
  private async end(end: SessionEnd): Promise<void> {
    const current = await this.deps.sessions.findById(this.session.id);
    const patch = end.finalPatch ?? current?.finalPatch ?? null;
    if (current && current.status !== 'running' && !this.ending) {
      // Stopped or revoked by a person: keep their status and reason, add what the loop knows.
      this.endedByOthers = true;
      await this.deps.sessions.update(this.session.id, {
        finalPatch: patch,
        ...(end.fingerprintEnd !== undefined ? { fingerprintEnd: end.fingerprintEnd } : {}),
        summary: end.summary,
        actionsUsed: end.actionsUsed,
        extensionsUsed: end.extensionsUsed,
      });
      return;
    }
    if (current && current.status !== 'running') return;
    this.ending = true;
    await this.deps.sessions.update(this.session.id, { actionsUsed: end.actionsUsed, extensionsUsed: end.extensionsUsed });
    await this.deps.sessions.end(this.session.id, {
      status: end.status,
      stopReason: end.stopReason,
      summary: end.summary,
      finalPatch: patch,
      // Unread at the end: the fingerprint recorded with the last patch stands (null while a change was being kept).
      ...(end.fingerprintEnd !== undefined ? { fingerprintEnd: end.fingerprintEnd } : {}),
    });
  }

  private retry<T>(what: string, work: (attempt: number) => Promise<T>): Promise<T> {
    return withDbRetry(work, {
      onRetry: ({ attempt, reason, delayMs }) => this.logger.warn({ sessionId: this.session.id, what, attempt, reason, delayMs }, 'session recorder: the database is unreachable; retrying'),
    });
  }
}
