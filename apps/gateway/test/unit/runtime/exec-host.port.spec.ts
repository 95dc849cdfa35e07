import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ExecHostError, HttpExecHost } from '../../../src/runtime/exec-host.port';

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
        expect(err).toBeInstanceOf(ExecHostError);
        expect((err as ExecHostError).code).toBe('sandbox_lost');
        expect((err as ExecHostError).message).toMatch(/^The connection to the exec-host broke while the command ran .*: the sandbox is lost\.$/);
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
        expect({ code: (err as ExecHostError).code }).toEqual({ code: 'sandbox_lost' });
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
        expect({ code: (err as ExecHostError).code }).toEqual({ code: 'sandbox_lost' });
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
        expect({ code: (err as ExecHostError).code }).toEqual({ code: 'sandbox_lost' });
      },
    );
  });

  it('a refused connection (nothing sent) is engine_unavailable', async () => {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await new Promise((resolve) => server.close(resolve));
    const err = await new HttpExecHost({ url, token: 't' }).exec('sbx-1', { command: 'echo' }, () => undefined).catch((e: unknown) => e);
    expect({ code: (err as ExecHostError).code, neverReached: (err as ExecHostError).neverReached }).toEqual({ code: 'engine_unavailable', neverReached: true });
  });
});
