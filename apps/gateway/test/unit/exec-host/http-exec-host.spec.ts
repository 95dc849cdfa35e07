import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { statusFor } from '../../../src/common/error.filter';
import { ErrorCode } from '../../../src/common/errors';
import { ExecHostCallError, toAppError } from '../../../src/exec-host/exec-host.port';
import { HttpExecHost } from '../../../src/exec-host/http-exec-host';

/** A real HTTP server that answers an exec with part of a stream and then does something to it. */
async function withServer(respond: (res: http.ServerResponse) => void, fn: (url: string) => Promise<void>): Promise<void> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => respond(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const line = (o: unknown) => `${JSON.stringify(o)}\n`;
const stdout = (data: string) => line({ type: 'stdout', data });

// Every way the stream can break after output was shown: cut at a line end, in a line, in a UTF-8
// character, after several chunks; by a destroyed socket, or by a garbled chunk.
const cuts: [string, string[]][] = [
  ['after one full line', [stdout('hello\n')]],
  ['in the middle of a line', [stdout('hello\n'), '{"type":"stdo']],
  ['in the middle of a UTF-8 character', [stdout('né'), Buffer.from(stdout('é')).subarray(0, 22).toString('latin1')]],
  ['after many chunks', Array.from({ length: 50 }, (_, i) => stdout(`line ${i}\n`))],
];

describe('HttpExecHost.exec when the command stream breaks', () => {
  it.each(cuts)('a socket destroyed %s is sandbox_lost, with the output already shown delivered', async (_name, parts) => {
    await withServer(
      (res) => {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        for (const p of parts) res.write(p.includes('\u00c3') ? Buffer.from(p, 'latin1') : p);
        setTimeout(() => res.socket?.destroy(), 20);
      },
      async (url) => {
        const host = new HttpExecHost({ url, token: 't' });
        const seen: string[] = [];
        const err = await host.exec('sbx-1', { command: 'echo hello' }, (c) => seen.push(c.data)).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ExecHostCallError);
        expect((err as ExecHostCallError).code).toBe('sandbox_lost');
        expect((err as ExecHostCallError).message).toMatch(/^The connection to the exec-host broke while the command ran .*: the sandbox is lost\.$/);
        expect(seen.length).toBeGreaterThanOrEqual(1);
      },
    );
  });

  it('a stream that ends cleanly without an exit status is sandbox_lost too', async () => {
    await withServer(
      (res) => {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.end(stdout('hello\n'));
      },
      async (url) => {
        const err = await new HttpExecHost({ url, token: 't' }).exec('sbx-1', { command: 'echo' }, () => undefined).catch((e: unknown) => e);
        expect({ code: (err as ExecHostCallError).code }).toEqual({ code: 'sandbox_lost' });
      },
    );
  });

  it('a garbled chunk is sandbox_lost, not a crash of the session', async () => {
    await withServer(
      (res) => {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.end(stdout('hello\n') + 'not json\n');
      },
      async (url) => {
        const err = await new HttpExecHost({ url, token: 't' }).exec('sbx-1', { command: 'echo' }, () => undefined).catch((e: unknown) => e);
        expect({ code: (err as ExecHostCallError).code }).toEqual({ code: 'sandbox_lost' });
      },
    );
  });

  it('a whole stream with its exit status is the command result', async () => {
    await withServer(
      (res) => {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.end(stdout('hello\n') + line({ type: 'exit', exitCode: 3, durationMs: 5, timedOut: false, truncated: false, class: null, classes: [] }));
      },
      async (url) => {
        const exit = await new HttpExecHost({ url, token: 't' }).exec('sbx-1', { command: 'echo' }, () => undefined);
        expect(exit).toMatchObject({ type: 'exit', exitCode: 3 });
      },
    );
  });
});

