import { ExecHostHeartbeat, ExecHostRoutes, type ExecOutputChunk } from '@lemniscate/contracts';
import { HttpExecHost } from '@lemniscate/gateway/src/exec-host/http-exec-host';
import { ExecHostCallError } from '@lemniscate/gateway/src/exec-host/exec-host.port';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { start } from '../../src/main';
import { StartupError } from '../../src/errors';
import { makeTestCerts, type CertPair, type TestCerts } from '../../../../test/support/certs';
import { makeRepo, TOKEN } from '../support/helpers';

/**
 * The control channel beyond loopback (ADR 0010), attacked: the handshake refuses a client without a
 * certificate from the client CA, the exec-host refuses a certificate of the right CA whose common
 * name it does not allow (another exec-host's), the token is still required, and the gateway's own
 * client works end to end over it. Registration heartbeats go to a stub gateway.
 */

interface Answer {
  status: number;
  body: string;
}

let certs: TestCerts;
let dir: string;
let port: number;
let stopped: (() => Promise<void>) | null = null;
const logs: string[] = [];

/** A stub pool gateway: records every heartbeat; answers 401 to the first two, then registers. */
const beats: { authorization: string | undefined; body: unknown }[] = [];
let stub: http.Server;
let stubUrl: string;

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = http.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

/** One HTTPS request with the given client certificate (or none), verifying the server against `ca`. */
function call(urlPath: string, opts: { client?: CertPair; ca: string; token?: string; host?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: opts.host ?? '127.0.0.1',
        port,
        path: urlPath,
        agent: false,
        ca: opts.ca,
        ...(opts.client ? { cert: opts.client.certPem, key: opts.client.keyPem } : {}),
        headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  certs = makeTestCerts(['exec-1', 'exec-2']);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-mtls-'));
  stub = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      beats.push({ authorization: req.headers.authorization, body: JSON.parse(text) });
      if (req.url !== '/api/v1/exec-hosts/heartbeat' || req.method !== 'POST') return void res.writeHead(404).end();
      if (beats.length <= 2) return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"code":"unauthorized","message":"Authentication required."}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'exec-1', state: 'active', heartbeatSeconds: 1, lostAfterSeconds: 20 }));
    });
  });
  await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
  stubUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
  port = await freePort();
  const host = certs.good.hosts['exec-1']!;
  const running = await start(
    {
      LEMNISCATE_EXEC_HOST_TOKEN: TOKEN,
      LEMNISCATE_EXEC_HOST_STATE_DIR: path.join(dir, 'state'),
      LEMNISCATE_EXEC_HOST_WARM_POOL: '0',
      LEMNISCATE_EXEC_HOST_BIND: '0.0.0.0',
      LEMNISCATE_EXEC_HOST_PORT: String(port),
      LEMNISCATE_EXEC_HOST_TLS_CERT: host.cert,
      LEMNISCATE_EXEC_HOST_TLS_KEY: host.key,
      LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA: certs.good.ca,
      LEMNISCATE_GATEWAY_URL: stubUrl,
      LEMNISCATE_EXEC_HOST_ID: 'exec-1',
      LEMNISCATE_EXEC_HOST_ADVERTISE_URL: `https://localhost:${port}`,
      LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS: '1',
      LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: '7',
      LEMNISCATE_SANDBOX_IMAGE: process.env.LEMNISCATE_SANDBOX_IMAGE ?? 'lemniscate/sandbox:current',
    },
    { logger: false, log: { log: (m) => logs.push(`log: ${m}`), warn: (m) => logs.push(`warn: ${m}`) } },
  );
  expect(running.address).toBe(`https://0.0.0.0:${port}`);
  stopped = () => running.close();
});

afterAll(async () => {
  await stopped?.();
  await new Promise((r) => stub.close(r));
  certs.remove();
  fs.rmSync(dir, { recursive: true, force: true });
});

const gatewayClient = (over: Partial<{ url: string; client: CertPair; ca: string; token: string }> = {}) =>
  new HttpExecHost({
    url: over.url ?? `https://127.0.0.1:${port}`,
    token: over.token ?? TOKEN,
    tls: { cert: (over.client ?? certs.good.gateway).certPem, key: (over.client ?? certs.good.gateway).keyPem, ca: over.ca ?? certs.good.caPem },
  });

