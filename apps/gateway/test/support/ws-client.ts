import WebSocket from 'ws';

/** A test client for /api/v1/events that hands out messages in order, waiting for them when needed. */
export class EventsClient {
  private readonly received: Record<string, unknown>[] = [];
  private waiters: (() => void)[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => {
      this.received.push(JSON.parse(String(data)) as Record<string, unknown>);
      for (const w of this.waiters.splice(0)) w();
    });
    this.closed = new Promise((resolve) => socket.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  }

  static async connect(baseUrl: string, options: { token?: string; headers?: Record<string, string> } = {}): Promise<EventsClient> {
    const url = `${baseUrl.replace(/^http/, 'ws')}/api/v1/events${options.token ? `?token=${encodeURIComponent(options.token)}` : ''}`;
    const socket = new WebSocket(url, { headers: options.headers });
    const client = new EventsClient(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    return client;
  }

  send(message: unknown): void {
    this.socket.send(JSON.stringify(message));
  }

  /** The next message, in arrival order. */
  async next(): Promise<Record<string, unknown>> {
    while (this.received.length === 0) await new Promise<void>((resolve) => this.waiters.push(resolve));
    return this.received.shift() as Record<string, unknown>;
  }

  /** Messages up to and including the first one matching `until`. */
  async until(until: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>[]> {
    const out: Record<string, unknown>[] = [];
    for (;;) {
      const m = await this.next();
      out.push(m);
      if (until(m)) return out;
    }
  }

  close(): Promise<{ code: number; reason: string }> {
    this.socket.close();
    return this.closed;
  }
}

export const eventOf = (m: Record<string, unknown>) => m.event as Record<string, unknown>;
