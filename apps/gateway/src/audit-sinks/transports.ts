// How records leave the gateway: appended to a file, posted to a webhook, written to a syslog
// receiver. A transport resolves `send` only once the records are where it can vouch for them (on
// disk, accepted with a 2xx, handed to an open connection); any failure rejects, and the caller
// sends the same records again from its cursor.
import { createHmac, randomUUID } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import { hostname } from 'node:os';
import * as net from 'node:net';
import * as tls from 'node:tls';
import * as http from 'node:http';
import * as https from 'node:https';
import type { FileSinkConfig, SinkConfig, SyslogSinkConfig, WebhookSinkConfig } from './sink-config';

/** One record: its seq, its kind (syslog's MSGID), when it was chained, and its text. */
export interface SinkRecord {
  seq: number;
  kind: string;
  at: Date;
  text: string;
  /** The record without its payload, for a transport with a size limit. */
  short: () => string;
  /** Failed or refused actions are sent with a higher severity. */
  failure: boolean;
}

export interface SinkTransport {
  send(records: SinkRecord[]): Promise<void>;
  close(): Promise<void>;
}

export function transportFor(sink: SinkConfig): SinkTransport {
  switch (sink.type) {
    case 'file':
      return new FileTransport(sink);
    case 'webhook':
      return new WebhookTransport(sink);
    case 'syslog':
      return new SyslogTransport(sink);
  }
}

/** JSON lines appended with one write and a data sync per batch. */
export class FileTransport implements SinkTransport {
  constructor(private readonly sink: FileSinkConfig) {}

  async send(records: SinkRecord[]): Promise<void> {
    const handle = await fs.open(this.sink.path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
    try {
      await handle.write(records.map((r) => `${r.text}\n`).join(''));
      await handle.datasync();
    } finally {
      await handle.close();
    }
  }

  /**
   * The seq of the file's last whole record, after cutting a partial last line (a write the
   * gateway died in): what the file already holds is not sent again. null for an empty or missing file.
   */
  async lastSeq(): Promise<number | null> {
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(this.sink.path, constants.O_RDWR | constants.O_NOFOLLOW);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
    try {
      const { size } = await handle.stat();
      if (size === 0) return null;
      // Read backwards until the tail holds a whole line before the end.
      let chunk = 64 * 1024;
      for (;;) {
        const start = Math.max(0, size - chunk);
        const buf = Buffer.alloc(size - start);
        await handle.read(buf, 0, buf.length, start);
        let end = buf.length;
        if (buf[end - 1] !== 0x0a) {
          const cut = buf.lastIndexOf(0x0a);
          if (cut < 0 && start > 0) {
            chunk *= 4;
            continue;
          }
          // A partial last line: a write the gateway did not finish. It is cut, then sent again.
          await handle.truncate(start + cut + 1);
          await handle.datasync();
          if (cut < 0) return null;
          end = cut + 1;
        }
        const before = buf.lastIndexOf(0x0a, end - 2);
        if (before < 0 && start > 0) {
          chunk *= 4;
          continue;
        }
        const line = buf.subarray(before + 1, end - 1).toString('utf8');
        return recordSeq(line, this.sink.path);
      }
    } finally {
      await handle.close();
    }
  }

  async close(): Promise<void> {}
}

function recordSeq(line: string, path: string): number {
  let parsed: { seq?: unknown; metadata?: { sequence?: unknown } };
  try {
    parsed = JSON.parse(line) as typeof parsed;
  } catch {
    throw new Error(`The last line of ${path} is not an audit record, so where to go on from is unknown; move the file away or repair it.`);
  }
  const seq = parsed.seq ?? parsed.metadata?.sequence;
  if (typeof seq !== 'number' || !Number.isInteger(seq)) throw new Error(`The last line of ${path} carries no seq, so where to go on from is unknown; move the file away or repair it.`);
  return seq;
}

/**
 * One POST per batch: `{"sink":…,"records":[…]}` signed with HMAC-SHA256 over
 * `<timestamp>.<body>` (`X-Lemniscate-Signature: sha256=<hex>`, `X-Lemniscate-Timestamp`: Unix
 * seconds), `X-Lemniscate-Delivery` naming the batch by its first and last seq, so a receiver can
 * drop a batch it already has. Any answer but 2xx, a redirect included, is a failure.
 */
export class WebhookTransport implements SinkTransport {
  private readonly agent: http.Agent;

  constructor(private readonly sink: WebhookSinkConfig) {
    // With a timeout, the agent also closes an idle connection a second before the time the receiver
    // announced (`Keep-Alive: timeout=N`); without one it would keep it until a batch met its reset.
    const kept = { keepAlive: true, timeout: 60_000 };
    this.agent = sink.url.startsWith('https:') ? new https.Agent({ ...kept, ca: sink.ca }) : new http.Agent(kept);
  }