describe('mutual TLS on the exec-host', () => {
  it('refuses the handshake to a client without a certificate', async () => {
    await expect(call('/healthz', { ca: certs.good.caPem, token: TOKEN })).rejects.toThrow(/certificate|alert|socket hang up|ECONNRESET/i);
  });

  it('refuses the handshake to a certificate of a foreign CA, even one named lemniscate-gateway', async () => {
    await expect(call('/healthz', { ca: certs.good.caPem, client: certs.foreign.gateway, token: TOKEN })).rejects.toThrow(/unknown ca|alert|socket hang up|ECONNRESET/i);
    await expect(call('/healthz', { ca: certs.good.caPem, client: certs.foreign.hosts['exec-2'], token: TOKEN })).rejects.toThrow();
  });

  it('refuses another exec-host (right CA, its own common name) with 403 and a sentence, token or not', async () => {
    for (const token of [TOKEN, undefined]) {
      const r = await call(ExecHostRoutes.health(), { ca: certs.good.caPem, client: certs.good.hosts['exec-2'], token });
      expect(r.status).toBe(403);
      expect(JSON.parse(r.body)).toEqual({
        code: 'unauthorized',
        message: 'A client certificate for "exec-2" may not call this exec-host: only "lemniscate-gateway" may (LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES).',
      });
    }
    // Its own certificate does not let an exec-host call itself either.
    expect((await call('/metrics', { ca: certs.good.caPem, client: certs.good.hosts['exec-1'], token: TOKEN })).status).toBe(403);
  });

  it('still requires the token from the gateway certificate', async () => {
    for (const token of [undefined, 'wrong-token-wrong-token', `${TOKEN}x`]) {
      for (const route of ['/healthz', ExecHostRoutes.health(), ExecHostRoutes.metrics(), '/nowhere']) {
        const r = await call(route, { ca: certs.good.caPem, client: certs.good.gateway, token });
        expect([route, r.status]).toEqual([route, 401]);
      }
    }
    const ok = await call(ExecHostRoutes.health(), { ca: certs.good.caPem, client: certs.good.gateway, token: TOKEN });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body).engine.reachable).toBe(true);
  });

  it("runs a sandbox over mutual TLS through the gateway's client, and /metrics counts it", async () => {
    const client = gatewayClient();
    await expect(client.health()).resolves.toMatchObject({ ok: true });
    const repo = makeRepo();
    try {
      const sandbox = await client.create({ sessionId: `mtls-${process.pid}`, repository: { source: repo.dir }, runtime: 'runc' } as never);
      const out: ExecOutputChunk[] = [];
      const exit = await client.exec(sandbox.sandboxId, { command: 'cat README.md && echo over-tls' } as never, (c) => out.push(c));
      expect(exit.exitCode).toBe(0);
      expect(out.map((c) => c.data).join('')).toBe('# demo\nover-tls\n');
      // A heartbeat after the creation reports the sandbox.
      await waitFor(() => beats.some((b) => (b.body as ExecHostHeartbeat).load === 1));
      const metrics = await call(ExecHostRoutes.metrics(), { ca: certs.good.caPem, client: certs.good.gateway, token: TOKEN });
      expect(metrics.status).toBe(200);
      expect(metrics.body).toMatch(/^lemniscate_exec_host_sandboxes 1$/m);
      expect(metrics.body).toMatch(/^lemniscate_exec_host_capacity 7$/m);
      expect(metrics.body).toMatch(/^lemniscate_exec_host_sandbox_create_seconds_count\{outcome="ok"\} 1$/m);
      expect(metrics.body).toMatch(/^lemniscate_exec_host_exec_seconds_count\{outcome="ok"\} 1$/m);
      expect(metrics.body).toMatch(/^# TYPE lemniscate_exec_host_exec_seconds histogram$/m);
      // The refusals of the tests above were counted.
      expect(metrics.body).toMatch(/^lemniscate_exec_host_refused_requests_total\{reason="client_certificate"\} [1-9]\d*$/m);
      await client.destroy(sandbox.sandboxId);
      expect((await call('/metrics', { ca: certs.good.caPem, client: certs.good.gateway, token: TOKEN })).body).toMatch(/^lemniscate_exec_host_sandboxes 0$/m);
    } finally {
      fs.rmSync(repo.dir, { recursive: true, force: true });
      client.close();
    }
  });

  it('gives the gateway a sentence when the exec-host certificate is not trusted: a foreign CA, or a name it does not carry', async () => {
    for (const [url, ca, why] of [
      [`https://127.0.0.1:${port}`, certs.foreign.caPem, /self-signed|unable to|issuer|verify/i],
      // 127.0.0.2 reaches the same listener (0.0.0.0), but the certificate names 127.0.0.1, localhost and exec-1 only.
      [`https://127.0.0.2:${port}`, certs.good.caPem, /ERR_TLS_CERT_ALTNAME_INVALID/],
    ] as const) {
      const client = gatewayClient({ url, ca });
      const err = await client.destroy('sbx-1').catch((e: unknown) => e);
      client.close();
      expect(err).toBeInstanceOf(ExecHostCallError);
      expect((err as ExecHostCallError).message).toContain(`The exec-host at ${url} could not be reached: its certificate was not trusted (`);
      expect((err as ExecHostCallError).message).toMatch(why);
      expect((err as ExecHostCallError).neverReached).toBe(true);
      expect(await client.health()).toEqual({ ok: false, message: (err as ExecHostCallError).message });
    }
  });

  it('gives the gateway a sentence when the exec-host refuses its client certificate', async () => {
    const client = gatewayClient({ client: certs.foreign.gateway });
    const err = await client.destroy('sbx-1').catch((e: unknown) => e);
    client.close();
    expect(err).toBeInstanceOf(ExecHostCallError);
    expect((err as ExecHostCallError).message).toMatch(new RegExp(`^The exec-host at https://127\\.0\\.0\\.1:${port} (refused the gateway's client certificate|could not be reached)`));
  });
});

