import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { AnswerApprovalRequest, ApprovalFlags, ApprovalKind, ApprovalListQuery, ApprovalPayload, ApprovalView } from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { ApprovalsRepository, type ApprovalWithProject } from '../db/repositories/approvals.repository';
import { ApprovedCommandsRepository } from '../db/repositories/approved-commands.repository';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { UsersRepository } from '../db/repositories/users.repository';
import { Transactions } from '../db/repositories/transactions';
import { withDbRetry } from '../db/retry';
import type { ApprovalRow, SessionRow } from '../db/schema';
import { EventsService } from '../events/events.service';
import { MetricsService } from '../metrics/metrics.service';
import { PoliciesService } from '../projects/policies.service';
import { toApprovalView } from './views';

interface ApprovalRequest {
  sessionId: string;
  toolCallId?: string | null;
  kind: ApprovalKind;
  payload: ApprovalPayload;
  flags?: ApprovalFlags;
  agent: string;
  /** When the request expires unanswered; announced with it and audited. */
  expiresAt?: Date;
}

type Answer = 'approved' | 'rejected';

/** The event stream's kinds: a write is shown as a diff, a third-party change as flagged changes. */
const EVENT_KIND: Record<ApprovalKind, 'command' | 'diff' | 'changes' | 'extension' | 'question'> = {
  command: 'command',
  write: 'diff',
  changes: 'changes',
  third_party: 'changes',
  extension: 'extension',
  question: 'question',
};

function subjectText(payload: ApprovalPayload): string {
  if ('command' in payload) return payload.command;
  if ('diff' in payload) return payload.diff;
  if ('question' in payload) return payload.question;
  return `+${payload.amount} ${payload.extension}`;
}

/**
 * A question (AG5) is answered with text and declined by rejecting it; every other approval is a
 * yes or a no and takes no text. Both mistakes are refused with what to send instead.
 */
function checkResponse(kind: ApprovalKind, answer: Answer, response: string | undefined): void {
  if (kind === 'question') {
    if (answer === 'approved' && response === undefined) {
      throw new AppError(
        ErrorCode.ValidationFailed,
        'response: a question is answered with text — one of its options or your own words; reject it to let the agent state its assumption and continue.',
      );
    }
    if (answer === 'rejected' && response !== undefined) {
      throw new AppError(ErrorCode.ValidationFailed, 'response: rejecting a question declines it and takes no answer; approve it with the response instead.');
    }
  } else if (response !== undefined) {
    throw new AppError(
      ErrorCode.ValidationFailed,
      `response: only a question takes an answer in words; this approval is a ${kind === 'third_party' ? 'third-party change' : kind}, approved or rejected as it is.`,
    );
  }
}

/**
 * Approval requests (A1, A2): created pending by the session loop, answered once by the session's
 * developer or an administrator of the project. Answering twice or after the session ended is a 409.
 */
@Injectable()
export class ApprovalsService {
  constructor(
    private readonly approvals: ApprovalsRepository,
    private readonly approvedCommands: ApprovedCommandsRepository,
    private readonly sessions: SessionsRepository,
    private readonly users: UsersRepository,
    private readonly transactions: Transactions,
    private readonly policies: PoliciesService,
    private readonly access: AccessService,
    private readonly audit: AuditService,
    private readonly events: EventsService,
    private readonly metrics: MetricsService,
  ) {}

  async list(principal: Principal, query: ApprovalListQuery): Promise<ApprovalView[]> {
    const rows = await this.approvals.list({
      state: query.state,
      sessionId: query.sessionId,
      projectId: query.projectId,
      projectIds: principal.projectIds,
      idPrefix: query.idPrefix,
      limit: query.limit,
    });
    const owners = new Map<string, SessionRow | undefined>();
    const visible: { row: (typeof rows)[number]; session: SessionRow }[] = [];
    for (const row of rows) {
      if (!owners.has(row.sessionId)) owners.set(row.sessionId, await this.sessions.findById(row.sessionId));
      const session = owners.get(row.sessionId);
      if (session && this.access.can(principal, 'read', 'Approval', { projectId: row.projectId, sessionUserId: session.userId })) visible.push({ row, session });
    }
    const emails = await this.users.emailsOf(visible.flatMap(({ row }) => (row.decidedBy ? [row.decidedBy] : [])));
    return visible.map(({ row, session }) => toApprovalView(row, session, row.decidedBy ? (emails.get(row.decidedBy) ?? null) : null));
  }

  /** An approval and its session, once the caller is known to be allowed to read it. */
  async readable(principal: Principal, approvalId: string): Promise<{ approval: ApprovalWithProject; session: SessionRow }> {
    const loaded = await this.load(approvalId);
    await this.access.require(principal, 'read', 'Approval', { projectId: loaded.session.projectId, sessionUserId: loaded.session.userId });
    return loaded;
  }

  async get(principal: Principal, approvalId: string): Promise<ApprovalView> {
    const { approval, session } = await this.readable(principal, approvalId);
    const emails = await this.users.emailsOf(approval.decidedBy ? [approval.decidedBy] : []);
    return toApprovalView(approval, session, approval.decidedBy ? (emails.get(approval.decidedBy) ?? null) : null);
  }

