import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { followSession, FOLLOW_RECONNECT_MS, reconnectWindowMs } from '../../../src/gateway/event-stream';

let server: Server;
let wss: WebSocketServer;
let url: string;
let onSubscribe: (ws: WebSocket, msg: { sessionId: string; sinceSeq: number }, connection: number) => void;
let connections = 0;
const subscriptions: { sessionId: string; sinceSeq: number }[] = [];

const event = (seq: number, type = 'model_text', extra: Record<string, unknown> = {}) => ({
  type: 'event',
  event: { seq, type, sessionId: 's1', projectId: 'p1', at: new Date().toISOString(), text: `t${seq}`, ...extra },
});
const end = (seq: number) => event(seq, 'session_completed', { status: 'completed', stopReason: null, summary: null, exitCode: 0 });

async function listen(port = 0): Promise<void> {
  server = createServer();
  wss = new WebSocketServer({ server, path: '/api/v1/events' });
  wss.on('connection', (ws, req) => {
    const n = ++connections;
    if (req.headers.authorization !== 'Bearer good') {
      ws.send(JSON.stringify({ type: 'error', code: 'unauthenticated', message: 'The API token is unknown, expired or revoked.' }));
      ws.close(4401);
      return;
    }
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { sessionId: string; sinceSeq: number };
      subscriptions.push(msg);
      onSubscribe(ws, msg, n);
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The gateway goes away (connections refused) for `ms`, then listens again on the same port. */
async function restart(ms: number): Promise<void> {
  const port = (server.address() as AddressInfo).port;
  for (const c of wss.clients) c.terminate();
  await new Promise<void>((r) => wss.close(() => r()));
  await new Promise<void>((r) => server.close(() => r()));
  await new Promise((r) => setTimeout(r, ms));
  await listen(port);
}

beforeEach(async () => {
  connections = 0;
  subscriptions.length = 0;
  await listen();
});

afterEach(async () => {
  for (const c of wss.clients) c.terminate();
  await new Promise<void>((r) => wss.close(() => r()));
  await new Promise<void>((r) => server.close(() => r()));
});

async function collect(it: AsyncIterable<{ seq: number; type: string }>): Promise<number[]> {
  const seqs: number[] = [];
  for await (const e of it) seqs.push(e.seq);
  return seqs;
}

describe('followSession', () => {
  it("yields events in order and stops after the session's terminal event", async () => {
    onSubscribe = (ws) => [event(1), event(2), end(3), event(4)].forEach((m) => ws.send(JSON.stringify(m)));
    expect(await collect(followSession(url, 'good', 's1'))).toEqual([1, 2, 3]);
    expect(subscriptions).toEqual([{ type: 'subscribe', sessionId: 's1', sinceSeq: 0 }]);
  });

  it('after a dropped connection, resubscribes from the last seq and skips anything replayed twice', async () => {
    onSubscribe = (ws, msg, n) => {
      if (n === 1) {
        [event(1), event(2)].forEach((m) => ws.send(JSON.stringify(m)));
        ws.terminate();
      } else {
        // A server may replay a little too much; nothing must be yielded twice.
        [event(2), event(3), end(4)].forEach((m) => ws.send(JSON.stringify(m)));
      }
    };
    const reconnects: number[] = [];
    expect(await collect(followSession(url, 'good', 's1', { onReconnect: (a) => reconnects.push(a) }))).toEqual([1, 2, 3, 4]);
    expect(subscriptions.map((s) => s.sinceSeq)).toEqual([0, 2]);
    expect(reconnects).toEqual([1]);
  });

  it('a refused token is one sentence saying what to do', async () => {
    onSubscribe = () => undefined;
    await expect(collect(followSession(url, 'bad', 's1'))).rejects.toThrow(
      `The gateway at ${url} refused the API token for live events (The API token is unknown, expired or revoked): run \`lemni login\` or pass a valid --token.`,
    );
  });

  it('a gateway that is not there is reported as unreachable', async () => {
    const dead = url;
    for (const c of wss.clients) c.terminate();
    await new Promise<void>((r) => wss.close(() => r()));
    await new Promise<void>((r) => server.close(() => r()));
    server = createServer();
    wss = new WebSocketServer({ server });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    await expect(collect(followSession(dead, 'good', 's1'))).rejects.toThrow(`Cannot reach the gateway at ${dead}: is it running? (\`npm start\`)`);
  });

  it('a message of an unknown shape is a version mismatch, not a crash', async () => {
    onSubscribe = (ws) => ws.send(JSON.stringify({ type: 'surprise' }));
    await expect(collect(followSession(url, 'good', 's1'))).rejects.toThrow('sent a live message of an unknown shape; the CLI and the gateway are probably different versions');
  });

  it('gives up once the reconnect window has passed, saying how to follow again', async () => {
    onSubscribe = (ws) => ws.terminate();
    const started = Date.now();
    await expect(collect(followSession(url, 'good', 's1', { reconnectForMs: 1500 }))).rejects.toThrow(
      `Lost the live-event connection to the gateway at ${url} and could not get it back for 2 s; the session may still be running. Follow it again with \`lemni session follow s1\`, or look at it with \`lemni session show s1\`.`,
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
    expect(connections).toBeGreaterThan(3);
  });

  it('waits out a gateway restart longer than a few reconnects, then resumes from the last seq', async () => {
    // The first connection delivers two events and drops; the gateway then refuses connections for
    // 6 s (a restart that took 6 s gave up the old five-reconnect follower), then answers again.
    onSubscribe = (ws, _msg, n) => {
      if (n === 1) {
        [event(1), event(2)].forEach((m) => ws.send(JSON.stringify(m)));
        setTimeout(() => void restart(6000), 10);
      } else {
        [event(3), end(4)].forEach((m) => ws.send(JSON.stringify(m)));
      }
    };
    const reconnects: number[] = [];
    expect(await collect(followSession(url, 'good', 's1', { onReconnect: (a) => reconnects.push(a) }))).toEqual([1, 2, 3, 4]);
    expect(subscriptions.map((s) => s.sinceSeq)).toEqual([0, 2]);
    expect(reconnects.length).toBeGreaterThan(5);
  }, 30_000);

  it('reads the reconnect window from LEMNISCATE_FOLLOW_RECONNECT_SECONDS and refuses a bad one by name', () => {
    expect(reconnectWindowMs({})).toBe(FOLLOW_RECONNECT_MS);
    expect(reconnectWindowMs({ LEMNISCATE_FOLLOW_RECONNECT_SECONDS: '90' })).toBe(90_000);
    for (const bad of ['0', '-1', 'soon', 'Infinity']) {
      expect(() => reconnectWindowMs({ LEMNISCATE_FOLLOW_RECONNECT_SECONDS: bad })).toThrow(`LEMNISCATE_FOLLOW_RECONNECT_SECONDS must be a positive number of seconds, not "${bad}".`);
    }
  });
});
