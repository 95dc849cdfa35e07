import { Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { AppError, ErrorCode } from '../common/errors';
import { AuditLogRepository, type AuditFilter, type AuditPageRequest, type ChainPlace, type QueuedEntry } from '../db/repositories/audit-log.repository';
import { withDbRetry } from '../db/retry';
import type { AuditLogRow } from '../db/schema';
import { CanonicalJsonError, canonicalJson, chainHash, ChainVerifier, type ChainAnchor, type ChainBreak, type ChainProblem } from './audit-chain';
import { CSV_HEADER, csvLine, jsonlLine, type ActorIdentity, type AuditExportFormat } from './audit-export';
import { ChainSignal, type SignalMark } from './chain-signal';

/** Resolves actors (`user:<id>`) to people for an export page; actors it does not know are left out. */
type IdentityResolver = (actors: string[]) => Promise<Map<string, ActorIdentity>>;

export type { AuditFilter, AuditPageRequest } from '../db/repositories/audit-log.repository';

interface AuditAppend {
  /** Who acted: a user id, `system`, or an agent's label; the app decides the convention. */
  actor: string;
  /** What happened, dotted lower case: `session.instruction`, `policy.publish`, `auth.login_failed`. */
  kind: string;
  projectId?: string | null;
  sessionId?: string | null;
  /** Any JSON value; it is stored and hashed in canonical form. */
  payload: unknown;
}

export interface AuditEntry {
  seq: number;
  at: string;
  actor: string;
  kind: string;
  projectId: string | null;
  sessionId: string | null;
  payload: unknown;
  prevHash: string;
  hash: string;
}

export type AuditVerification =
  | {
      ok: true;
      checked: number;
      lastSeq: number;
      lastHash: string;
      /** Where the retention's archives end (absent before any): entries up to `seq` are in archive files, proven there. */
      archivedThrough?: { seq: number; hash: string; file: string };
    }
  | { ok: false; checked: number; seq: number; problem: ChainProblem; message: string };

/**
 * A guard for the table, not a format: command output should arrive as a bounded digest (T1), but a
 * proposed Write carries the whole file, and a lock file of a few megabytes must still be recorded.
 */
export const MAX_PAYLOAD_BYTES = 16 * 1024 * 1024;
const KIND = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$/;
const VERIFY_PAGE = 5000;
const MAX_BATCH_ENTRIES = 500;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const MAX_BATCH_BYTES = 4 * 1024 * 1024;
const EXPORT_PAGE = 1000;
/**
 * After another connection was seen chaining, batches go straight to the queue (one INSERT) for this
 * long instead of trying the chainer lock first: with replicas appending together, the lock is
 * almost always taken, and the try would cost a transaction each time.
 */
const CONTENDED_MS = 250;
/** A queued writer that has heard nothing for this long looks its entries up (a notice may be lost). */
const SILENCE_MS = 1_000;
/** Promise turns a caller needs between being answered and appending again (a few `await`s). */
const GATHER_TURNS = 8;
/** The longest a read waits for the entries queued before it to join the chain (PostgreSQL). */
const CATCH_UP_MS = 2_000;
/** Recorded entries left in the queue are made sure of once the service has written nothing for this long. */
const TAIL_MS = 20;
/** The longest that making sure of them goes on before leaving them to the sweep. */
const TAIL_BOUND_MS = 10_000;
/** Between two tries of a read waiting for another connection's round: the first pause, and the longest. */
const CATCH_UP_PAUSE_MS = 5;
const CATCH_UP_PAUSE_MAX_MS = 200;
/** How often a running gateway looks for queued entries nobody is chaining (their writer died). */
const SWEEP_INTERVAL_MS = 2_000;

/**
 * The audit log (T1–T3): append, verify, read with filters, export as a stream. One connection at a
 * time chains (AuditLogRepository.append); a replica that finds another one chaining commits its
 * entries to a queue the chainer empties in its next round, so replicas never fork the chain and do
 * not wait in line for the chain head (docs/decisions/0013-audit-across-replicas.md).
 */
@Injectable()
export class AuditService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Audit');

  private readonly signal: ChainSignal;

  constructor(private readonly log: AuditLogRepository) {
    this.signal = new ChainSignal(log, this.logger);
  }

  private readonly queue: PendingAppend[] = [];
  private flushing: Promise<void> | undefined;
  /**
   * The last round this service ran moved queued entries: it announced that another round follows,
   * and writers on other replicas wait for it rather than chain their own. That round is owed.
   */
  private owed = false;
  /** Batches committed to the queue, followed until a round has chained them. */
  private readonly following = new Set<Promise<void>>();
  /** When this service last left recorded entries in the queue, and the timer that chains them once it stops. */
  private leftAt = 0;
  private tailTimer: NodeJS.Timeout | undefined;
  private tailing: Promise<void> | undefined;
  private contendedUntil = 0;
  private closing = false;
  private sweeper: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private readonly chainedListeners = new Set<() => void>();
  private gate: (() => string | null) | undefined;

  /** Called after entries of this gateway joined the chain (audit sinks wake on it). */
  onChained(listener: () => void): () => void {
    this.chainedListeners.add(listener);
    return () => this.chainedListeners.delete(listener);
  }

  /**
   * Whether new actions may start: the audit sinks set this when the deployment refuses what no
   * sink can record. Checked where an action begins (the HTTP guard, a session's tool call), never
   * by `append`: an action already taken is always recorded.
   */
  setGate(gate: (() => string | null) | undefined): void {
    this.gate = gate;
  }

  /** The sentence of a refusal while new actions cannot be recorded, else null. */
  refusal(): string | null {
    return this.gate?.() ?? null;
  }

  /**
   * Records one entry and resolves once it is committed to the chain, with its seq and hashes.
   * Appends arriving while a write is in flight are written together in the next transaction (one
   * commit, one disk flush, for many), in the order they were called; the next batch is written
   * once this one is on disk (in the chain, or in the queue that rounds chain in order), so the
   * entries of one caller keep their order.
   */
  async append(input: AuditAppend): Promise<AuditEntry> {
    const entry = prepare(input);
    const row = await new Promise<AuditLogRow>((resolve, reject) => {
      this.queue.push({ entry, bytes: Buffer.byteLength(entry.payload, 'utf8'), resolve, reject });
      this.flushing ??= this.flush();
    });
    return toEntry(row);
  }

  /**
   * Records one entry and resolves once it is on disk: in the chain, or — on PostgreSQL, when another
   * connection is chaining — committed to the queue, which rounds chain in order within milliseconds
   * (a queued entry whose writer died is chained by the next round anywhere, or by any gateway's
   * sweep). What an action's caller needs: nothing it was told is recorded can be lost, and it does
   * not wait for the chain's round trip. Reads (list, count, export, verify) chain what was queued
   * before them first, so an entry recorded is an entry shown. Fails as `append` does before that.
   */
  async record(input: AuditAppend): Promise<void> {
    const entry = prepare(input);
    await new Promise<void>((recorded, reject) => {
      this.queue.push({ entry, bytes: Buffer.byteLength(entry.payload, 'utf8'), resolve: () => recorded(), reject, recorded });
      this.flushing ??= this.flush();
    });
  }

  /** Resolves once every append and record already called is in the chain (or has failed). */
  async drain(): Promise<void> {
    for (;;) {
      if (this.flushing) await this.flushing;
      else if (this.following.size > 0) await Promise.all([...this.following]);
      else if (this.tailTimer || this.tailing) {
        if (this.tailTimer) this.chainLeft();
        await this.tailing;
      } else return;
    }
  }

  /** Chains what a replica that died left in the queue, now and every few seconds. */
  onApplicationBootstrap(): void {
    this.closing = false;
    void this.sweep();
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  /** Runs before the database closes (its module closes it on application shutdown). */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    await this.drain();
    await this.sweeping;
    await this.signal.close();
  }

  /**
   * Chains queued entries while there are any and no other connection is chaining them: the
   * entries of a replica that was killed between queueing and chaining. Resolves with how many it
   * chained. A failure is logged, not thrown: the next sweep, or any append, tries again.
   */
  sweep(): Promise<number> {
    if (this.sweeping) return this.sweeping.then(() => 0);
    let chained = 0;
    const run = (async () => {
      try {
        if ((await this.log.queue()).entries === 0) return;
        for (;;) {
          const round = await this.log.append([], linkEntries);
          if (!round.chained || round.fromQueue === 0) return;
          chained += round.fromQueue;
          this.wakeChainedListeners();
          if (this.closing) return await this.log.announceStop();
        }
      } catch (error) {
        if (!databaseClosed(error)) this.logger.warn({ err: error }, 'audit sweep: queued entries could not be chained; the next sweep tries again');
      }
    })().finally(() => {
      this.sweeping = undefined;
    });
    this.sweeping = run;
    return run.then(() => chained);
  }

  private async flush(): Promise<void> {
    try {
      for (let first = true; ; first = false) {
        // The first batch waits one turn, so that entries recorded together (a tool call's proposal
        // and its decision) share it. Later ones let the callers just answered append again, so their
        // next entries share the next batch. Microtask turns, not a timer: a caller awaiting PGlite in
        // a loop never yields to timers.
        for (let turn = 0; turn < (first ? 1 : GATHER_TURNS); turn++) await Promise.resolve();
        if (this.queue.length === 0) {
          if (!this.owed) return;
          if (this.closing) {
            this.owed = false;
            return await this.breakOwedRound();
          }
          this.owed = await this.chainQueued();
          continue;
        }
        const batch = takeBatch(this.queue);
        try {
          const written = await this.writeBatch(batch, this.owed);
          if ('rows' in written) this.chained(batch, written);
          else {
            // On disk in the queue: writers that asked only for that are answered, and the batch is
            // followed until a round chains it, while the next batch is written.
            for (const pending of batch) pending.recorded?.();
            // Another connection's round was under way: its notice, after this service's last, says
            // whether that chainer goes on, so the round owed here is no longer waited for.
            if (!written.unseen) this.owed = false;
            if (batch.every((pending) => pending.recorded)) this.leftQueued();
            else this.follow(batch, written);
          }
        } catch (error) {
          for (const pending of batch) pending.reject(error);
          if (this.owed) await this.breakOwedRound();
          this.owed = false;
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  /** A batch is in the chain: its writers are answered and the sinks woken. */
  private chained(batch: PendingAppend[], written: Written): void {
    batch.forEach((pending, i) => pending.resolve(written.rows[i] as AuditLogRow));
    this.owed = written.fromQueue > 0;
    this.wakeChainedListeners();
  }

  private wakeChainedListeners(): void {
    for (const listener of this.chainedListeners) listener();
  }

  /**
   * Recorded entries were left in the queue, for the round under way elsewhere. Nobody waits for them
   * to be chained, so nothing follows them: the chainer of that round goes on while its rounds move
   * queued entries, and any replica whose window of contention ends chains whatever is queued. For
   * the moment the last chainer stops just before they were committed, this service chains what is
   * still queued once it has written nothing for TAIL_MS (and every gateway's sweep would, later).
   */
  private leftQueued(): void {
    this.leftAt = Date.now();
    if (this.tailTimer || this.closing) return;
    const arm = (ms: number) => {
      this.tailTimer = setTimeout(() => {
        const quiet = Date.now() - this.leftAt;
        if (quiet < TAIL_MS) return arm(TAIL_MS - quiet);
        this.chainLeft();
      }, ms);
      this.tailTimer.unref();
    };
    arm(TAIL_MS);
  }

  /** Chains what is queued now (see leftQueued); a failure is logged, the sweep tries again. */
  private chainLeft(): void {
    clearTimeout(this.tailTimer);
    this.tailTimer = undefined;
    this.tailing ??= this.chainQueuedBefore(TAIL_BOUND_MS)
      .then(
        (done) => {
          if (!done) this.logger.warn('audit: recorded entries left in the queue were not chained within 10 s; the sweep tries again');
        },
        (error: unknown) => {
          if (!databaseClosed(error)) this.logger.warn({ err: error }, 'audit: recorded entries left in the queue could not be chained yet; the sweep tries again');
        },
      )
      .finally(() => {
        this.tailing = undefined;
      });
  }

  /** Waits, beside the writes that follow, until a round has chained a batch committed to the queue. */
  private follow(batch: PendingAppend[], queued: Queued): void {
    const entries = batch.map((pending) => pending.entry);
    const following: Promise<void> = withDbRetry(
      async (attempt) => {
        if (attempt === 1) return this.awaitQueued(entries, queued.ids, queued.mark, queued.unseen);
        // After a short outage: where the entries are now.
        const mark = this.signal.mark();
        const found = await this.landed(entries, mark);
        return found && 'rows' in found ? found : this.awaitQueued(entries, found?.ids ?? new Map(), mark, true);
      },
      {
        onRetry: ({ attempt, reason, delayMs }) =>
          this.logger.warn({ attempt, reason, delayMs, entries: batch.length }, 'audit: the database is unreachable while queued entries are chained; retrying'),
      },
    )
      .then(
        (written) => {
          batch.forEach((pending, i) => pending.resolve(written.rows[i] as AuditLogRow));
          this.wakeChainedListeners();
          if (written.fromQueue > 0 && !this.closing) {
            // Its own round moved queued entries and announced another: that round is owed here.
            this.owed = true;
            this.flushing ??= this.flush();
          } else if (written.fromQueue > 0) return this.breakOwedRound();
        },
        (error: unknown) => {
          for (const pending of batch) pending.reject(error);
          // Writers told "recorded" are not told again: the entries are on disk, and the next round
          // anywhere, or a gateway's sweep, chains them.
          if (batch.some((pending) => pending.recorded) && !databaseClosed(error)) {
            this.logger.warn({ err: error, entries: batch.length }, 'audit: queued entries could not be followed into the chain; the next round or sweep chains them');
          }
        },
      )
      .finally(() => this.following.delete(following));
    this.following.add(following);
  }

  /** The owed round, for the queue alone; true when it moved entries (another one is owed). */
  private async chainQueued(): Promise<boolean> {
    try {
      const round = await this.log.append([], linkEntries);
      return round.chained && round.fromQueue > 0;
    } catch (error) {
      if (!databaseClosed(error)) this.logger.warn({ err: error }, 'audit: a round for queued entries failed; their writers chain them');
      await this.breakOwedRound();
      return false;
    }
  }

  /** Tells waiting writers that the round owed here will not come, so they do not wait for it. */
  private async breakOwedRound(): Promise<void> {
    try {
      await this.log.announceStop();
    } catch {
      // They find out after a second of silence instead.
    }
  }

  /**
   * Writes one batch, retrying across a short database outage (db/retry.ts). When no other
   * connection is chaining, the batch is chained in one transaction, after the queue's entries; when
   * one is, the batch is committed to the queue and this waits for a round to chain it. Before a
   * retry, the batch is looked for by its entries' keys: when the connection broke after a COMMIT had
   * landed, the batch is in the chain or in the queue already, and it is not written twice.
   */
  private async writeBatch(batch: PendingAppend[], owed: boolean): Promise<Written | Queued> {
    const entries = batch.map((pending) => pending.entry);
    return withDbRetry(
      async (attempt) => {
        // A round is owed here: try the chainer lock whatever the recent contention.
        const contended = !owed && Date.now() < this.contendedUntil;
        // The listener first, so that no notice about these entries can come before it (only a
        // batch with a writer waiting for the chain is followed there).
        if (contended && batch.some((pending) => !pending.recorded)) await this.signal.open();
        const mark = this.signal.mark();
        if (attempt > 1) {
          const found = await this.landed(entries, mark);
          if (found) return found;
        }
        if (contended) return { ids: await this.log.enqueue(entries), mark, unseen: true };
        const round = await this.log.append(entries, linkEntries);
        if (!round.chained) {
          // The lock is held by a round under way: its notice comes, whatever it holds.
          this.contendedUntil = Date.now() + CONTENDED_MS;
          return { ids: round.queued, mark, unseen: false };
        }
        return { rows: round.rows.slice(round.fromQueue), fromQueue: round.fromQueue };
      },
      {
        onRetry: ({ attempt, reason, delayMs }) => this.logger.warn({ attempt, reason, delayMs, entries: batch.length }, 'audit append: the database is unreachable; retrying'),
      },
    );
  }

  /**
   * Where a batch written before a broken connection landed: all in the chain, some in the queue (to
   * be followed from `mark`), or nowhere found (undefined: to be written again).
   */
  private async landed(entries: QueuedEntry[], mark: SignalMark): Promise<Written | Queued | undefined> {
    const where = await this.log.locate(entries.map((e) => e.key));
    if (where.chained.size === entries.length) return { rows: placed(entries, where.chained), fromQueue: 0 };
    return where.queued.size > 0 ? { ids: where.queued, mark, unseen: true } : undefined;
  }

  /**
   * Waits until every one of `entries` (committed to the queue, with these queue ids) is in the
   * chain. Round notices say where queued entries went, and whether their chainer owes another round
   * (it moved queued entries); a writer acts only when no chainer is going on: when nobody was seen
   * chaining as its entries were written, when a round announced that its chainer stops, or when
   * nothing was heard for a while (the listener was lost, or a chainer died mid-round). Then it
   * looks its entries up, and chains them itself if no round is under way. So a queued entry never
   * waits for a chainer that is not there.
   */
  private async awaitQueued(entries: QueuedEntry[], queued: Map<string, number>, before: SignalMark, unseen: boolean): Promise<Written> {
    const places = new Map<string, ChainPlace>();
    const keys = entries.map((e) => e.key);
    const complete = () => {
      for (const entry of entries) {
        const id = queued.get(entry.key);
        const place = id === undefined ? undefined : this.signal.place(id);
        if (place && !places.has(entry.key)) places.set(entry.key, place);
      }
      return places.size === entries.length;
    };
    // Opened now if it was not open when the entries were written: then `before` says so, and the
    // first turn looks them up instead of trusting notices that may have gone unheard.
    await this.signal.open();
    let mark = before;
    // Written without seeing a chainer: look for one, unless the last round heard of owes another.
    let look = unseen && !(before.listening && this.signal.roundOwed());
    let fromQueue = 0;
    for (;;) {
      if (complete()) return { rows: placed(entries, places), fromQueue };
      if (look || this.signal.stoppedSince(mark)) {
        look = false;
        const lookUp = !mark.listening || this.signal.stoppedSince(mark);
        mark = this.signal.mark();
        if (lookUp) {
          const where = await this.log.locate(keys);
          for (const [key, place] of where.chained) places.set(key, place);
          for (const [key, id] of where.queued) queued.set(key, id);
          if (complete()) return { rows: placed(entries, places), fromQueue };
        }
        if (await this.log.chainerBusy()) {
          this.contendedUntil = Date.now() + CONTENDED_MS;
          // Without a listener nothing will say when that round ends: open one, or look again shortly.
          if (!mark.listening && !(await this.signal.open())) await this.signal.next(mark.notices, SILENCE_MS);
          continue;
        }
        // Nobody is chaining: chain here, round after round while rounds move queued entries (each
        // such round owes the next), until these entries are in.
        for (;;) {
          const round = await this.log.append([], linkEntries);
          if (!round.chained) break;
          fromQueue = round.fromQueue;
          for (const row of round.rows) if (row.entryKey !== null && keys.includes(row.entryKey)) places.set(row.entryKey, row);
          if (complete() || round.fromQueue === 0) break;
        }
        continue;
      }
      const heard = await this.signal.next(mark.notices, SILENCE_MS);
      mark = heard ? { ...mark, notices: this.signal.mark().notices } : { ...mark, listening: false };
    }
  }

  /**
   * Reads show every entry recorded before them (AuditService.record answers once an entry is
   * queued): the entries any replica had queued when the read began are chained first, by the round
   * under way elsewhere or by rounds run here, for at most CATCH_UP_MS. Nothing to do on PGlite, or
   * when the queue is empty (one indexed read).
   */
  private async caughtUp(): Promise<void> {
    if (!this.log.queues) return;
    if (!(await this.chainQueuedBefore(CATCH_UP_MS))) {
      this.logger.warn('audit: entries queued before a read were not chained within 2 s; the read shows the chain as it is');
    }
  }

  /**
   * Makes sure that what is queued now is chained: by the round under way elsewhere (it takes the
   * queue oldest first), or by rounds run here. True once it is; false after `ms` without.
   */
  private async chainQueuedBefore(ms: number): Promise<boolean> {
    const { last } = await this.log.queueBounds();
    if (last === null) return true;
    const deadline = Date.now() + ms;
    let owed = false;
    let pause = CATCH_UP_PAUSE_MS;
    try {
      for (;;) {
        const { first } = await this.log.queueBounds();
        if (first === null || first > last) return true;
        if (Date.now() >= deadline) return false;
        const round = await this.log.append([], linkEntries);
        owed = round.chained && round.fromQueue > 0;
        if (owed) this.wakeChainedListeners();
        // Another connection is chaining: its round takes the queue oldest first. Asked again less and
        // less often, so that a round that lasts (a chainer frozen until its lease ends) is not polled hard.
        if (!round.chained) {
          await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(0, deadline - Date.now()))));
          pause = Math.min(pause * 2, CATCH_UP_PAUSE_MAX_MS);
        }
      }
    } finally {
      // The last round here moved entries and announced another; writers waiting for it chain their own.
      if (owed) await this.breakOwedRound();
    }
  }

  /**
   * Walks the whole chain in pages, in constant memory, and names the first entry at which it stops
   * holding: altered, removed, reordered, cut off at the end, or written around the chain. With an
   * anchor (the `lastSeq`/`lastHash` of an earlier verification, kept outside the database), it also
   * catches a log rewritten and re-hashed from end to end by someone holding the database.
   */
  async verify(anchor?: ChainAnchor): Promise<AuditVerification> {
    // Entries archived by the retention are proven by their archive files; the log goes on from the last.
    const archive = await this.log.lastArchive();
    const start = archive ? { seq: archive.throughSeq, hash: archive.throughHash } : undefined;
    let verifier: ChainVerifier;
    try {
      verifier = new ChainVerifier(anchor, start);
    } catch (error) {
      throw new AppError(ErrorCode.ValidationFailed, (error as Error).message, { field: 'anchor' });
    }
    const archived = archive ? { seq: archive.throughSeq, hash: archive.throughHash, file: archive.file } : null;
    if (anchor && start && anchor.seq === start.seq && anchor.hash !== start.hash) {
      return broken(verifier, {
        seq: anchor.seq,
        problem: 'altered',
        message: `Entry ${anchor.seq} is not the entry your anchor recorded: the archive the log goes on from (${archive!.file}) ends with another hash, so the log was rewritten at or before entry ${anchor.seq}.`,
      });
    }
    await this.caughtUp();
    const head = await this.log.head();
    let after = start?.seq ?? 0;
    while (after < head.seq) {
      const rows = await this.log.range(after, head.seq, VERIFY_PAGE);
      if (rows.length === 0) break;
      for (const row of rows) {
        const problem = verifier.check(row);
        if (problem) return broken(verifier, problem);
      }
      after = (rows[rows.length - 1] as AuditLogRow).seq;
    }
    const end = verifier.finish(head);
    if (end) return broken(verifier, end);
    const intruder = await this.log.beyondHead();
    if (intruder !== undefined) {
      return broken(verifier, {
        seq: intruder,
        problem: 'inserted',
        message: `Entry ${intruder} was inserted around the chain: it lies beyond the last entry the log recorded (${head.seq}).`,
      });
    }
    return { ok: true, checked: verifier.checked, lastSeq: verifier.lastSeq, lastHash: verifier.lastHash, ...(archived ? { archivedThrough: archived } : {}) };
  }

  async count(filter: AuditFilter = {}): Promise<number> {
    checkFilter(filter);
    await this.caughtUp();
    return this.log.count(filter);
  }

  async list(filter: AuditFilter = {}, page: AuditPageRequest = {}): Promise<AuditEntry[]> {
    checkFilter(filter);
    await this.caughtUp();
    const rows = await this.log.list(filter, page);
    return rows.map(toEntry);
  }

  /**
   * The matching entries, oldest first, as chunks of text: read a page at a time, so exporting the
   * whole log holds one page in memory. The header (CSV) comes first even when nothing matches.
   */
  async *export(filter: AuditFilter, format: AuditExportFormat, identify: IdentityResolver = async () => new Map(), afterSeq?: number): AsyncGenerator<string> {
    checkFilter(filter);
    const line = format === 'csv' ? csvLine : format === 'jsonl' ? jsonlLine : undefined;
    if (!line) throw new AppError(ErrorCode.ValidationFailed, `The export format "${String(format)}" is not one of jsonl, csv.`, { field: 'format' });
    if (format === 'csv') yield CSV_HEADER;
    await this.caughtUp();
    let after: number | undefined = afterSeq === 0 ? undefined : afterSeq;
    for (;;) {
      const rows = await this.log.list(filter, { order: 'asc', after, limit: EXPORT_PAGE });
      if (rows.length === 0) return;
      const people = await identify([...new Set(rows.map((r) => r.actor))]);
      yield rows.map((r) => line(r, people.get(r.actor) ?? null)).join('');
      after = (rows[rows.length - 1] as AuditLogRow).seq;
      if (rows.length < EXPORT_PAGE) return;
    }
  }

  /** `export` as a Node stream, with back-pressure: pipe it into an HTTP response. */
  exportStream(filter: AuditFilter, format: AuditExportFormat, identify?: IdentityResolver, afterSeq?: number): Readable {
    return Readable.from(this.export(filter, format, identify, afterSeq), { objectMode: false });
  }
}

interface Written {
  rows: AuditLogRow[];
  /** Queued entries the last round this service ran moved: when some, it goes on chaining. */
  fromQueue: number;
}

/** A batch committed to the queue: its queue ids by key, the signal's mark from before, and whether a chainer was seen. */
interface Queued {
  ids: Map<string, number>;
  mark: SignalMark;
  /** Written without seeing a chainer (straight to the queue, or a retry): look for one. */
  unseen: boolean;
}

interface PendingAppend {
  entry: QueuedEntry;
  bytes: number;
  /** Called once the entry is in the chain. */
  resolve: (row: AuditLogRow) => void;
  reject: (error: unknown) => void;
  /** `record`: called once the entry is on disk, chained or queued. */
  recorded?: () => void;
}

function takeBatch(queue: PendingAppend[]): PendingAppend[] {
  let count = 0;
  let bytes = 0;
  while (count < queue.length && count < MAX_BATCH_ENTRIES) {
    const next = (queue[count] as PendingAppend).bytes;
    if (count > 0 && bytes + next > MAX_BATCH_BYTES) break;
    bytes += next;
    count += 1;
  }
  return queue.splice(0, count);
}

function prepare(input: AuditAppend): QueuedEntry {
  const actor = requireText('actor', input.actor, 200);
  const kind = requireText('kind', input.kind, 100);
  if (!KIND.test(kind)) {
    throw new AppError(ErrorCode.ValidationFailed, `The audit kind "${kind}" must be dotted lower-case words, like "session.stop".`, { field: 'kind' });
  }
  const projectId = optionalText('projectId', input.projectId);
  const sessionId = optionalText('sessionId', input.sessionId);
  let payload: string;
  try {
    payload = canonicalJson(input.payload === undefined ? null : input.payload);
  } catch (error) {
    if (error instanceof CanonicalJsonError) {
      throw new AppError(ErrorCode.ValidationFailed, `The audit payload cannot be recorded: ${error.message.replace(/^\$/, 'the payload')}`, { field: 'payload' });
    }
    throw error;
  }
  if (Buffer.byteLength(payload, 'utf8') > MAX_PAYLOAD_BYTES) {
    throw new AppError(ErrorCode.ValidationFailed, `The audit payload is larger than ${MAX_PAYLOAD_BYTES} bytes; record a digest of large output instead.`, {
      field: 'payload',
    });
  }
  return { key: randomUUID(), actor, kind, projectId, sessionId, payload };
}

/** Numbers and hashes `entries` onto the chain from `head`, in order, all at the time `at`. */
function linkEntries(head: { seq: number; hash: string }, at: Date, entries: QueuedEntry[]): AuditLogRow[] {
  let prevHash = head.hash;
  return entries.map((entry, i) => {
    const chained = { seq: head.seq + 1 + i, at, actor: entry.actor, kind: entry.kind, projectId: entry.projectId, sessionId: entry.sessionId, payload: entry.payload };
    const hash = chainHash(prevHash, chained);
    const row = { ...chained, prevHash, hash, entryKey: entry.key };
    prevHash = hash;
    return row;
  });
}

/** The rows of `entries` as the chain placed them (their content is what was written). */
function placed(entries: QueuedEntry[], places: Map<string, ChainPlace>): AuditLogRow[] {
  return entries.map((entry) => {
    const place = places.get(entry.key) as ChainPlace;
    return {
      seq: place.seq,
      at: place.at,
      actor: entry.actor,
      kind: entry.kind,
      projectId: entry.projectId,
      sessionId: entry.sessionId,
      payload: entry.payload,
      prevHash: place.prevHash,
      hash: place.hash,
      entryKey: entry.key,
    };
  });
}

/** The database handle was closed under a round (the process or the test is ending). */
function databaseClosed(error: unknown): boolean {
  // Drizzle wraps the driver's error ("Failed query: …") and keeps it as the cause.
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    if (/Cannot use a pool after calling end on the pool|PGlite is closed/.test(e.message)) return true;
  }
  return false;
}

