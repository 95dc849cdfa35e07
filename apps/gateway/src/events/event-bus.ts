/** A stored event as it travels between replicas and to clients. */
export interface StoredEvent {
  seq: number;
  type: string;
  sessionId: string | null;
  projectId: string | null;
  at: string;
  payload: Record<string, unknown>;
}

export type EventListener = (event: StoredEvent) => void;

/**
 * Fan-out of stored events to every listener in every gateway replica. On PostgreSQL the insert
 * itself NOTIFYs each seq and each replica reads the rows it did not write; on PGlite there is one
 * process, so it is direct.
 */
export interface FanOutHandlers {
  /** An event was announced; `event` is given when it is at hand, otherwise it is read by seq. */
  deliver(seq: number, event?: StoredEvent): void;
  /** Announcements may have been missed (a dropped connection); live clients must replay. */
  onGap(): void;
}

/** Inserts events in one statement and answers them as stored; given a channel, that statement announces them on it. */
export type StoreEvents = (notifyChannel: string | null) => Promise<StoredEvent[]>;

export interface EventFanOut {
  /** Stores events with `store` and announces them, in the order stored; answers them. */
  publish(store: StoreEvents): Promise<StoredEvent[]>;
  start(handlers: FanOutHandlers): Promise<void>;
  stop(): Promise<void>;
}

export class InProcessFanOut implements EventFanOut {
  private handlers: FanOutHandlers | undefined;

  async publish(store: StoreEvents): Promise<StoredEvent[]> {
    const events = await store(null);
    for (const event of events) this.handlers?.deliver(event.seq, event);
    return events;
  }

  async start(handlers: FanOutHandlers): Promise<void> {
    this.handlers = handlers;
  }

  async stop(): Promise<void> {
    this.handlers = undefined;
  }
}
export const EVENT_FAN_OUT = Symbol('EVENT_FAN_OUT');
