import { Injectable, Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { refusesApprovals, type CreateSessionRequest, type PolicyDecision, type SessionListItem, type SessionListQuery, type SessionView, type ToolCallView } from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { describeFailure } from '../db/errors';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { ToolCallsRepository } from '../db/repositories/tool-calls.repository';
import { UsersRepository } from '../db/repositories/users.repository';
import type { SessionRow, ToolCallRow } from '../db/schema';
import { withDbRetry } from '../db/retry';
import { EventsService } from '../events/events.service';
import { PoliciesService } from '../projects/policies.service';
import { toSessionView, toToolCallView } from './views';

interface ProposedToolCall {
  name: string;
  arguments: Record<string, unknown>;
  decision: PolicyDecision;
  agent: string;
}

/** What a tool call produced, as the session loop reports it (output already capped by the exec-host). */
interface ToolResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  truncated: boolean;
  durationMs: number;
  idleMs: number;
}

/** A subagent's session, as its parent delegates to it (AG3): the tree it joins and what it is asked. */
export interface ChildSession {
  sessionId: string;
  parentSessionId: string;
  depth: number;
  agent: string;
  instruction: string;
  headless: boolean;
}

/** The root session of a tree, and the agent that delegates on its behalf. */
export interface SessionTreeRoot {
  projectId: string;
  userId: string;
  policyVersionId: string | null;
  mode: SessionView['mode'];
  agent: string;
}

/**
 * Session records: the instruction, who gave it, the policy version it runs under, and its tool
 * calls. Every session is created here: a developer's through `create`, a subagent's through
 * `createChild`.
 */
@Injectable()
export class SessionsService {
  private readonly logger = new Logger('Sessions');

  constructor(
    private readonly sessions: SessionsRepository,
    private readonly projects: ProjectsRepository,
    private readonly toolCalls: ToolCallsRepository,
    private readonly policies: PoliciesService,
    private readonly access: AccessService,
    private readonly audit: AuditService,
    private readonly events: EventsService,
    private readonly users: UsersRepository,
  ) {}

