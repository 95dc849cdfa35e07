import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import type { EventFanOut, StoredEvent } from './event-bus';

const CHANNEL = 'lemniscate_events';

/**
 * Fan-out across gateway replicas: every replica LISTENs, the publisher NOTIFYs the seq (a NOTIFY
 * payload is capped at 8000 bytes, so the row is read back rather than sent). PostgreSQL delivers
 * notifications in commit order, including to the session that sent them.
 */
export class PgNotifyFanOut implements EventFanOut {
  private readonly logger = new Logger('EventFanOut');
  private client: Client | undefined;

  constructor(private readonly connectionString: string) {}

  async start(deliver: (seq: number, event?: StoredEvent) => void): Promise<void> {
    const client = new Client({ connectionString: this.connectionString });
    client.on('error', (err) => this.logger.error({ err }, 'event listener connection failed'));
    client.on('notification', (msg) => {
      if (msg.channel !== CHANNEL) return;
      const seq = Number(msg.payload);
      if (Number.isSafeInteger(seq) && seq > 0) deliver(seq);
    });
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    this.client = client;
  }

  async announce(event: StoredEvent): Promise<void> {
    if (!this.client) throw new Error('The event fan-out is not started.');
    await this.client.query('SELECT pg_notify($1, $2)', [CHANNEL, String(event.seq)]);
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end();
  }
}
