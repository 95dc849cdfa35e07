import { ExecHostHealth } from '@lemniscate/contracts';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { ExecHostCallError } from '../../../src/exec-host/exec-host.port';
import { HttpExecHost, type ExecHostTlsOptions } from '../../../src/exec-host/http-exec-host';
import { makeTestCerts, type TestCerts } from '../../../../../test/support/certs';

/**
 * The transports of the control channel: a unix socket (one machine) and HTTPS with the gateway's
 * client certificate (several), each with the same answers, streams, timeouts and errors as plain HTTP.
 */

const health: ExecHostHealth = {
  status: 'ok',
  engine: { reachable: true, version: '27' },
  runtimes: { runc: true, runsc: false },
  image: { name: 'lemniscate/sandbox:current', present: true },
  seccomp: { path: '/x', valid: true },
  apparmor: { state: 'unavailable', profile: 'lemniscate-sandbox' },
  diskCap: { mechanism: 'ext4-loop', available: true },
  cgroups: { layout: 'v2' },
  sandboxes: 0,
} as ExecHostHealth;

interface Seen {
  method: string;
  url: string;
  authorization: string | undefined;
  body: string;
  clientCn: string | null;
}

/** An exec-host double: health, an exec stream, a slow route and a refusal, recording what it was sent. */
function handler(seen: Seen[]) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const socket = req.socket as TLSSocket;
      seen.push({
        method: req.method!,
        url: req.url!,
        authorization: req.headers.authorization,
        body,
        clientCn: socket.encrypted ? ((socket.getPeerCertificate()?.subject?.CN as string) ?? null) : null,
      });
      if (req.url === '/v1/health') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(health));
      if (req.url?.endsWith('/exec')) {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.write(`${JSON.stringify({ type: 'stdout', data: 'one\n' })}\n`);
        setTimeout(() => res.end(`${JSON.stringify({ type: 'exit', exitCode: 0, durationMs: 5, timedOut: false, truncated: false, class: null, classes: [] })}\n`), 30);
        return;
      }
      if (req.url?.endsWith('/changes')) return; // never answers
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"sandbox_not_found","message":"No sandbox sbx-9 on this exec-host."}');
    });
  };
}

let certs: TestCerts;
let dir: string;
const servers: { close(): void; closeAllConnections(): void }[] = [];
const seen: Seen[] = [];
let unixUrl: string;
let httpsUrl: string;
let gatewayTls: ExecHostTlsOptions;

beforeAll(async () => {
  certs = makeTestCerts(['exec-1']);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-transport-'));
  const socketPath = path.join(dir, 'exec-host.sock');
  const plain = http.createServer(handler(seen));
  await new Promise<void>((r) => plain.listen(socketPath, r));
  unixUrl = `unix:${socketPath}`;
  const host = certs.good.hosts['exec-1']!;
  const secure = https.createServer({ cert: host.certPem, key: host.keyPem, ca: certs.good.caPem, requestCert: true, rejectUnauthorized: true }, handler(seen));
  await new Promise<void>((r) => secure.listen(0, '127.0.0.1', r));
  httpsUrl = `https://127.0.0.1:${(secure.address() as AddressInfo).port}`;
  servers.push(plain, secure);
  gatewayTls = { cert: certs.good.gateway.certPem, key: certs.good.gateway.keyPem, ca: certs.good.caPem };
});

afterAll(() => {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  certs.remove();
  fs.rmSync(dir, { recursive: true, force: true });
});

const transports = () =>
  [
    ['a unix socket', unixUrl, null, null],
    ['mutual TLS', httpsUrl, gatewayTls, 'lemniscate-gateway'],
  ] as const;

describe.each(['a unix socket', 'mutual TLS'])('HttpExecHost over %s', (name) => {
  const pick = () => transports().find(([n]) => n === name)!;

  it('sends the token, reads health, streams an exec and keeps refusals coded', async () => {
    const [, url, tls, cn] = pick();
    const client = new HttpExecHost({ url, token: 'tok', tls });
    try {
      // Only this transport's requests (a timed-out call of another test may reach its server late).
      const start = seen.length;
      await expect(client.health()).resolves.toEqual({ ok: true });
      const out: string[] = [];
      const exit = await client.exec('sbx-1', { command: 'echo one' }, (c) => out.push(c.data));
      expect({ out, exitCode: exit.exitCode }).toEqual({ out: ['one\n'], exitCode: 0 });
      const refused = (await client.read('sbx-9', { path: 'a' }).catch((e: unknown) => e)) as ExecHostCallError;
      expect({ code: refused.code, status: refused.status, message: refused.message }).toEqual({ code: 'sandbox_not_found', status: 404, message: 'No sandbox sbx-9 on this exec-host.' });
      const mine = seen.slice(start).filter((s) => s.clientCn === cn && !s.url.endsWith('/changes'));
      expect(mine.map((s) => [s.method, s.url, s.authorization, s.clientCn])).toEqual([
        ['GET', '/v1/health', 'Bearer tok', cn],
        ['POST', '/v1/sandboxes/sbx-1/exec', 'Bearer tok', cn],
        ['POST', '/v1/sandboxes/sbx-9/files/read', 'Bearer tok', cn],
      ]);
      expect(JSON.parse(mine[1]!.body)).toEqual({ command: 'echo one' });
    } finally {
      client.close();
    }
  });

  it('bounds a call with its timeout and stops at the caller signal', async () => {
    const [, url, tls] = pick();
    const client = new HttpExecHost({ url, token: 'tok', tls, timeoutsMs: { files: 200 } });
    try {
      await expect(client.changes('sbx-1')).rejects.toThrow(`The exec-host at ${url} did not answer within 0 s.`);
      const abort = new AbortController();
      const pending = client.changes('sbx-1', abort.signal).catch((e: unknown) => e);
      setTimeout(() => abort.abort(new Error('stopped by the caller')), 30);
      expect(((await pending) as Error).message).toBe('stopped by the caller');
    } finally {
      client.close();
    }
  });
});