  async send(records: SinkRecord[]): Promise<void> {
    const body = Buffer.from(`{"sink":${JSON.stringify(this.sink.name)},"records":[${records.map((r) => r.text).join(',')}]}`, 'utf8');
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = webhookSignature(this.sink.secret, timestamp, body.toString('utf8'));
    const first = records[0]!.seq;
    const last = records[records.length - 1]!.seq;
    const url = new URL(this.sink.url);
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = (url.protocol === 'https:' ? https : http).request(
        url,
        {
          method: 'POST',
          agent: this.agent,
          timeout: this.sink.timeoutSeconds * 1000,
          headers: {
            'content-type': 'application/json',
            'content-length': body.length,
            'user-agent': 'lemniscate-audit-sink',
            'x-lemniscate-delivery': `${first}-${last}`,
            'x-lemniscate-timestamp': timestamp,
            'x-lemniscate-signature': `sha256=${signature}`,
            'x-lemniscate-request-id': randomUUID(),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            if (size < 4096) chunks.push(c);
            size += c.length;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${this.sink.url} did not answer within ${this.sink.timeoutSeconds} s`)));
      req.on('error', reject);
      req.end(body);
    });
    if (status < 200 || status >= 300) {
      const said = text.trim().replace(/\s+/g, ' ').slice(0, 200);
      throw new Error(`${this.sink.url} answered ${status}${said ? `: ${said}` : ''}`);
    }
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }
}

export function webhookSignature(secret: Buffer, timestamp: string, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex');
}

const SEVERITY_INFO = 6;
const SEVERITY_NOTICE = 5;
/** RFC 5612's documentation enterprise number, for the structured data element. */
const SD_ID = 'lemniscate@32473';

/** One RFC 5424 message: `<PRI>1 TIMESTAMP HOST APP - MSGID [SD] BOM MSG`. */
export function syslogMessage(record: SinkRecord, sink: Pick<SyslogSinkConfig, 'facility' | 'appName' | 'maxMessageBytes'>, host: string): Buffer {
  const pri = sink.facility * 8 + (record.failure ? SEVERITY_NOTICE : SEVERITY_INFO);
  const msgId = record.kind.replace(/[^!-~]/g, '_').slice(0, 32) || '-';
  const header = `<${pri}>1 ${record.at.toISOString()} ${host} ${sink.appName} - ${msgId} [${SD_ID} seq="${record.seq}"] \uFEFF`;
  let message = Buffer.from(header + record.text, 'utf8');
  if (message.length > sink.maxMessageBytes) message = Buffer.from(header + record.short(), 'utf8');
  return message;
}

/** RFC 6587 / RFC 5425 octet counting: `<length> <message>`. */
export function octetCounted(message: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${message.length} `, 'ascii'), message]);
}

function syslogHost(): string {
  const h = hostname()
    .replace(/[^!-~]/g, '')
    .slice(0, 255);
  return h || '-';
}

/**
 * One long-lived connection, reopened when the receiver closed it or an error ended it. Plain TCP
 * has no acknowledgement: a batch counts as sent once the kernel took it on an open connection. A
 * receiver that closes its end is seen before the next batch (the `end` event), and that batch goes
 * to a new connection; only a receiver that vanishes without closing (its host lost) can lose what
 * was in flight, which is why the webhook and file sinks exist beside it.
 */
export class SyslogTransport implements SinkTransport {
  private socket: net.Socket | undefined;
  private readonly host = syslogHost();

  constructor(private readonly sink: SyslogSinkConfig & { ca?: string | undefined }) {}

  async send(records: SinkRecord[]): Promise<void> {
    const socket = await this.connection();
    const data = Buffer.concat(records.map((r) => octetCounted(syslogMessage(r, this.sink, this.host))));
    await new Promise<void>((resolve, reject) => {
      const failed = (e?: Error) => {
        cleanup();
        reject(e ?? new Error(`${this.sink.url} closed the connection`));
      };
      const cleanup = () => {
        socket.off('error', failed);
        socket.off('close', onClose);
      };
      const onClose = () => failed();
      socket.once('error', failed);
      socket.once('close', onClose);
      socket.write(data, (e) => {
        cleanup();
        if (e) reject(e);
        else resolve();
      });
    }).catch((e: unknown) => {
      this.drop();
      throw e;
    });
  }

  private async connection(): Promise<net.Socket> {
    const open = this.socket;
    if (open && !open.destroyed && open.writable && !open.readableEnded) return open;
    this.drop();
    const url = new URL(this.sink.url);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port);
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const timer = setTimeout(() => {
        s.destroy();
        reject(new Error(`${this.sink.url} did not accept a connection within 10 s`));
      }, 10_000);
      const done = (e?: Error) => {
        clearTimeout(timer);
        if (e) reject(e);
        else resolve(s);
      };
      const s: net.Socket =
        url.protocol === 'tls:'
          ? tls.connect({ host, port, ca: this.sink.ca, servername: this.sink.serverName ?? (net.isIP(host) ? undefined : host), rejectUnauthorized: true }, () => done())
          : net.connect({ host, port }, () => done());
      s.once('error', (e) => done(e));
    });
    socket.setKeepAlive(true, 30_000);
    socket.setNoDelay(true);
    // What the receiver says is not read; its closing is.
    socket.on('data', () => undefined);
    socket.on('end', () => socket.destroy());
    socket.on('error', () => socket.destroy());
    this.socket = socket;
    return socket;
  }

  private drop(): void {
    this.socket?.destroy();
    this.socket = undefined;
  }

  async close(): Promise<void> {
    const s = this.socket;
    this.socket = undefined;
    if (!s || s.destroyed) return;
    await new Promise<void>((resolve) => {
      s.end(() => resolve());
      setTimeout(() => {
        s.destroy();
        resolve();
      }, 2_000).unref();
    });
  }
}

export type { FileSinkConfig };