  async answer(principal: Principal, approvalId: string, answer: Answer, input: AnswerApprovalRequest): Promise<ApprovalView> {
    const { approval, session } = await this.load(approvalId);
    await this.access.require(principal, 'answer', 'Approval', { projectId: session.projectId, sessionUserId: session.userId });
    if (approval.state !== 'pending') throw alreadyAnswered(approval);
    checkResponse(approval.kind, answer, input.response);
    if (session.status !== 'running') {
      throw new AppError(ErrorCode.SessionEnded, `Session ${session.id} has ended (${session.status}${session.stopReason ? `, ${session.stopReason}` : ''}); its approvals can no longer be answered.`);
    }
    const payload = approval.payload as ApprovalPayload;
    const command = 'command' in payload ? { command: payload.command, workingDirectory: payload.workingDirectory } : undefined;
    const remember = input.rememberCommand && answer === 'approved';
    if (remember) {
      if (approval.kind !== 'command' || command === undefined) {
        throw new AppError(ErrorCode.ValidationFailed, 'Only a command can be approved with its identical repeats; this approval is a change, approved or rejected on its own.');
      }
      // P3: the policy decided, when the command was proposed, whether it may be exempted; the person
      // cannot widen that, and a policy changed since to `always` wins.
      const { policy } = await this.policies.inForce(session.projectId);
      if (policy.commands.reapproval !== 'exempt') {
        throw new AppError(ErrorCode.ValidationFailed, "This project's policy requires approving every command again (commands.reapproval: always).");
      }
      if ((approval.flags as ApprovalFlags).reapprovalExempt !== true || command.workingDirectory === undefined) {
        throw new AppError(
          ErrorCode.ValidationFailed,
          "The project's policy asks again every time for this command (a rule of commands.askEveryTime, a third-party file, a program or environment only known when it runs, or a tool that is not a shell command), so it can only be approved on its own.",
        );
      }
    }
    const updated = await this.transactions.run(async (tx) => {
      const row = await this.approvals.withTx(tx).answer(approval.id, { state: answer, decidedBy: principal.userId, reason: input.reason ?? null, response: input.response ?? null });
      if (row && remember && command?.workingDirectory !== undefined) {
        await this.approvedCommands.withTx(tx).remember(session.id, { command: command.command, workingDirectory: command.workingDirectory, approvalId: approval.id }, principal.userId);
      }
      return row;
    });
    // Two answers racing: the repository only updates a pending row, so the loser lands here.
    if (!updated) throw alreadyAnswered((await this.approvals.findById(approval.id)) ?? approval);
    this.metrics.approvalsAnswered.inc({ answer });
    this.metrics.approvalWait.observe({ answer }, Math.max(0, ((updated.decidedAt ?? new Date()).getTime() - approval.createdAt.getTime()) / 1000));
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'approval.answer',
      projectId: session.projectId,
      sessionId: session.id,
      payload: { approvalId: approval.id, kind: approval.kind, answer, rememberCommand: remember, reason: input.reason ?? null, ...(input.response !== undefined ? { response: input.response } : {}) },
    });
    const stream = await this.streamOf(session);
    await this.events.publish({
      type: 'approval_answered',
      sessionId: stream.sessionId,
      projectId: session.projectId,
      payload: {
        approvalId: approval.id,
        answer,
        by: { kind: 'user', userId: principal.userId, email: principal.email },
        ...(input.response !== undefined ? { response: input.response } : {}),
        ...stream.extra,
      },
    });
    return toApprovalView(updated, session, principal.email);
  }

  /**
   * Where a session's approval events go: a subagent's go out on its root session's stream, marked
   * with the child's id like its other events, so the one approval point following the root sees
   * every question of the tree (AG5).
   */
  private async streamOf(session: { id: string; parentSessionId: string | null }): Promise<{ sessionId: string; extra: { subSessionId?: string } }> {
    let root = session;
    // Depth is bounded by subagentMaxDepth (at most 32); the bound also guards against a cycle.
    for (let hops = 0; root.parentSessionId && hops < 64; hops++) {
      const parent = await this.sessions.findById(root.parentSessionId);
      if (!parent) break;
      root = parent;
    }
    return root.id === session.id ? { sessionId: session.id, extra: {} } : { sessionId: root.id, extra: { subSessionId: session.id } };
  }

  /**
   * For the session loop: opens an approval request. Headless sessions have nobody to ask, so the
   * request is refused at once and recorded as refused by the automated process (AG5).
   */
  async request(input: ApprovalRequest): Promise<ApprovalView> {
    // A session waiting for a person rides out a database restart (G06): reads and the insert are
    // retried; the id is chosen first, so an insert whose reply was lost is found, not made twice.
    const session = await withDbRetry(() => this.sessions.findById(input.sessionId));
    if (!session) throw new AppError(ErrorCode.NotFound, `There is no session ${input.sessionId}.`);
    const flags = input.flags ?? { thirdParty: [] };
    const id = randomUUID();
    const row = await withDbRetry(async (attempt): Promise<ApprovalRow | undefined> => {
      const landed = attempt > 1 ? await this.approvals.findById(id) : undefined;
      if (landed) {
        const { projectId: _projectId, ...stored } = landed;
        return stored;
      }
      return this.approvals.create({
        id,
        sessionId: session.id,
        toolCallId: input.toolCallId ?? null,
        kind: input.kind,
        payload: input.payload,
        flags,
        agent: input.agent,
        state: session.headless ? 'refused_headless' : 'pending',
        decidedAt: session.headless ? new Date() : null,
        reason: session.headless ? 'headless session: nobody to ask' : null,
      });
    });
    // The session has ended (before the read above, or since: revoked, stopped, swept as an orphan);
    // the insert itself checks, holding the session's row.
    if (!row) throw new AppError(ErrorCode.SessionEnded, `Session ${session.id} has ended; it cannot ask for approvals.`);
    await this.audit.record({
      actor: `agent:${input.agent}`,
      kind: 'approval.request',
      projectId: session.projectId,
      sessionId: session.id,
      payload: {
        approvalId: row.id,
        kind: row.kind,
        payload: input.payload,
        flags,
        state: row.state,
        ...(input.expiresAt && row.state === 'pending' ? { expiresAt: input.expiresAt.toISOString() } : {}),
      },
    });
    const stream = await this.streamOf(session);
    await this.events.publish({
      type: 'approval_requested',
      sessionId: stream.sessionId,
      projectId: session.projectId,
      payload: {
        ...stream.extra,
        approvalId: row.id,
        callId: row.toolCallId,
        agent: row.agent,
        kind: EVENT_KIND[row.kind],
        thirdParty: flags.thirdParty.length > 0,
        ...(flags.thirdParty.length > 0 ? { thirdPartyFiles: flags.thirdParty } : {}),
        subject: subjectText(input.payload),
        ...('question' in input.payload ? { options: input.payload.options } : {}),
        ...(flags.reapprovalExempt === true && row.kind === 'command' && row.state === 'pending' ? { reapprovalExempt: true } : {}),
        ...(input.expiresAt && row.state === 'pending' ? { expiresAt: input.expiresAt.toISOString() } : {}),
      },
    });
    if (row.state === 'refused_headless') {
      await this.events.publish({
        type: 'approval_answered',
        sessionId: stream.sessionId,
        projectId: session.projectId,
        payload: { ...stream.extra, approvalId: row.id, answer: 'rejected', by: { kind: 'process', description: 'headless session' }, class: 'approval_refused_headless' },
      });
    }
    return toApprovalView(row, session);
  }

  /**
   * For the session loop: a pending approval nobody answered in time expires (L1, X4). Recorded as
   * decided by the process, audited, and announced with the `approval_expired` class. Returns false
   * when a person answered first (the row is only updated while pending).
   */
  async expire(approvalId: string, reason: string): Promise<boolean> {
    // Retried through a database restart; an update whose reply was lost is recognised by its reason.
    const { approval, session, row } = await withDbRetry(async (attempt) => {
      const loaded = await this.load(approvalId);
      if (attempt > 1 && loaded.approval.state === 'expired' && loaded.approval.reason === reason) return { ...loaded, row: loaded.approval };
      return { ...loaded, row: await this.approvals.answer(loaded.approval.id, { state: 'expired', decidedBy: null, reason }) };
    });
    if (!row) return false;
    await this.audit.record({
      actor: 'system',
      kind: 'approval.expired',
      projectId: session.projectId,
      sessionId: session.id,
      payload: { approvalId: approval.id, kind: approval.kind, reason },
    });
    const stream = await this.streamOf(session);
    await this.events.publish({
      type: 'approval_answered',
      sessionId: stream.sessionId,
      projectId: session.projectId,
      payload: { ...stream.extra, approvalId: approval.id, answer: 'rejected', by: { kind: 'process', description: reason }, class: 'approval_expired' },
    });
    return true;
  }

  /** "Approved once" memory (P3): only ever consulted when the policy in force says `reapproval: exempt`. */
  async isCommandApproved(sessionId: string, command: string, workingDirectory: string): Promise<boolean> {
    return this.approvedCommands.has(sessionId, command, workingDirectory);
  }

  private async load(approvalId: string): Promise<{ approval: ApprovalWithProject; session: SessionRow }> {
    const approval = await this.approvals.findById(approvalId);
    if (!approval) throw new AppError(ErrorCode.NotFound, `There is no approval ${approvalId}.`);
    const session = await this.sessions.findById(approval.sessionId);
    if (!session) throw new AppError(ErrorCode.NotFound, `The session of approval ${approvalId} no longer exists.`);
    return { approval, session };
  }
}

function alreadyAnswered(approval: ApprovalRow): AppError {
  const when = approval.decidedAt ? ` at ${approval.decidedAt.toISOString()}` : '';
  return new AppError(ErrorCode.ApprovalAlreadyAnswered, `This approval was already answered: it is ${approval.state}${when}.`, { state: approval.state });
}