describe('HttpExecHost.exec when the connection fails', () => {
  it('a connection dropped after the command was sent is sandbox_lost', async () => {
    await withServer(
      (res) => res.socket?.destroy(),
      async (url) => {
        const err = await new HttpExecHost({ url, token: 't' }).exec('sbx-1', { command: 'echo' }, () => undefined).catch((e: unknown) => e);
        expect({ code: (err as ExecHostCallError).code }).toEqual({ code: 'sandbox_lost' });
      },
    );
  });

  it('a refused connection (nothing sent) is engine_unavailable', async () => {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await new Promise((resolve) => server.close(resolve));
    const err = await new HttpExecHost({ url, token: 't' }).exec('sbx-1', { command: 'echo' }, () => undefined).catch((e: unknown) => e);
    expect({ code: (err as ExecHostCallError).code, neverReached: (err as ExecHostCallError).neverReached }).toEqual({ code: 'engine_unavailable', neverReached: true });
  });
});

describe('HttpExecHost bounds', () => {
  const timeoutsMs = { health: 1_000, destroy: 1_000, files: 1_000, create: 1_000, patch: 1_000 };

  it('a control call that gets no answer in time fails with the wait in its sentence; the exec stream has no bound', async () => {
    await withServer(
      (res) => {
        // Answers every call after 1.5 s: too late for a control call, in time for a command's stream.
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          res.end(`${line({ type: 'exit', exitCode: 0, durationMs: 1500, truncated: false, timedOut: false, class: null, classes: [] })}`);
        }, 1_500);
      },
      async (url) => {
        const host = new HttpExecHost({ url, token: 't', timeoutsMs });
        const read = await host.read('sbx-1', { path: 'a' }).catch((e: unknown) => e);
        expect({ code: (read as ExecHostCallError).code, answered: (read as ExecHostCallError).answered, message: (read as ExecHostCallError).message }).toEqual({
          code: 'engine_unavailable',
          answered: false,
          message: `The exec-host at ${url} did not answer within 1 s.`,
        });
        await expect(host.health()).resolves.toEqual({ ok: false, message: `The exec-host at ${url} did not answer within 1 s.` });
        await expect(host.exec('sbx-1', { command: 'sleep 1.5' }, () => undefined)).resolves.toMatchObject({ type: 'exit', exitCode: 0 });
      },
    );
  });
});

describe('toAppError, the one mapping of an exec-host failure', () => {
  it('says a refusal with its HTTP status, and keeps the sentence of a call that got no answer', () => {
    const refused = toAppError(new ExecHostCallError('internal', 'The exec-host failed to handle this request.', 500), 'destroy sandbox sbx-1');
    expect({ code: refused.code, message: refused.message }).toEqual({ code: ErrorCode.ExecHostUnavailable, message: 'The exec-host refused to destroy sandbox sbx-1 (HTTP 500).' });
    const unanswered = toAppError(new ExecHostCallError('engine_unavailable', 'The exec-host at http://x could not be reached.', 503, { answered: false }), 'destroy sandbox sbx-1');
    expect(unanswered.message).toBe('The exec-host at http://x could not be reached.');
    const unreadable = toAppError(
      new ExecHostCallError('internal', 'The exec-host answered the destruction of sandbox sbx-1 with a body the gateway does not understand.', 200),
      'destroy sandbox sbx-1',
    );
    expect(unreadable.message).toBe('The exec-host answered the destruction of sandbox sbx-1 with a body the gateway does not understand.');
  });
});

describe('toAppError on refusals about a project environment', () => {
  it.each([
    ['environment_not_ready', 'The environment is being prepared for these inputs; sessions are refused until it is ready.', 409, ErrorCode.EnvironmentNotReady, 409],
    ['environment_invalid', 'The devcontainer names the image corp/builder:1, which is not on this exec-host.', 422, ErrorCode.EnvironmentInvalid, 422],
    ['job_not_found', 'There is no environment preparation job-9 on this exec-host.', 404, ErrorCode.NotFound, 404],
  ] as const)("%s keeps the exec-host's sentence and answers its own status", (code, sentence, status, expected, http) => {
    const error = toAppError(new ExecHostCallError(code, sentence, status), 'start the sandbox');
    expect({ code: error.code, message: error.message, status: statusFor(error.code) }).toEqual({ code: expected, message: sentence, status: http });
  });
});