describe('HttpExecHost when it cannot reach the exec-host', () => {
  it('says a unix socket that does not exist was never reached', async () => {
    const url = `unix:${path.join(dir, 'absent.sock')}`;
    const err = (await new HttpExecHost({ url, token: 't' }).destroy('sbx-1').catch((e: unknown) => e)) as ExecHostCallError;
    expect({ message: err.message, code: err.code, neverReached: err.neverReached }).toEqual({
      message: `The exec-host at ${url} could not be reached.`,
      code: 'engine_unavailable',
      neverReached: true,
    });
  });

  // Every way of not trusting the exec-host: a foreign CA, a name its certificate does not carry.
  it.each([
    ['a certificate of a foreign CA', () => ({ url: httpsUrl, tls: { ...gatewayTls, ca: certs.foreign.caPem } })],
    ['a certificate without the address name', () => ({ url: httpsUrl.replace('127.0.0.1', '127.0.0.2'), tls: gatewayTls })],
  ])('refuses %s with a sentence naming the address', async (_name, make) => {
    const { url, tls } = make();
    if (url.includes('127.0.0.2')) {
      // Reach the same server through another loopback address: a second listener on 127.0.0.2.
      const host = certs.good.hosts['exec-1']!;
      const other = https.createServer({ cert: host.certPem, key: host.keyPem, ca: certs.good.caPem, requestCert: true, rejectUnauthorized: true }, handler([]));
      await new Promise<void>((r) => other.listen(0, '127.0.0.2', r));
      servers.push(other);
      const otherUrl = `https://127.0.0.2:${(other.address() as AddressInfo).port}`;
      const err = (await new HttpExecHost({ url: otherUrl, token: 't', tls }).destroy('sbx-1').catch((e: unknown) => e)) as ExecHostCallError;
      expect(err.message).toMatch(new RegExp(`^The exec-host at ${otherUrl.replace(/\./g, '\\.')} could not be reached: its certificate was not trusted \\(ERR_TLS_CERT_ALTNAME_INVALID`));
      expect(err.neverReached).toBe(true);
      return;
    }
    const err = (await new HttpExecHost({ url, token: 't', tls }).destroy('sbx-1').catch((e: unknown) => e)) as ExecHostCallError;
    expect(err.message).toMatch(new RegExp(`^The exec-host at ${url.replace(/\./g, '\\.')} could not be reached: its certificate was not trusted \\(`));
    expect(err.message).toContain('LEMNISCATE_EXEC_HOST_CA must be the CA that signed it');
    expect(err.neverReached).toBe(true);
  });

  it('is refused by an exec-host that does not know its client certificate, or when it has none', async () => {
    for (const tls of [{ ...gatewayTls, cert: certs.foreign.gateway.certPem, key: certs.foreign.gateway.keyPem }]) {
      const err = (await new HttpExecHost({ url: httpsUrl, token: 't', tls }).destroy('sbx-1').catch((e: unknown) => e)) as ExecHostCallError;
      expect(err).toBeInstanceOf(ExecHostCallError);
      expect(err.message).toMatch(new RegExp(`^The exec-host at ${httpsUrl.replace(/\./g, '\\.')} (refused the gateway's client certificate|could not be reached)`));
    }
  });

  it('refuses a client certificate for an address that is not https://', () => {
    expect(() => new HttpExecHost({ url: unixUrl, token: 't', tls: gatewayTls })).toThrow(/is a unix socket: a client certificate applies to https:\/\/ addresses only/);
    expect(() => new HttpExecHost({ url: 'http://127.0.0.1:1', token: 't', tls: gatewayTls })).toThrow(/is http:\/\/: a client certificate applies to https:\/\/ addresses only/);
    expect(() => new HttpExecHost({ url: 'unix:relative.sock', token: 't' })).toThrow(/must name an absolute socket path/);
  });
});

