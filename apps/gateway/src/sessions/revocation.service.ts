import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { RevokeUserResponse, StopSessionResponse } from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { ApiTokensRepository } from '../db/repositories/api-tokens.repository';
import { ApprovalsRepository } from '../db/repositories/approvals.repository';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { Transactions } from '../db/repositories/transactions';
import { UsersRepository } from '../db/repositories/users.repository';
import { WebSessionsRepository } from '../db/repositories/web-sessions.repository';
import type { SessionRow } from '../db/schema';
import { EventsService } from '../events/events.service';
import { EXEC_HOST, destroyOrLeaveToReaper, type ExecHostPort } from '../exec-host/exec-host.port';
import { MetricsService } from '../metrics/metrics.service';
import { SessionRunRegistry, type CancelReason } from './session-run.registry';
import { toSessionView } from './views';

/**
 * Stop (the developer, A3) and revocation (an administrator, A4), effective at once and without a
 * restart: the loop is cancelled (here, or on another replica through the event stream), pending
 * approvals are rejected, the sandbox is destroyed, and everything is audited.
 */
@Injectable()
export class RevocationService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('Revocation');
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly sessions: SessionsRepository,
    private readonly approvals: ApprovalsRepository,
    private readonly users: UsersRepository,
    private readonly tokens: ApiTokensRepository,
    private readonly webSessions: WebSessionsRepository,
    private readonly transactions: Transactions,
    private readonly registry: SessionRunRegistry,
    @Inject(EXEC_HOST) private readonly execHost: ExecHostPort,
    private readonly access: AccessService,
    private readonly audit: AuditService,
    private readonly events: EventsService,
    private readonly metrics: MetricsService,
  ) {}

  onModuleInit(): void {
    // A loop may run on another replica than the one that took the request: the stored event reaches it.
    this.unsubscribe = this.events.subscribe((event) => {
      if (event.type === 'session_stopped' && event.sessionId) {
        const reason = event.payload.stopReason === 'revoked' ? 'revoked' : 'stopped';
        this.registry.cancel(event.sessionId, reason);
      }
    });
  }

  onModuleDestroy(): void {
    this.unsubscribe?.();
  }

  async stop(principal: Principal, sessionId: string, reason: string | undefined): Promise<StopSessionResponse> {
    const session = await this.find(sessionId);
    await this.access.require(principal, 'stop', 'Session', { projectId: session.projectId, userId: session.userId });
    return this.end(session, 'stopped', actorOf(principal), principal.userId, reason);
  }

  async revokeSession(principal: Principal, sessionId: string, reason: string | undefined): Promise<StopSessionResponse> {
    const session = await this.find(sessionId);
    await this.access.require(principal, 'revoke', 'Session', { projectId: session.projectId, userId: session.userId });
    return this.end(session, 'revoked', actorOf(principal), principal.userId, reason);
  }

  /** Revokes a person: their account, every token and console session, and every running session. */
  async revokeUser(principal: Principal, userId: string): Promise<RevokeUserResponse> {
    await this.access.require(principal, 'revoke', 'User', { id: userId });
    if (userId === principal.userId) throw new AppError(ErrorCode.Conflict, 'You cannot revoke your own account; ask another administrator.');
    const user = await this.users.findById(userId);
    if (!user) throw new AppError(ErrorCode.NotFound, `There is no user ${userId}.`);
    if (user.revokedAt) throw new AppError(ErrorCode.Conflict, `${user.email} was already revoked at ${user.revokedAt.toISOString()}.`);
    const now = new Date();
    const { tokensRevoked, webSessionsRevoked } = await this.transactions.run(async (tx) => {
      await this.users.withTx(tx).update(user.id, { revokedAt: now });
      return {
        tokensRevoked: await this.tokens.withTx(tx).revokeAllForUser(user.id, now),
        webSessionsRevoked: await this.webSessions.withTx(tx).revokeAllForUser(user.id, now),
      };
    });
    const sessionsRevoked: string[] = [];
    for (const session of await this.sessions.listRunningForUser(user.id)) {
      try {
        await this.end(session, 'revoked', actorOf(principal), principal.userId, `user ${user.email} revoked`);
        sessionsRevoked.push(session.id);
      } catch (error) {
        // A session that ended by itself meanwhile needs nothing more.
        if (!(error instanceof AppError && error.code === ErrorCode.SessionEnded)) throw error;
      }
    }
    await this.audit.record({ actor: actorOf(principal), kind: 'user.revoke', payload: { userId: user.id, email: user.email, tokensRevoked, webSessionsRevoked, sessionsRevoked } });
    await this.events.publish({ type: 'user_revoked', payload: { userId: user.id } });
    return { userId: user.id, tokensRevoked, webSessionsRevoked, sessionsRevoked };
  }

  private async end(session: SessionRow, reason: Exclude<CancelReason, 'sandbox_lost'>, actor: string, decidedBy: string, note: string | undefined): Promise<StopSessionResponse> {
    if (session.status !== 'running') throw ended(session);
    // Cancel first: the loop must not start another step while the records are being closed.
    this.registry.cancel(session.id, reason);
    const result = await this.transactions.run(async (tx) => {
      const endedRow = await this.sessions.withTx(tx).end(session.id, { status: 'stopped', stopReason: reason });
      if (!endedRow) return undefined;
      const rejected = await this.approvals.withTx(tx).closePendingForSession(session.id, { state: 'rejected', decidedBy, reason: `session ${reason}` });
      return { endedRow, rejected };
    });
    if (!result) throw ended((await this.sessions.findById(session.id)) ?? session);
    const { endedRow, rejected } = result;

    const { sandboxDestroyed, sandboxNote } = await destroyOrLeaveToReaper(this.execHost, session.sandboxId);
    if (sandboxNote) this.logger.warn({ sessionId: session.id, sandboxId: session.sandboxId, note: sandboxNote }, 'sandbox not destroyed');
    this.metrics.sessionsEnded.inc({ reason });
    await this.audit.record({
      actor,
      kind: reason === 'revoked' ? 'session.revoke' : 'session.stop',
      projectId: session.projectId,
      sessionId: session.id,
      payload: { reason: note ?? null, approvalsRejected: rejected.map((a) => a.id), sandboxId: session.sandboxId, sandboxDestroyed, sandboxNote },
    });
    for (const a of rejected) {
      await this.events.publish({
        type: 'approval_answered',
        sessionId: session.id,
        projectId: session.projectId,
        payload: { approvalId: a.id, answer: 'rejected', by: { kind: 'user', userId: decidedBy } },
      });
    }
    await this.events.publish({
      type: 'session_stopped',
      sessionId: session.id,
      projectId: session.projectId,
      payload: { status: 'stopped', stopReason: reason, class: reason, summary: null, exitCode: 3 },
    });
    return { session: toSessionView(endedRow), approvalsRejected: rejected.length, sandboxDestroyed, sandboxNote };
  }

  private async find(sessionId: string): Promise<SessionRow> {
    const session = await this.sessions.findById(sessionId);
    if (!session) throw new AppError(ErrorCode.NotFound, `There is no session ${sessionId}.`);
    return session;
  }
}

function ended(session: SessionRow): AppError {
  return new AppError(ErrorCode.SessionEnded, `Session ${session.id} has already ended (${session.status}${session.stopReason ? `, ${session.stopReason}` : ''}).`);
}
