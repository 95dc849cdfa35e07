import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CliError } from '../../../src/errors';
import { GatewayClient } from '../../../src/gateway/gateway-client';

let server: Server;
let url: string;
let reply: { status: number; body: string };
/** When set, answers in turn before `reply` (a database restarting, then back). */
let replies: { status: number; body: string }[] = [];
let requests: string[] = [];

beforeEach(async () => {
  replies = [];
  requests = [];
  server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const r = replies.shift() ?? reply;
    res.writeHead(r.status, { 'content-type': 'application/json' });
    res.end(r.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(() => new Promise<void>((r) => server.close(() => r())));

async function failure(p: Promise<unknown>): Promise<CliError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof CliError) return e;
    throw e;
  }
  throw new Error('expected a failure');
}

describe('GatewayClient', () => {
  it('validates responses against the contracts and names the first mismatch', async () => {
    reply = { status: 200, body: JSON.stringify([{ id: 'p1', name: 'demo' }]) };
    const e = await failure(new GatewayClient(url, 't').listProjects());
    expect(e.errorClass).toBe('gateway_contract');
    expect(e.message).toBe(
      `The gateway at ${url} answered GET /api/v1/projects with an unexpected body (0.repositorySource Invalid input: expected string, received undefined); the CLI and the gateway are probably different versions.`,
    );
  });

  it('a 401 without a token says how to get one', async () => {
    reply = { status: 401, body: JSON.stringify({ code: 'unauthenticated', message: 'x' }) };
    const e = await failure(new GatewayClient(url, undefined).listProjects());
    expect(e.message).toBe(`The gateway at ${url} needs an API token: run \`lemni login\`, pass --token, or set LEMNISCATE_TOKEN.`);
  });

  it("other errors carry the gateway's sentence and its request id", async () => {
    reply = { status: 403, body: JSON.stringify({ code: 'forbidden', message: 'Only administrators can publish a policy.', requestId: 'r-42' }) };
    const e = await failure(new GatewayClient(url, 't').publishPolicy('p1', 'version: 1', ''));
    expect(e).toMatchObject({ errorClass: 'forbidden', message: 'Only administrators can publish a policy. (request r-42)', exitCode: 1 });
  });

  it('an error without a body still says what failed', async () => {
    reply = { status: 502, body: '' };
    const e = await failure(new GatewayClient(url, 't').auditVerify());
    expect(e.message).toBe(`The gateway at ${url} answered GET /api/v1/audit/verify with HTTP 502.`);
  });

  it('a non-JSON success body is a contract error', async () => {
    reply = { status: 200, body: '<html>proxy</html>' };
    const e = await failure(new GatewayClient(url, 't').me());
    expect(e.message).toContain('with an unexpected body (the body is not JSON)');
  });

  it('an unreachable gateway is the one sentence of the contract', async () => {
    const e = await failure(new GatewayClient('http://127.0.0.1:1', 't').me());
    expect(e).toMatchObject({ errorClass: 'gateway_unreachable', message: 'Cannot reach the gateway at http://127.0.0.1:1: is it running? (`npm start`)' });
  });
});

describe('GatewayClient against the fake gateway (bodies checked against libs/contracts)', () => {
  it('starts an @mention subagent with a body the gateway accepts', async () => {
    const { FakeGateway, GOOD_TOKEN, sessionView } = await import('../../support/fake-gateway');
    const gateway = await new FakeGateway().start();
    try {
      gateway.sessions.set('s1', sessionView('s1'));
      const child = await new GatewayClient(gateway.url, GOOD_TOKEN).startSubagent('s1', 'explore', 'find the parsers');
      expect(child).toMatchObject({ parentSessionId: 's1', agent: 'explore', instruction: 'find the parsers' });
      expect(gateway.hits('POST', '/sessions/s1/subagents')[0]?.body).toEqual({ agent: 'explore', instruction: 'find the parsers' });
    } finally {
      await gateway.close();
    }
  });

  it.each([
    ['a read (GET) is sent again once on a new connection and succeeds', 'GET', 2, null],
    ['a write (POST) is not sent again: it may have arrived', 'POST', 1, 'gateway_unreachable'],
  ] as const)('when the connection is reset under a request, %s', async (_name, method, requests, errorClass) => {
    let seen = 0;
    const resetting = createServer((req, res) => {
      seen += 1;
      if (seen === 1) {
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true }));
    });
    await new Promise<void>((r) => resetting.listen(0, '127.0.0.1', r));
    const at = `http://127.0.0.1:${(resetting.address() as AddressInfo).port}`;
    try {
      const client = new GatewayClient(at, 't');
      const outcome = await client.raw(method, '/anything', method === 'POST' ? { body: {} } : {}).then(
        (r) => r.status,
        (e: CliError) => e.errorClass,
      );
      expect({ outcome, seen }).toEqual({ outcome: errorClass ?? 200, seen: requests });
    } finally {
      resetting.closeAllConnections();
      await new Promise<void>((r) => resetting.close(() => r()));
    }
  });

  describe("while the gateway's database restarts (503 database_unavailable)", () => {
    const unavailable = {
      status: 503,
      body: JSON.stringify({ code: 'database_unavailable', message: "The gateway's database is not reachable right now; try again in a few seconds.", requestId: 'r-1' }),
    };
    const verified = { status: 200, body: JSON.stringify({ ok: true, checked: 3, lastSeq: 3, lastHash: 'a'.repeat(64) }) };

    it.each([1, 2, 4])('a read answered %i times with 503 is asked again until it succeeds', async (n) => {
      replies = Array.from({ length: n }, () => unavailable);
      reply = verified;
      await expect(new GatewayClient(url, 't').auditVerify()).resolves.toMatchObject({ ok: true });
      expect(requests).toHaveLength(n + 1);
    });

    it('a write is not sent twice: its 503 is reported at once', async () => {
      reply = unavailable;
      const e = await failure(new GatewayClient(url, 't').publishPolicy('p1', 'version: 1', ''));
      expect(e.message).toBe("The gateway's database is not reachable right now; try again in a few seconds. (request r-1)");
      expect(requests).toHaveLength(1);
    });

    it('another 503 is not retried', async () => {
      reply = { status: 503, body: JSON.stringify({ code: 'internal', message: 'Shutting down.' }) };
      await failure(new GatewayClient(url, 't').auditVerify());
      expect(requests).toHaveLength(1);
    });
  });
});
