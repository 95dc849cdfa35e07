import { Inject, Injectable, Logger, Optional, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import type { AuditSinksView, AuditSinkView } from '@lemniscate/contracts';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { ActorIdentity } from '../audit/audit-export';
import { actorIdentities } from '../audit/actor-identities';
import { AuditService } from '../audit/audit.service';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { AuditLogRepository } from '../db/repositories/audit-log.repository';
import { AuditSinkCursorsRepository } from '../db/repositories/audit-sink-cursors.repository';
import { UsersRepository } from '../db/repositories/users.repository';
import type { AuditLogRow, AuditSinkCursorRow } from '../db/schema';
import { MetricsService } from '../metrics/metrics.service';
import { sinkTarget, type AuditSinksConfig, type SinkConfig } from './sink-config';
import { entryFailed, formatRecord, shortenedRecord } from './sink-formats';
import { FileTransport, transportFor, type SinkRecord, type SinkTransport } from './transports';

/** How long a gateway holds a sink once it stops renewing (a frozen or killed process). */
export const SINK_LEASE_MS = 15_000;
/** Entries read and sent at a time (a webhook sends its own `batch` per request). */
const READ_PAGE = 500;
/** How often a sink that is up to date looks for entries other replicas chained. */
const IDLE_POLL_MS = 1_000;
/** How often a gateway that does not hold a sink reads where it stands. */
const STATUS_POLL_MS = 2_000;
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 30_000;

/** Timing knobs, for tests that cannot wait for a lease to lapse. */
export interface SinkTiming {
  leaseMs: number;
  idlePollMs: number;
  statusPollMs: number;
  backoffFirstMs: number;
  backoffMaxMs: number;
}

export const AUDIT_SINK_TIMING = Symbol('AUDIT_SINK_TIMING');
const DEFAULT_TIMING: SinkTiming = { leaseMs: SINK_LEASE_MS, idlePollMs: IDLE_POLL_MS, statusPollMs: STATUS_POLL_MS, backoffFirstMs: BACKOFF_FIRST_MS, backoffMaxMs: BACKOFF_MAX_MS };

/**
 * Streams the audit log to the deployment's sinks (T2): every entry, in seq order, to each sink, from
 * that sink's cursor. One gateway at a time sends to a sink (a lease in the database, renewed with
 * every move of the cursor), so replicas do not send an entry twice; the cursor moves only after the
 * sink took the records, so a sink that is down gets everything from where it stopped once it is
 * back, with back-off in between. An entry is sent again only if the gateway dies between the
 * sink's acceptance and the cursor's commit: every record carries its seq for the receiver to drop
 * the repeat (the file sink drops it itself).
 */
@Injectable()
export class AuditSinksService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('AuditSinks');
  private readonly holder = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly runners: SinkRunner[];
  private readonly config: AuditSinksConfig | null;
  private statusTimer: NodeJS.Timeout | undefined;
  private offChained: (() => void) | undefined;
  /** Where each sink stands, as last read from the database (every replica knows every sink). */
  private known = new Map<string, AuditSinkCursorRow>();

  constructor(
    @Inject(GATEWAY_CONFIG) gateway: GatewayConfig,
    private readonly audit: AuditService,
    private readonly log: AuditLogRepository,
    private readonly cursors: AuditSinkCursorsRepository,
    private readonly users: UsersRepository,
    private readonly metrics: MetricsService,
    @Optional() @Inject(AUDIT_SINK_TIMING) private readonly timing: SinkTiming = DEFAULT_TIMING,
  ) {
    this.config = gateway.auditSinks ?? null;
    this.runners = (this.config?.sinks ?? []).map((sink) => new SinkRunner(sink, this));
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.config) return;
    const head = await this.log.head();
    for (const sink of this.config.sinks) await this.cursors.ensure(sink.name, sink.from === 'now' ? head.seq : 0);
    if (this.config.onUnrecorded === 'refuse') this.audit.setGate(() => this.refusal());
    this.offChained = this.audit.onChained(() => this.runners.forEach((r) => r.wake()));
    await this.refreshStatus().catch(() => undefined);
    this.statusTimer = setInterval(() => void this.refreshStatus().catch(() => undefined), this.timing.statusPollMs);
    this.statusTimer.unref();
    for (const runner of this.runners) runner.start();
  }

  /** Sends what is owed before the database closes (AuditService drains first), then gives the leases up. */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.statusTimer);
    this.offChained?.();
    this.audit.setGate(undefined);
    await Promise.all(this.runners.map((r) => r.stop()));
  }

  /** The sinks as the database says now, for the console and `GET /audit/sinks`. */
  async view(): Promise<AuditSinksView> {
    const head = await this.log.head();
    const sinks = this.config?.sinks ?? [];
    const rows = new Map((await this.cursors.list(sinks.map((s) => s.name))).map((r) => [r.name, r]));
    const views: AuditSinkView[] = sinks.map((sink) => {
      const row = rows.get(sink.name);
      const cursor = row?.seq ?? 0;
      const lag = Math.max(0, head.seq - cursor);
      return {
        name: sink.name,
        type: sink.type,
        format: sink.format,
        target: sinkTarget(sink),
        cursor,
        lag,
        state: row?.failingSince ? 'failing' : lag > 0 ? 'behind' : 'up_to_date',
        deliveredAt: row?.deliveredAt?.toISOString() ?? null,
        failingSince: row?.failingSince?.toISOString() ?? null,
        lastError: row?.lastError ?? null,
        lastAttemptAt: row?.lastAttemptAt?.toISOString() ?? null,
      };
    });
    return {
      configured: sinks.length > 0,
      onUnrecorded: this.config?.onUnrecorded ?? 'continue',
      head: head.seq,
      recording: views.length === 0 || views.some((v) => v.state !== 'failing'),
      sinks: views,
    };
  }

  /** The refusal sentence while no sink can record (refuse mode), else null. */
  refusal(): string | null {
    const sinks = this.config?.sinks ?? [];
    if (sinks.length === 0) return null;
    const failing = sinks.map((s) => ({ s, row: this.known.get(s.name) })).filter(({ row }) => row?.failingSince);
    if (failing.length < sinks.length) return null;
    const why = failing.map(({ s, row }) => `${s.name}: ${row?.lastError ?? 'failing'}`).join('; ');
    return `This action is refused because no audit sink can record it right now (${why}), and this deployment refuses what cannot be recorded. It is allowed again as soon as a sink records.`;
  }

  /** Reads every sink's row and sets the metrics; the refusal check and the status use what it read. */
  private async refreshStatus(): Promise<void> {
    const sinks = this.config?.sinks ?? [];
    const rows = await this.cursors.list(sinks.map((s) => s.name));
    this.known = new Map(rows.map((r) => [r.name, r]));
    const head = await this.log.head();
    for (const row of rows) {
      this.metrics.auditSinkLag.set({ sink: row.name }, Math.max(0, head.seq - row.seq));
      this.metrics.auditSinkFailing.set({ sink: row.name }, row.failingSince ? 1 : 0);
      let lagSeconds = 0;
      if (head.seq > row.seq) {
        const [oldest] = await this.log.range(row.seq, head.seq, 1);
        if (oldest) lagSeconds = Math.max(0, (Date.now() - oldest.at.getTime()) / 1000);
      }
      this.metrics.auditSinkLagSeconds.set({ sink: row.name }, lagSeconds);
    }
  }

  /** What a runner needs from the service (kept narrow, so the runner is easy to read). */
  get deps() {
    return {
      log: this.log,
      cursors: this.cursors,
      metrics: this.metrics,
      logger: this.logger,
      holder: this.holder,
      timing: this.timing,
      identities: (rows: AuditLogRow[]) =>
        actorIdentities(
          this.users,
          rows.map((r) => r.actor),
        ),
      known: (row: AuditSinkCursorRow) => this.known.set(row.name, row),
    };
  }
}