describe('HttpExecHost, the environment calls', () => {
  interface Seen {
    method: string;
    url: string;
    authorization: string | undefined;
    body: unknown;
  }
  async function withRecordingServer(answer: (seen: Seen) => { status: number; body: unknown; delayMs?: number }, fn: (url: string, seen: Seen[]) => Promise<void>): Promise<void> {
    const seen: Seen[] = [];
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const s = { method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, body: text ? JSON.parse(text) : undefined };
        seen.push(s);
        const a = answer(s);
        setTimeout(() => {
          res.writeHead(a.status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(a.body));
        }, a.delayMs ?? 0);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  const request = { projectId: 'p1', repository: { source: '/srv/git/p1.git', ref: 'main' }, mirrors: ['https://npm.mirror.example/'], setupTimeoutSeconds: 60 };
  const status = {
    state: 'preparing',
    ref: 'main',
    commit: 'a'.repeat(40),
    key: 'sha256:k',
    devcontainer: { path: '.devcontainer/devcontainer.json', image: 'node:22', setupCommands: ['npm ci'], warnings: [] },
    job: {
      jobId: 'job-1',
      key: 'sha256:k',
      state: 'preparing',
      phase: 'setup',
      progress: { done: 3, total: 5, label: 'running postCreateCommand' },
      startedAt: '2026-12-04T10:00:00.000Z',
      finishedAt: null,
      message: null,
      warnings: [],
    },
    message: 'The environment is being prepared.',
  };

  it('sends each call to its route with the token and parses the answer with the contract', async () => {
    await withRecordingServer(
      (s) =>
        s.url.startsWith('/v1/environments/jobs/')
          ? { status: 200, body: { jobId: 'job 1', text: 'hello\n', offset: 6, nextOffset: 12, complete: false } }
          : { status: s.url.endsWith('prepare') ? 202 : 200, body: status },
      async (url, seen) => {
        const host = new HttpExecHost({ url, token: 't0k' });
        await expect(host.environmentStatus(request)).resolves.toEqual(status);
        await expect(host.prepareEnvironment({ ...request, force: true })).resolves.toEqual(status);
        await expect(host.environmentLog('job 1', 6)).resolves.toEqual({ jobId: 'job 1', text: 'hello\n', offset: 6, nextOffset: 12, complete: false });
        expect(seen.map((s) => [s.method, s.url, s.authorization, s.body])).toEqual([
          ['POST', '/v1/environments/status', 'Bearer t0k', request],
          ['POST', '/v1/environments/prepare', 'Bearer t0k', { ...request, force: true }],
          ['GET', '/v1/environments/jobs/job%201/log?offset=6', 'Bearer t0k', undefined],
        ]);
      },
    );
  });

  it("throws the exec-host's code and sentence on a refusal, and a bound on a call that does not answer", async () => {
    await withRecordingServer(
      (s) =>
        s.url.endsWith('status')
          ? { status: 409, body: { code: 'environment_not_ready', message: 'The environment failed to prepare.' } }
          : s.url.endsWith('prepare')
            ? { status: 202, body: status, delayMs: 1_500 }
            : { status: 404, body: { code: 'job_not_found', message: 'There is no environment preparation job-2.' } },
      async (url) => {
        const host = new HttpExecHost({ url, token: 't', timeoutsMs: { environment: 1_000 } });
        const refused = (await host.environmentStatus(request).catch((e: unknown) => e)) as ExecHostCallError;
        expect({ code: refused.code, status: refused.status, message: refused.message }).toEqual({ code: 'environment_not_ready', status: 409, message: 'The environment failed to prepare.' });
        const missing = (await host.environmentLog('job-2', 0).catch((e: unknown) => e)) as ExecHostCallError;
        expect({ code: missing.code, status: missing.status }).toEqual({ code: 'job_not_found', status: 404 });
        const late = (await host.prepareEnvironment(request).catch((e: unknown) => e)) as ExecHostCallError;
        expect({ code: late.code, message: late.message }).toEqual({ code: 'engine_unavailable', message: `The exec-host at ${url} did not answer within 1 s.` });
      },
    );
  });
});