/**
 * Kept connections: an exec-host closes a connection that sat idle for its keep-alive time, and a
 * call the gateway sends on it at that moment meets a reset. Every call of the port, over TCP and a
 * unix socket: the idempotent ones are sent again on a new connection and answered; the others
 * fail (a command as a lost sandbox, since it may have started) and are never sent twice. The
 * gateway closes an idle connection before the exec-host's announced time, so that it meets this
 * only when the exec-host closes one early.
 */
describe('HttpExecHost over a kept connection that the exec-host resets', () => {
  const fingerprint = `sha256:${'0'.repeat(64)}`;
  const answers: Record<string, unknown> = {
    'GET /v1/sandboxes/sbx-1/patch': { baseCommit: 'a'.repeat(40), patch: '', includedUncommitted: false, sessionPatch: '', fingerprint },
    'GET /v1/sandboxes/sbx-1/changes': { files: [], truncated: false },
    'DELETE /v1/sandboxes/sbx-1': { sandboxId: 'sbx-1', destroyed: true },
  };
  type Call = [label: string, call: (c: HttpExecHost) => Promise<unknown>, sentAgain: boolean];
  const calls: Call[] = [
    ['patch (GET)', (c) => c.patch('sbx-1'), true],
    ['changes (GET)', (c) => c.changes('sbx-1'), true],
    ['destroy (DELETE)', (c) => c.destroy('sbx-1'), true],
    ['exec (POST)', (c) => c.exec('sbx-1', { command: 'echo one' }, () => undefined), false],
    ['accept (POST)', (c) => c.accept('sbx-1', ['a.txt']), false],
    ['apply (POST)', (c) => c.apply('sbx-1', 'diff --git a/a.txt b/a.txt\n'), false],
  ];

  /** Answers health, then resets every later request that arrives on a connection it has answered on. */
  async function resettingHost(listenOn: string | number): Promise<{ url: string; seen: [connection: number, request: string][]; close(): void }> {
    const seen: [number, string][] = [];
    const ids = new WeakMap<object, number>();
    let next = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      const connection = ids.get(req.socket) ?? ids.set(req.socket, ++next).get(req.socket)!;
      const request = `${req.method} ${req.url}`;
      const again = seen.some(([c]) => c === connection);
      seen.push([connection, request]);
      // A reset over TCP; a unix socket has none, and is closed under the request.
      if (again) return void (typeof listenOn === 'number' ? req.socket.resetAndDestroy() : req.socket.destroy());
      if (request === 'GET /v1/health') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(health));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answers[request] ?? {}));
    });
    await new Promise<void>((r) => server.listen(listenOn as number, '127.0.0.1', r));
    const url = typeof listenOn === 'string' ? `unix:${listenOn}` : `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return { url, seen, close: () => (server.closeAllConnections(), server.close()) };
  }

  const places: [string, () => string | number][] = [
    ['TCP', () => 0],
    ['a unix socket', () => path.join(dir, `reset-${Math.random().toString(36).slice(2)}.sock`)],
  ];
  describe.each(places)('over %s', (_place, listenOn) => {
    it.each(calls)('%s', async (_label, call, sentAgain) => {
      const host = await resettingHost(listenOn());
      const client = new HttpExecHost({ url: host.url, token: 'tok' });
      try {
        await client.health();
        const outcome = await call(client).then(
          () => 'answered',
          (e: unknown) => e,
        );
        const request = host.seen[1]![1];
        if (sentAgain) {
          expect(outcome).toBe('answered');
          // Reset on the kept connection, then answered on a new one.
          expect(host.seen).toEqual([
            [1, 'GET /v1/health'],
            [1, request],
            [2, request],
          ]);
        } else {
          expect(outcome).toBeInstanceOf(ExecHostCallError);
          const unreachable = `The exec-host at ${host.url} could not be reached.`;
          // A command may have started, so its sandbox is given up; any other call is simply refused.
          expect((outcome as ExecHostCallError).message).toBe(
            request.endsWith('/exec') ? `The connection to the exec-host broke after the command was sent (${unreachable}): the sandbox is lost.` : unreachable,
          );
          expect(host.seen).toEqual([
            [1, 'GET /v1/health'],
            [1, request],
          ]);
        }
      } finally {
        client.close();
        host.close();
      }
    });
  });

  it('closes an idle connection before the time the exec-host announced it would', async () => {
    // The exec-host announces 2 s but would keep the connection a minute: only the gateway closes it.
    let closedByGateway = false;
    const server = http.createServer((req, res) => {
      req.resume();
      req.socket.once('end', () => (closedByGateway = true));
      res.writeHead(200, { 'content-type': 'application/json', 'keep-alive': 'timeout=2' }).end(JSON.stringify(health));
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const client = new HttpExecHost({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' });
    try {
      await client.health();
      const end = Date.now() + 20_000;
      while (!closedByGateway && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect(closedByGateway).toBe(true);
    } finally {
      client.close();
      server.closeAllConnections();
      server.close();
    }
  });
});