/** One sink's loop: take the lease, send what is past the cursor, move it, wait for more. */
class SinkRunner {
  private readonly transport: SinkTransport;
  private running: Promise<void> | undefined;
  private stopping = false;
  private held = false;
  private waker: (() => void) | undefined;
  private failures = 0;

  constructor(
    private readonly sink: SinkConfig,
    private readonly owner: AuditSinksService,
  ) {
    this.transport = transportFor(sink);
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** New entries: an idle runner looks at once; one backing off from a failure keeps its pause. */
  wake(): void {
    if (this.failures === 0) this.waker?.();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.waker?.();
    await this.running;
    const { cursors, holder } = this.owner.deps;
    if (this.held) await cursors.release(this.sink.name, holder).catch(() => undefined);
    await this.transport.close().catch(() => undefined);
  }

  private async loop(): Promise<void> {
    const { timing } = this.owner.deps;
    while (!this.stopping) {
      let pause = timing.idlePollMs;
      try {
        const sent = await this.round();
        if (sent === 'not-held') pause = timing.statusPollMs;
        else this.failures = 0;
      } catch (error) {
        pause = await this.failed(error);
      }
      if (!this.stopping) await this.sleep(pause);
    }
  }

  /** Sends everything past the cursor while this gateway holds the sink. */
  private async round(): Promise<'not-held' | 'done'> {
    const { log, cursors, metrics, holder, timing, identities, known } = this.owner.deps;
    const leased = await cursors.lease(this.sink.name, holder, timing.leaseMs);
    if (!leased) {
      this.held = false;
      return 'not-held';
    }
    let cursor = leased.seq;
    if (!this.held && this.transport instanceof FileTransport) {
      // What the file already holds (a gateway that died after writing, before moving the cursor) is not written again.
      const inFile = await this.transport.lastSeq();
      if (inFile !== null && inFile > cursor) {
        await cursors.advance(this.sink.name, holder, inFile, timing.leaseMs);
        cursor = inFile;
      }
    }
    this.held = true;
    for (;;) {
      const head = await log.head();
      if (cursor >= head.seq) return 'done';
      const rows = await log.range(cursor, head.seq, READ_PAGE);
      if (rows.length === 0) return 'done';
      const people = await identities(rows);
      const records = rows.map((row) => this.record(row, people.get(row.actor) ?? null));
      const per = this.sink.type === 'webhook' ? this.sink.batch : records.length;
      for (let i = 0; i < records.length; i += per) {
        const part = records.slice(i, i + per);
        try {
          await this.transport.send(part);
        } catch (error) {
          throw new SinkSendError(error);
        }
        const last = part[part.length - 1]!.seq;
        if (!(await cursors.advance(this.sink.name, holder, last, timing.leaseMs))) {
          // Another gateway took the sink (this one was frozen past its lease): it goes on from the cursor.
          this.held = false;
          return 'not-held';
        }
        cursor = last;
        metrics.auditSinkDelivered.inc({ sink: this.sink.name }, part.length);
        metrics.auditSinkFailing.set({ sink: this.sink.name }, 0);
        known({ ...leased, seq: cursor, failingSince: null, lastError: null, deliveredAt: new Date() });
        if (this.stopping) return 'done';
      }
    }
  }

  private record(row: AuditLogRow, identity: ActorIdentity | null): SinkRecord {
    return {
      seq: row.seq,
      kind: row.kind,
      at: row.at,
      text: formatRecord(row, identity, this.sink.format),
      short: () => shortenedRecord(row, identity, this.sink.format),
      failure: entryFailed(row.kind, row.payload),
    };
  }

  /** Records a failure and answers how long to wait: doubling from the first back-off to the cap. */
  private async failed(error: unknown): Promise<number> {
    const { cursors, metrics, logger, holder, timing } = this.owner.deps;
    this.failures += 1;
    const wait = Math.min(timing.backoffMaxMs, timing.backoffFirstMs * 2 ** Math.min(this.failures - 1, 16));
    if (error instanceof SinkSendError) {
      const message = describe(error.cause);
      metrics.auditSinkFailures.inc({ sink: this.sink.name });
      metrics.auditSinkFailing.set({ sink: this.sink.name }, 1);
      if (this.failures === 1 || this.failures % 10 === 0)
        logger.warn(`audit sink ${this.sink.name} (${sinkTarget(this.sink)}) could not take entries: ${message}; trying again in ${Math.round(wait / 1000)} s`);
      await cursors.failed(this.sink.name, holder, message).catch(() => undefined);
    } else if (this.failures === 1 || this.failures % 10 === 0) {
      logger.warn(`audit sink ${this.sink.name}: ${describe(error)}; trying again in ${Math.round(wait / 1000)} s`);
    }
    return wait;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.waker = done;
    }).finally(() => {
      this.waker = undefined;
    });
  }
}

class SinkSendError extends Error {
  constructor(override readonly cause: unknown) {
    super(describe(cause));
  }
}

function describe(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  if (e?.code && e.message && !e.message.includes(e.code)) return `${e.code}: ${e.message}`;
  return e?.message ?? String(error);
}
