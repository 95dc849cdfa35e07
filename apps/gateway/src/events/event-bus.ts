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
export interface EventFanOut {
  /** Called after the event row is committed. */
  announce(event: StoredEvent): Promise<void>;
  start(deliver: (seq: number, event?: StoredEvent) => void): Promise<void>;
  stop(): Promise<void>;
}

export class InProcessFanOut implements EventFanOut {
  private deliver: ((seq: number, event?: StoredEvent) => void) | undefined;

  async announce(event: StoredEvent): Promise<void> {
    this.deliver?.(event.seq, event);
  }

  async start(deliver: (seq: number, event?: StoredEvent) => void): Promise<void> {
    this.deliver = deliver;
  }

  async stop(): Promise<void> {
    this.deliver = undefined;
  }
}
export const EVENT_FAN_OUT = Symbol('EVENT_FAN_OUT');