describe('registration', () => {
  it('heartbeats with the token and its state, logs a refusal once, keeps retrying and then registers', async () => {
    await waitFor(() => beats.length >= 4);
    for (const b of beats) expect(b.authorization).toBe(`Bearer ${TOKEN}`);
    const body = ExecHostHeartbeat.parse(beats[0]!.body);
    expect(body).toMatchObject({ id: 'exec-1', address: `https://localhost:${port}`, capacity: 7, version: '0.1.0', environments: [] });
    expect(body.runtimes).toContain('runc');
    expect(body.images).toEqual([process.env.LEMNISCATE_SANDBOX_IMAGE ?? 'lemniscate/sandbox:current']);
    const refusals = logs.filter((l) => l.includes('HTTP 401'));
    expect(refusals).toEqual([`warn: The gateway at ${stubUrl} refused the token of exec-host exec-1 (HTTP 401): LEMNISCATE_EXEC_HOST_TOKEN must be the gateway's; retrying every 1 s.`]);
    expect(logs.filter((l) => l.includes('is registered'))).toEqual([
      `log: The exec-host exec-1 is registered with the gateway at ${stubUrl} as https://localhost:${port} (active; a heartbeat every 1 s).`,
    ]);
  });
});

describe('start-up refusals', () => {
  it.each(['0.0.0.0', '::'])('will not listen on %s without TLS, before touching anything', async (bind) => {
    const state = path.join(dir, `never-${bind.replace(/\W/g, '')}`);
    const err = await start({ LEMNISCATE_EXEC_HOST_TOKEN: TOKEN, LEMNISCATE_EXEC_HOST_BIND: bind, LEMNISCATE_EXEC_HOST_STATE_DIR: state }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StartupError);
    expect((err as Error).message).toBe(
      `The exec-host will not listen on ${bind} (LEMNISCATE_EXEC_HOST_BIND) without mutual TLS: set LEMNISCATE_EXEC_HOST_TLS_CERT, LEMNISCATE_EXEC_HOST_TLS_KEY and LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA, or bind 127.0.0.1.`,
    );
    expect(fs.existsSync(state)).toBe(false);
  });
});

async function waitFor(check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not true within ${timeoutMs} ms; heartbeats: ${JSON.stringify(beats.slice(-3))}; logs: ${logs.join(' | ')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