function broken(verifier: ChainVerifier, problem: ChainBreak): AuditVerification {
  return { ok: false, checked: verifier.checked, ...problem };
}

function toEntry(row: AuditLogRow): AuditEntry {
  return {
    seq: row.seq,
    at: row.at.toISOString(),
    actor: row.actor,
    kind: row.kind,
    projectId: row.projectId,
    sessionId: row.sessionId,
    payload: JSON.parse(row.payload) as unknown,
    prevHash: row.prevHash,
    hash: row.hash,
  };
}

function requireText(field: string, value: unknown, max: number): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new AppError(ErrorCode.ValidationFailed, `The audit ${field} is required and must be a non-empty string.`, { field });
  }
  if (value.length > max) throw new AppError(ErrorCode.ValidationFailed, `The audit ${field} is longer than ${max} characters.`, { field });
  // The database stores text as UTF-8 without NUL: anything else would be stored differently from
  // what was hashed, and the entry would later read as altered.
  if (value.includes('\u0000') || LONE_SURROGATE.test(value)) {
    throw new AppError(ErrorCode.ValidationFailed, `The audit ${field} contains a NUL character or a lone surrogate, which cannot be stored as written.`, { field });
  }
  return value;
}

function optionalText(field: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  return requireText(field, value, 200);
}

function checkFilter(filter: AuditFilter): void {
  for (const key of ['from', 'to'] as const) {
    const value = filter[key];
    if (value !== undefined && Number.isNaN(value.getTime())) {
      throw new AppError(ErrorCode.ValidationFailed, `The audit filter "${key}" is not a valid date.`, { field: key });
    }
  }
  if (filter.from && filter.to && filter.from.getTime() > filter.to.getTime()) {
    throw new AppError(ErrorCode.ValidationFailed, 'The audit filter "from" is later than "to"; the range would match nothing.', { field: 'from' });
  }
}