  async create(principal: Principal, input: CreateSessionRequest): Promise<SessionView> {
    const project = await this.projects.findById(input.projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${input.projectId}.`);
    await this.access.require(principal, 'create', 'Session', { projectId: project.id, userId: principal.userId });
    // A request starts a root session; subagents are started by the agent (createChild).
    const depth = 0;
    const { versionId, version } = await this.policies.inForce(project.id);
    const session = await this.sessions.create({
      projectId: project.id,
      userId: principal.userId,
      parentSessionId: null,
      depth,
      agent: input.agent,
      instruction: input.instruction,
      policyVersionId: versionId,
      mode: input.mode,
      headless: refusesApprovals(input.mode),
      baseCommit: input.baseCommit ?? null,
      branch: input.branch ?? null,
      includedUncommitted: input.includedUncommitted,
    });
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'session.instruction',
      projectId: project.id,
      sessionId: session.id,
      payload: { instruction: session.instruction, agent: session.agent, mode: session.mode, headless: session.headless, policyVersion: version, depth, parentSessionId: session.parentSessionId },
    });
    await this.events.publish({
      type: 'instruction',
      sessionId: session.id,
      projectId: project.id,
      payload: { text: session.instruction, author: { kind: 'user', userId: principal.userId } },
    });
    return toSessionView(session);
  }

  /**
   * A subagent's session, recorded when its parent delegates (the depth counted by the tree's
   * tracker, never taken from the model, AG4). It runs the way its tree was started, and its
   * instruction is audited as the delegating agent's.
   */
  async createChild(root: SessionTreeRoot, child: ChildSession): Promise<void> {
    await this.sessions.create({
      id: child.sessionId,
      projectId: root.projectId,
      userId: root.userId,
      parentSessionId: child.parentSessionId,
      depth: child.depth,
      agent: child.agent,
      instruction: child.instruction,
      policyVersionId: root.policyVersionId,
      mode: root.mode,
      headless: child.headless,
      baseCommit: null,
      branch: null,
      includedUncommitted: false,
    });
    await this.audit.record({
      actor: `agent:${root.agent}`,
      kind: 'session.instruction',
      projectId: root.projectId,
      sessionId: child.sessionId,
      payload: { instruction: child.instruction, agent: child.agent, depth: child.depth, parentSessionId: child.parentSessionId },
    });
  }

  /**
   * A session loop failed before it could record its ending (the database stayed away longer than
   * the retry window): the session is ended here as failed, with a sentence rather than the driver's
   * message, so it is not left `running` for the orphan sweep to misreport later.
   */
  async endAfterFailure(sessionId: string, projectId: string, err: unknown): Promise<void> {
    const message = describeFailure(err);
    try {
      const ended = await withDbRetry(() => this.sessions.end(sessionId, { status: 'failed', stopReason: 'crash', summary: message }));
      if (!ended) return;
      await this.audit.record({ actor: 'system', kind: 'session.ended', projectId, sessionId, payload: { status: 'failed', stopReason: 'crash', message } });
      await withDbRetry(() => this.events.publish({ type: 'session_failed', sessionId, projectId, payload: { status: 'failed', stopReason: 'crash', class: 'crash', message, exitCode: 1 } }));
    } catch (error) {
      this.logger.error({ err: error, sessionId }, 'the failed session could not be recorded as ended; the orphan sweep will end it');
    }
  }

  async list(principal: Principal, query: SessionListQuery): Promise<SessionListItem[]> {
    // Developers see their own sessions, whoever they ask for; other roles see every session of their projects.
    const userId = principal.role === 'developer' ? principal.userId : query.userId;
    const rows = await this.sessions.list({
      userId,
      projectIds: principal.projectIds,
      projectId: query.projectId,
      idPrefix: query.idPrefix,
      status: query.status,
      waiting: query.waiting === 'true' ? true : undefined,
      startedFrom: query.from ? new Date(query.from) : undefined,
      startedBefore: query.to ? new Date(query.to) : undefined,
      limit: query.limit,
    });
    const visible = rows.filter((s) => this.access.can(principal, 'read', 'Session', { projectId: s.projectId, userId: s.userId }));
    const [emails, pending] = await Promise.all([this.users.emailsOf(visible.map((s) => s.userId)), this.sessions.pendingApprovals(visible.map((s) => s.id))]);
    return visible.map((s) => ({ ...toSessionView(s), ownerEmail: emails.get(s.userId) ?? null, pendingApprovals: pending.get(s.id) ?? 0 }));
  }

  async get(principal: Principal, sessionId: string): Promise<SessionView> {
    return toSessionView(await this.readable(principal, sessionId));
  }

  async listToolCalls(principal: Principal, sessionId: string): Promise<ToolCallView[]> {
    const session = await this.readable(principal, sessionId);
    return (await this.toolCalls.listForSession(session.id)).map(toToolCallView);
  }

  /** For the session loop: records a proposed call and the policy's decision on it (T1, P8). */
  async recordToolCall(sessionId: string, call: ProposedToolCall): Promise<ToolCallRow> {
    const session = await this.sessions.findById(sessionId);
    if (!session) throw new AppError(ErrorCode.NotFound, `There is no session ${sessionId}.`);
    const row = await this.toolCalls.create({ sessionId, name: call.name, arguments: call.arguments, decision: call.decision, agent: call.agent });
    await this.audit.record({
      actor: `agent:${call.agent}`,
      kind: 'tool_call.proposed',
      projectId: session.projectId,
      sessionId,
      payload: { callId: row.id, seq: row.seq, name: call.name, arguments: call.arguments },
    });
    await this.audit.record({ actor: 'policy', kind: 'policy.decision', projectId: session.projectId, sessionId, payload: { callId: row.id, ...call.decision } });
    await this.events.publish({ type: 'tool_call_proposed', sessionId, projectId: session.projectId, payload: { callId: row.id, agent: call.agent, name: call.name, arguments: call.arguments } });
    return row;
  }

  /**
   * For the session loop: records what a call produced. The audit keeps a bounded digest (T1): exit
   * code, sizes and a SHA-256 of each stream, never the whole output.
   */
  async recordToolResult(toolCallId: string, result: ToolResult): Promise<ToolCallRow> {
    const call = await this.toolCalls.findById(toolCallId);
    if (!call) throw new AppError(ErrorCode.NotFound, `There is no tool call ${toolCallId}.`);
    const session = await this.sessions.findById(call.sessionId);
    if (!session) throw new AppError(ErrorCode.NotFound, `The session of tool call ${toolCallId} no longer exists.`);
    const row = await this.toolCalls.update(call.id, { result });
    if (!row) throw new AppError(ErrorCode.NotFound, `There is no tool call ${toolCallId}.`);
    const digest = (text: string) => ({ bytes: Buffer.byteLength(text), sha256: createHash('sha256').update(text).digest('hex') });
    await this.audit.record({
      actor: `agent:${call.agent}`,
      kind: 'tool_call.result',
      projectId: session.projectId,
      sessionId: session.id,
      payload: { callId: call.id, exitCode: result.exitCode, durationMs: result.durationMs, truncated: result.truncated, stdout: digest(result.stdout), stderr: digest(result.stderr) },
    });
    await this.events.publish({
      type: 'tool_result',
      sessionId: session.id,
      projectId: session.projectId,
      payload: { callId: call.id, exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr, truncated: result.truncated, durationMs: result.durationMs, idleMs: result.idleMs },
    });
    return row;
  }

  private async readable(principal: Principal, sessionId: string): Promise<SessionRow> {
    const session = await this.sessions.findById(sessionId);
    if (!session) throw new AppError(ErrorCode.NotFound, `There is no session ${sessionId}.`);
    await this.access.require(principal, 'read', 'Session', { projectId: session.projectId, userId: session.userId });
    return session;
  }
}
