import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { EventsRepository, type EventScope } from '../db/repositories/events.repository';
import { withDbRetry } from '../db/retry';
import type { EventRow } from '../db/schema';
import { EVENT_FAN_OUT, type EventFanOut, type EventListener, type StoredEvent } from './event-bus';

interface NewGatewayEvent {
  type: string;
  sessionId?: string | null;
  projectId?: string | null;
  payload: Record<string, unknown>;
}

function toStoredEvent(row: EventRow): StoredEvent {
  return {
    seq: row.seq,
    type: row.type,
    sessionId: row.sessionId,
    projectId: row.projectId,
    at: row.at.toISOString(),
    payload: (row.payload ?? {}) as Record<string, unknown>,
  };
}

/**
 * Live events: stored first (so a reconnecting client can replay from its last seq), then fanned
 * out to every replica's listeners in the order the fan-out delivers them.
 */
@Injectable()
export class EventsService implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('Events');
  private readonly listeners = new Set<EventListener>();
  private readonly gapListeners = new Set<() => void>();
  private delivery: Promise<void> = Promise.resolve();
  /** The highest seq this replica has stored or received: where a subscription without a seq starts. */
  private latest = 0;

  constructor(
    private readonly repo: EventsRepository,
    @Inject(EVENT_FAN_OUT) private readonly fanOut: EventFanOut,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.fanOut.start({
      deliver: (seq, event) => {
        // One delivery at a time, so listeners see events in the order the fan-out announced them.
        this.delivery = this.delivery
          .then(async () => {
            const e = event ?? (await this.fetch(seq));
            if (e) this.emit(e);
          })
          .catch((err: unknown) => this.logger.error({ err, seq }, 'event delivery failed'));
      },
      onGap: () => {
        for (const listener of [...this.gapListeners]) listener();
      },
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.fanOut.stop();
    await this.delivery;
  }

  /**
   * Stores and announces one event, retrying across a short database outage (db/retry.ts). On
   * PostgreSQL the insert announces it itself, so an event is stored and announced, or neither.
   */
  async publish(input: NewGatewayEvent): Promise<StoredEvent> {
    return (await this.publishMany([input]))[0] as StoredEvent;
  }

  /**
   * Stores several events in one statement, in the order given (their seqs follow that order), and
   * announces them in that order: one round trip for what a session produced meanwhile, instead of
   * one each. Retried as `publish` is.
   */
  async publishMany(inputs: NewGatewayEvent[]): Promise<StoredEvent[]> {
    if (inputs.length === 0) return [];
    const onRetry = ({ attempt, reason, delayMs }: { attempt: number; reason: string; delayMs: number }) =>
      this.logger.warn({ types: inputs.map((i) => i.type), attempt, reason, delayMs }, 'events: the database is unreachable; retrying');
    const rows = inputs.map((input) => ({ type: input.type, sessionId: input.sessionId ?? null, projectId: input.projectId ?? null, payload: input.payload }));
    const stored = await withDbRetry(() => this.fanOut.publish(async (channel) => (await this.repo.appendMany(rows, channel)).map(toStoredEvent)), { onRetry });
    for (const event of stored) this.latest = Math.max(this.latest, event.seq);
    return stored;
  }

  subscribe(listener: EventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Called when live delivery may have skipped events; subscribers must replay from their last seq. */
  onGap(listener: () => void): () => void {
    this.gapListeners.add(listener);
    return () => this.gapListeners.delete(listener);
  }

  async replay(afterSeq: number, scope: EventScope, limit?: number): Promise<StoredEvent[]> {
    return (await this.repo.listAfter(afterSeq, scope, limit)).map(toStoredEvent);
  }

  /** Resolves once everything announced so far has reached the listeners (tests, shutdown). */
  async drained(): Promise<void> {
    await this.delivery;
  }

  private async fetch(seq: number): Promise<StoredEvent | undefined> {
    try {
      const row = await withDbRetry(() => this.repo.findBySeq(seq));
      return row ? toStoredEvent(row) : undefined;
    } catch (err) {
      // Announced but unreadable: live clients missed it, and must replay from their last seq.
      for (const listener of [...this.gapListeners]) listener();
      throw err;
    }
  }

  latestSeq(): number {
    return this.latest;
  }

  private emit(event: StoredEvent): void {
    this.latest = Math.max(this.latest, event.seq);
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch (err) {
        this.logger.error({ err, seq: event.seq }, 'event listener failed');
      }
    }
  }
}
