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
