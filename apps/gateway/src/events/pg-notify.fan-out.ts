import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import type { EventFanOut, FanOutHandlers, StoreEvents, StoredEvent } from './event-bus';

const CHANNEL = 'lemniscate_events';
const MAX_BACKOFF_MS = 10_000;
/** Events of this replica kept until their own notification comes back (see `own`). */
const MAX_OWN_EVENTS = 10_000;

/**
 * Fan-out across gateway replicas: every replica LISTENs on a dedicated connection; the statement
 * inserting events NOTIFYs their seqs (a NOTIFY payload is capped at 8000 bytes, and anyone connected
 * to the database may send one, so the row is what is trusted: the other replicas read it back).
 * PostgreSQL delivers notifications in commit order, including to the sending session. When the
 * listening connection drops it is reopened; notifications sent meanwhile are lost, so `onGap` tells
 * live clients to reconnect with their last seq and replay what they missed.
 *
 * An event this replica stored itself is delivered from the copy its insert returned, not read back:
 * with one gateway, no event is ever read back. A notification can come in before that insert's
 * answer (two connections); a seq not known yet while inserts of this replica are in flight waits
 * for them, and later notifications wait behind it, so the order is kept.
 */
export class PgNotifyFanOut implements EventFanOut {
  private readonly logger = new Logger('EventFanOut');
  private client: Client | undefined;
  private handlers: FanOutHandlers | undefined;
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;
  /** What this replica stored, by seq, until its notification arrives (oldest first, bounded). */
  private readonly own = new Map<number, StoredEvent>();
  /** This replica's inserts in flight, each settled once its rows are in `own` (or it failed). */
  private readonly inserting = new Set<Promise<void>>();
  /** Notifications delivered one after the other, each after the inserts it waits for. */
  private arriving: Promise<void> = Promise.resolve();

  constructor(private readonly connectionString: string) {}

  async start(handlers: FanOutHandlers): Promise<void> {
    this.handlers = handlers;
    this.stopped = false;
    await this.listen();
  }

  publish(store: StoreEvents): Promise<StoredEvent[]> {
    const stored = store(CHANNEL).then((events) => {
      this.keep(events);
      return events;
    });
    const settled = stored.then(
      () => undefined,
      () => undefined,
    );
    this.inserting.add(settled);
    void settled.then(() => this.inserting.delete(settled));
    return stored;
  }

  private keep(events: StoredEvent[]): void {
    for (const e of events) this.own.set(e.seq, e);
    // A notification that never comes back (the listener was down) leaves its copy: the oldest go.
    for (const seq of this.own.keys()) {
      if (this.own.size <= MAX_OWN_EVENTS) break;
      this.own.delete(seq);
    }
  }

  private arrived(seq: number): void {
    // Nothing in flight could be this seq's insert: delivered now, unless earlier ones still wait.
    const waitFor = this.own.has(seq) || this.inserting.size === 0 ? null : [...this.inserting];
    this.arriving = this.arriving
      .then(() => (waitFor ? Promise.all(waitFor) : undefined))
      .then(() => {
        const own = this.own.get(seq);
        if (own) this.own.delete(seq);
        this.handlers?.deliver(seq, own);
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  /** For tests and operators: drops the listening connection as a network failure would. */
  async dropListener(): Promise<void> {
    const client = this.client as (Client & { connection?: { stream?: { destroy(): void } } }) | undefined;
    client?.connection?.stream?.destroy();
  }

  private async listen(): Promise<void> {
    const client = new Client({ connectionString: this.connectionString });
    client.on('notification', (msg) => {
      if (msg.channel !== CHANNEL) return;
      const seq = Number(msg.payload);
      if (!Number.isSafeInteger(seq) || seq <= 0) return;
      this.arrived(seq);
    });
    let lost = false;
    let listening = false;
    const onLost = (err?: Error) => {
      // A connection that never got to LISTEN is retried by the caller of listen(), once: reacting
      // here too would start a second retry chain per failure, doubling them while the server is away.
      if (!listening || lost || this.stopped) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      // Their notifications are lost with the connection; the replay after the gap reads them.
      this.own.clear();
      this.logger.warn({ err }, 'event listener connection lost; reconnecting');
      this.reconnect(250);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (error) {
      lost = true;
      await client.end().catch(() => undefined);
      throw error;
    }
    listening = true;
    this.client = client;
  }

  private reconnect(delayMs: number): void {
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      this.listen().then(
        () => this.handlers?.onGap(),
        (err: unknown) => {
          this.logger.warn({ err }, 'event listener could not reconnect; retrying');
          if (!this.stopped) this.reconnect(Math.min(delayMs * 2, MAX_BACKOFF_MS));
        },
      );
    }, delayMs);
    this.retry.unref();
  }
}
