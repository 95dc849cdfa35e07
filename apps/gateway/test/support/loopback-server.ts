import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * A real HTTP server on 127.0.0.1 for provider tests: each request is answered by the next
 * handler (the last one repeats), and every request is recorded with its parsed JSON body.
 */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
  receivedAt: number;
  /** Settles when the client side of this request's connection goes away. */
  closed: Promise<void>;
}

export type Handler = (res: ServerResponse, req: RecordedRequest) => void | Promise<void>;

export interface Loopback {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export async function startLoopback(handlers: Handler | Handler[]): Promise<Loopback> {
  const list = Array.isArray(handlers) ? handlers : [handlers];
  const requests: RecordedRequest[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const closed = new Promise<void>((resolve) => res.on('close', () => resolve()));
      const recorded: RecordedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: text ? JSON.parse(text) : undefined,
        receivedAt: Date.now(),
        closed,
      };
      const handler = list[Math.min(requests.length, list.length - 1)] as Handler;
      requests.push(recorded);
      Promise.resolve(handler(res, recorded)).catch((error: unknown) => {
        // A write after the client went away is expected in abort tests.
        if (!res.destroyed) res.destroy(error instanceof Error ? error : new Error(String(error)));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One `chat.completion.chunk` as an OpenAI-compatible service streams it. */
export function openAiChunk(delta: Record<string, unknown>, finish: string | null = null, model = 'gpt-test') {
  return { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }] };
}

export interface SseFrame {
  event?: string;
  data: unknown;
}

/** Serialises frames as a service would: `event:` when named, `data:` with JSON (or a raw string), a blank line. */
export function sse(frames: SseFrame[]): string {
  return frames.map((f) => `${f.event ? `event: ${f.event}\n` : ''}data: ${typeof f.data === 'string' ? f.data : JSON.stringify(f.data)}\n\n`).join('');
}

/**
 * Streams an event-stream body in small pieces cut at fixed byte offsets, so pieces end inside
 * lines, inside JSON and inside multi-byte characters, with short pauses between them.
 */
export async function streamSse(res: ServerResponse, body: string, options: { pieceBytes?: number; gapMs?: number; end?: boolean } = {}): Promise<void> {
  const { pieceBytes = 11, gapMs = 1, end = true } = options;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  const bytes = Buffer.from(body, 'utf8');
  for (let i = 0; i < bytes.length; i += pieceBytes) {
    if (res.destroyed) return;
    res.write(bytes.subarray(i, i + pieceBytes));
    await delay(gapMs);
  }
  if (end) res.end();
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** A settings block that retries fast, so failure-path tests stay quick. */
export const fastTransport = {
  idleTimeoutMs: 2_000,
  maxRetries: 2,
  initialBackoffMs: 1,
  maxBackoffMs: 5,
  maxRetryAfterMs: 5_000,
};
