import type { EventsService } from '../events/events.service';

type NewEvent = Parameters<EventsService['publish']>[0];
type Write = { kind: 'event'; event: NewEvent } | { kind: 'op'; run: () => Promise<unknown> };

/** The most events stored in one statement. */
const MAX_EVENT_BATCH = 200;

/**
 * What a session tree records that its loop need not wait for: live events, the progress counters,
 * a call's decision and result rows. They are written in the order they were queued, one at a time
 * (events queued together go in one statement), while the loop goes on with the call; nothing that
 * guards a call is among them (the proposal's row and audit entries, and every audit entry, are
 * awaited by the loop itself).
 *
 * Whatever must come after them waits for `flush`: an approval request (its events follow the
 * loop's), the session's ending, the end of the run. A write that fails, once its database retries
 * are spent, is thrown at the next write or flush, so the loop still ends on it; it is thrown once.
 */
export class SessionWrites {
  private readonly queue: Write[] = [];
  private draining: Promise<void> | undefined;
  private failure: { error: unknown } | undefined;

  constructor(private readonly events: EventsService) {}

  event(event: NewEvent): void {
    this.raise();
    this.queue.push({ kind: 'event', event });
    this.draining ??= this.drain();
  }

  op(run: () => Promise<unknown>): void {
    this.raise();
    this.queue.push({ kind: 'op', run });
    this.draining ??= this.drain();
  }

  /** Resolves once everything queued so far is written; throws a failure not yet reported. */
  async flush(): Promise<void> {
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
      while (this.queue.length > 0) {
        const head = this.queue[0] as Write;
        try {
          if (head.kind === 'op') {
            this.queue.shift();
            await head.run();
          } else {
            let n = 1;
            while (n < this.queue.length && n < MAX_EVENT_BATCH && this.queue[n]?.kind === 'event') n++;
            const batch = this.queue.splice(0, n).map((w) => (w as { event: NewEvent }).event);
            await this.events.publishMany(batch);
          }
        } catch (error) {
          this.failure ??= { error };
        }
      }
    } finally {
      this.draining = undefined;
    }
  }
}
