import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP/HTTP receiver got it (JSON encoding: ids in hex). */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
  /** When it started and ended, in milliseconds since the epoch (fractional). */
  startMs: number;
  endMs: number;
}

/**
 * A real OTLP/HTTP traces endpoint (`POST /v1/traces`, JSON as the OpenTelemetry exporter sends it),
 * in the test's process; with a credential, a request without `authorization: Bearer <credential>` is
 * refused (401) and counted. Shared by the telemetry library's tests and the end-to-end trace test.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  refused = 0;
  url = '';
  private server: Server | null = null;

  constructor(private readonly credential: string | null = null) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/v1/traces' || (this.credential !== null && req.headers.authorization !== `Bearer ${this.credential}`)) {
          this.refused += 1;
          res.writeHead(req.url === '/v1/traces' ? 401 : 404).end();
          return;
        }
        if (!String(req.headers['content-type']).startsWith('application/json')) {
          res.writeHead(415).end();
          return;
        }
        this.take(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private take(body: any): void {
    const value = (v: any) => v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : (v?.boolValue ?? v?.doubleValue));
    for (const rs of body.resourceSpans ?? []) {
      const service = String(value(rs.resource?.attributes?.find((a: any) => a.key === 'service.name')?.value));
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            kind: s.kind,
            attributes: Object.fromEntries((s.attributes ?? []).map((a: any) => [a.key, value(a.value)])),
            status: s.status?.code ?? 0,
            startMs: nanosToMs(s.startTimeUnixNano),
            endMs: nanosToMs(s.endTimeUnixNano),
          });
        }
      }
    }
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** OTLP/JSON carries times as decimal strings of nanoseconds, beyond a double's integer precision. */
function nanosToMs(nanos: unknown): number {
  const n = BigInt(typeof nanos === 'number' ? Math.trunc(nanos) : typeof nanos === 'string' && /^\d+$/.test(nanos) ? nanos : 0);
  return Number(n / 1000n) / 1000;
}
