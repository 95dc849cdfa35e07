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
 * Fan-out of stored events to every listener in every gateway replica. On PostgreSQL a NOTIFY
 * carries the seq and each replica reads the row; on PGlite there is one process, so it is direct.
 */
export interface FanOutHandlers {
  /** An event was announced; `event` is given when it is at hand, otherwise it is read by seq. */
  deliver(seq: number, event?: StoredEvent): void;
  /** Announcements may have been missed (a dropped connection); live clients must replay. */
  onGap(): void;
}

export interface EventFanOut {
  /** Called after the event row is committed. */
  announce(event: StoredEvent): Promise<void>;
  /** Several committed events, announced in the order given. */
  announceMany(events: StoredEvent[]): Promise<void>;
  start(handlers: FanOutHandlers): Promise<void>;
  stop(): Promise<void>;
}

export class InProcessFanOut implements EventFanOut {
  private handlers: FanOutHandlers | undefined;

  async announce(event: StoredEvent): Promise<void> {
    this.handlers?.deliver(event.seq, event);
  }

  async announceMany(events: StoredEvent[]): Promise<void> {
    for (const event of events) this.handlers?.deliver(event.seq, event);
  }

  async start(handlers: FanOutHandlers): Promise<void> {
    this.handlers = handlers;
  }

  async stop(): Promise<void> {
    this.handlers = undefined;
  }
}
export const EVENT_FAN_OUT = Symbol('EVENT_FAN_OUT');
