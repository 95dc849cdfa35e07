import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { AuditService } from '../audit/audit.service';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { ApprovalsRepository } from '../db/repositories/approvals.repository';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { Transactions } from '../db/repositories/transactions';
import type { SessionRow } from '../db/schema';
import { EventsService } from '../events/events.service';
import { EXEC_HOST, destroyOrLeaveToReaper, type ExecHostPort } from '../exec-host/exec-host.port';
import { MetricsService } from '../metrics/metrics.service';
import { SessionRunRegistry } from './session-run.registry';

/** Who closes an orphan's approvals and ends it, in the audit log and on the event stream. */
const PROCESS = 'the gateway running the session stopped';

/**
 * A session's loop lives in the gateway process that started it. That process says so every third
 * of the lease (`LEMNISCATE_LOOP_LEASE_SECONDS`); when it stops saying so (killed, out of memory, cut
 * off from the database) its sessions are orphans, and any gateway ends them as a crash (Ending, L*):
 * pending approvals closed, subagents ended, the sandbox destroyed, all audited, and `session_failed`
 * on the stream so a CLI following it stops waiting and says why. The approved patch, stored as it
 * grows, is kept. A loop cannot be resumed (the model's context lived in the process).
 */
@Injectable()
export class SessionLeaseService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('SessionLease');
  /** This process, as recorded in `sessions.runner`; new at every start. */
  readonly runner = `gateway:${randomUUID()}`;
  private readonly held = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  /** Sweeps run one after the other in this process; each looks afresh. */
  private sweeping: Promise<unknown> = Promise.resolve();
  private unsubscribe: (() => void) | undefined;
  private ticking = false;

  constructor(
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    private readonly sessions: SessionsRepository,
    private readonly approvals: ApprovalsRepository,
    private readonly transactions: Transactions,
    @Inject(EXEC_HOST) private readonly execHost: ExecHostPort,
    private readonly audit: AuditService,
    private readonly events: EventsService,
    private readonly metrics: MetricsService,
    private readonly registry: SessionRunRegistry,
  ) {}

  onApplicationBootstrap(): void {
    // Cut off from the database for longer than the lease, this process may see another gateway end
    // one of its sessions as an orphan: its loop must stop then, not carry on for nobody.
    this.unsubscribe = this.events.subscribe((event) => {
      if (event.type === 'session_failed' && event.sessionId && this.held.has(event.sessionId) && (event.payload as { class?: string }).class === 'crash') {
        this.registry.cancel(event.sessionId, 'stopped');
      }
    });
    const everyMs = Math.max(500, Math.floor((this.config.loopLeaseSeconds * 1000) / 3));
    this.timer = setInterval(() => void this.tick(), everyMs);
    this.timer.unref();
    void this.tick();
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
    this.unsubscribe?.();
  }

  /** The loop of this session runs here from now on. */
  async hold(sessionId: string): Promise<void> {
    await this.sessions.markRunner([sessionId], this.runner);
    this.held.add(sessionId);
  }

  release(sessionId: string): void {
    this.held.delete(sessionId);
  }

  private async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      await this.sessions.markRunner([...this.held], this.runner);
      await this.sweep();
    } catch (err) {
      this.logger.warn({ err }, 'session lease: heartbeat or sweep failed; retrying on the next beat');
    } finally {
      this.ticking = false;
    }
  }

  /** Ends every orphan found now (after any sweep in progress); answers their ids. */
  sweep(now: Date = new Date()): Promise<string[]> {
    const next = this.sweeping.then(() => this.sweepOnce(now));
    this.sweeping = next.catch(() => undefined);
    return next;
  }

  private async sweepOnce(now: Date): Promise<string[]> {
    const before = new Date(now.getTime() - this.config.loopLeaseSeconds * 1000);
    const ended: string[] = [];
    for (const orphan of await this.sessions.listOrphans(before)) {
      // This process's own loops are never orphans, whatever the clock says.
      if (orphan.runner === this.runner && this.held.has(orphan.id)) continue;
      if (await this.endOrphan(orphan)) ended.push(orphan.id);
    }
    return ended;
  }

  private async endOrphan(root: SessionRow): Promise<boolean> {
    const seen = root.runnerSeenAt ? root.runnerSeenAt.toISOString() : 'never';
    const message = `The gateway running this session stopped (its loop last reported at ${seen}); the session cannot continue and has ended. The changes approved so far are kept in its patch.`;
    const result = await this.transactions.run(async (tx) => {
      const sessions = this.sessions.withTx(tx);
      const endedRoot = await sessions.end(root.id, { status: 'failed', stopReason: 'crash', summary: root.summary ?? message });
      // Another gateway, or the loop itself, got there first.
      if (!endedRoot) return undefined;
      const children = await sessions.listRunningDescendants(root.id);
      for (const child of children) await sessions.end(child.id, { status: 'failed', stopReason: 'crash', summary: child.summary ?? message });
      const closed = [];
      for (const s of [root, ...children]) {
        for (const a of await this.approvals.withTx(tx).closePendingForSession(s.id, { state: 'expired', decidedBy: null, reason: PROCESS }))
          closed.push({ approval: a, child: s.id === root.id ? null : s.id });
      }
      return { children, closed };
    });
    if (!result) return false;

    const { sandboxDestroyed, sandboxNote } = await destroyOrLeaveToReaper(this.execHost, root.sandboxId);
    this.metrics.sessionsEnded.inc({ reason: 'crash' });
    await this.audit.record({
      actor: 'system',
      kind: 'session.orphaned',
      projectId: root.projectId,
      sessionId: root.id,
      payload: {
        runner: root.runner,
        lastSeenAt: seen,
        subagentsEnded: result.children.map((c) => c.id),
        approvalsExpired: result.closed.map((c) => c.approval.id),
        sandboxId: root.sandboxId,
        sandboxDestroyed,
        sandboxNote,
      },
    });
    for (const { approval, child } of result.closed) {
      await this.events.publish({
        type: 'approval_answered',
        sessionId: root.id,
        projectId: root.projectId,
        payload: { approvalId: approval.id, answer: 'rejected', by: { kind: 'process', description: PROCESS }, class: 'approval_expired', ...(child ? { subSessionId: child } : {}) },
      });
    }
    await this.events.publish({
      type: 'session_failed',
      sessionId: root.id,
      projectId: root.projectId,
      payload: { status: 'failed', stopReason: 'crash', class: 'crash', message, exitCode: 1 },
    });
    this.logger.warn({ sessionId: root.id, runner: root.runner, lastSeenAt: seen, sandboxDestroyed }, 'ended a session whose gateway stopped');
    return true;
  }
}
