import { DatabaseUnavailableError, transientReason } from '../db/errors';
import type { EventsService } from '../events/events.service';

type NewEvent = Parameters<EventsService['publish']>[0];
type Write = { kind: 'event'; event: NewEvent } | { kind: 'op'; run: () => Promise<unknown> };

/** The most events stored in one statement. */
const MAX_EVENT_BATCH = 200;

/**
 * What a session tree records that its loop need not wait for: live events, the progress counters
 * after an extension, a call's later decision and its result rows. They are written in the order
 * they were queued, one at a time (events queued together, or within one turn of the event loop, go
 * in one statement), while the loop goes on with the call; nothing that guards a call is among them
 * (the proposal's row, the counters written with it and every audit entry are awaited by the loop
 * itself).
 *
 * Whatever must come after them waits for `flush`: an approval request (its events follow the
 * loop's), the session's ending, the end of the run. Each write rides out a short database outage
 * (`retry`, the recorder's database retries); a write that still fails stays at the head of the
 * queue, with everything after it, and is tried again at the next flush (the ending's comes once the
 * database is back), so an event is never dropped while the audit entry of the same call is kept.
 * The failure is thrown once, at the next write or flush, so the loop still ends on it.
 */
export class SessionWrites {
  private readonly queue: Write[] = [];
  private draining: Promise<void> | undefined;
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly events: EventsService,
    private readonly retry: <T>(what: string, work: () => Promise<T>) => Promise<T> = (_what, work) => work(),
  ) {}

  // A write is queued even when a failure is pending: the failure is thrown (the loop ends on it),
  // and the write is made with the rest once the database is back (the ending's flush), so an event
  // of a call already in the audit log is not lost.
  event(event: NewEvent): void {
    this.queue.push({ kind: 'event', event });
    this.draining ??= this.drain();
    this.raise();
  }

  op(run: () => Promise<unknown>): void {
    this.queue.push({ kind: 'op', run });
    this.draining ??= this.drain();
    this.raise();
  }

  /** Resolves once everything queued so far is written; throws a failure not yet reported. */
  async flush(): Promise<void> {
    this.raise();
    // What a failure left queued is tried again now.
    if (this.queue.length > 0) this.draining ??= this.drain();
    while (this.draining) await this.draining;
    this.raise();
  }

  private raise(): void {
    const failure = this.failure;
    if (!failure) return;
    this.failure = undefined;
    throw failure.error;
  }

  private async drain(): Promise<void> {
    try {
      // What the loop queues before it next waits for something (a call's proposal, then its
      // decision, a few awaits apart) goes in the first statement, not one statement each.
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (this.queue.length > 0) {
        const head = this.queue[0] as Write;
        // An op alone; events queued together in one statement.
        let n = 1;
        if (head.kind === 'event') while (n < this.queue.length && n < MAX_EVENT_BATCH && this.queue[n]?.kind === 'event') n++;
        try {
          if (head.kind === 'op') await head.run();
          else {
            const batch = this.queue.slice(0, n).map((w) => (w as { event: NewEvent }).event);
            await this.retry('events', () => this.events.publishMany(batch));
          }
          this.queue.splice(0, n);
        } catch (error) {
          this.failure ??= { error };
          // The database away: kept, in order, for the next flush (nothing after it is written before
          // it). Any other failure would only fail again: that write is dropped and the rest go on.
          if (error instanceof DatabaseUnavailableError || transientReason(error) !== undefined) return;
          this.queue.splice(0, n);
        }
      }
    } finally {
      this.draining = undefined;
    }
  }
}
