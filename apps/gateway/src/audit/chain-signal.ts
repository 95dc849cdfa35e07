// What a gateway hears of chaining rounds on PostgreSQL (docs/decisions/0013-audit-across-replicas.md):
// every round that writes announces, on one channel, where the queued entries it moved went and
// whether its chainer goes on. A writer whose entries are queued waits for those notices instead of
// asking the database again and again.
import type { Logger } from '@nestjs/common';
import type { AuditListener, AuditLogRepository, ChainPlace, RoundNotice } from '../db/repositories/audit-log.repository';

/** Placements kept after their notice: a writer may read its INSERT's answer after the round's notice. */
const REMEMBERED = 50_000;
/** Without a listener, a queued writer looks its entries up this often. */
const POLL_MS = 25;
/** A listener nobody has waited on for this long is closed; the next queued write opens one again. */
const IDLE_CLOSE_MS = 5_000;

/** Counts of notices heard so far, taken before an action so that notices after it can be told apart. */
export interface SignalMark {
  /** False when no listener was open: notices may have been missed, look in the database. */
  listening: boolean;
  notices: number;
  /** Notices of rounds whose chainer stops (it moved no queued entry). */
  stops: number;
}

export class ChainSignal {
  private listener: AuditListener | undefined;
  private opening: Promise<boolean> | undefined;
  private readonly placed = new Map<number, ChainPlace>();
  private notices = 0;
  private stops = 0;
  private lastMore = false;
  private readonly wakers = new Set<() => void>();
  private waiting = 0;
  private idle: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly log: AuditLogRepository,
    private readonly logger: Logger,
  ) {}

  /** Opens the listener if it is not open; false when there is none (PGlite) or it cannot be opened. */
  open(): Promise<boolean> {
    if (this.listener) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    this.opening ??= this.log
      .listen(
        (notice) => this.hear(notice),
        (error) => this.lose(error),
      )
      .then(
        (listener) => {
          this.listener = listener;
          this.armIdleClose();
          return listener !== undefined;
        },
        (error: unknown) => {
          this.logger.warn({ err: error }, 'audit: the listener for chaining rounds could not be opened; queued entries are looked up instead');
          return false;
        },
      )
      .finally(() => {
        this.opening = undefined;
      });
    return this.opening;
  }

  mark(): SignalMark {
    return { listening: this.listener !== undefined, notices: this.notices, stops: this.stops };
  }

  /**
   * True when the last round heard of moved queued entries: its chainer owes another round (it keeps
   * chaining while the queue had entries), so a writer need not chain its own.
   */
  roundOwed(): boolean {
    return this.listener !== undefined && this.lastMore;
  }

  /** True when a round that stops was announced after `mark` (or the listener was not open then). */
  stoppedSince(mark: SignalMark): boolean {
    return !mark.listening || this.stops > mark.stops;
  }

  /** Where the entry queued with this id went, if a notice said so. */
  place(id: number): ChainPlace | undefined {
    return this.placed.get(id);
  }

  /**
   * Resolves true at the first notice after `notices` (at once if there was one), false after `ms`
   * without any or when the listener is lost.
   */
  next(notices: number, ms: number): Promise<boolean> {
    if (this.notices > notices) return Promise.resolve(true);
    if (!this.listener) return new Promise((resolve) => setTimeout(() => resolve(false), Math.min(ms, POLL_MS)));
    this.waiting += 1;
    clearTimeout(this.idle);
    return new Promise<boolean>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        resolve(this.notices > notices);
      };
      const timer = setTimeout(wake, ms);
      this.wakers.add(wake);
    }).finally(() => {
      this.waiting -= 1;
      this.armIdleClose();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idle);
    await this.opening;
    const listener = this.listener;
    this.listener = undefined;
    await listener?.close();
    for (const wake of [...this.wakers]) wake();
  }

  private hear(notice: RoundNotice): void {
    for (const [id, place] of notice.placed) this.placed.set(id, place);
    if (this.placed.size > REMEMBERED) {
      let excess = this.placed.size - REMEMBERED;
      for (const id of this.placed.keys()) {
        if (excess-- <= 0) break;
        this.placed.delete(id);
      }
    }
    this.notices += 1;
    this.lastMore = notice.more;
    if (!notice.more) this.stops += 1;
    for (const wake of [...this.wakers]) wake();
  }

  private lose(error?: Error): void {
    this.listener = undefined;
    this.lastMore = false;
    clearTimeout(this.idle);
    if (this.waiting > 0) this.logger.warn({ err: error }, 'audit: the listener for chaining rounds was lost; waiting writers look their entries up');
    for (const wake of [...this.wakers]) wake();
  }

  private armIdleClose(): void {
    clearTimeout(this.idle);
    if (!this.listener || this.waiting > 0) return;
    this.idle = setTimeout(() => {
      const listener = this.listener;
      if (!listener || this.waiting > 0) return;
      this.listener = undefined;
      void listener.close();
    }, IDLE_CLOSE_MS);
    this.idle.unref();
  }
}
