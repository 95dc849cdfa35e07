import { Limits, tooLargeMessage, type LimitName } from '@lemniscate/contracts';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CliError } from '../../../src/errors';
import { GatewayClient, type StartSessionRequest } from '../../../src/gateway/gateway-client';

/**
 * The CLI refuses a session start over a limit before uploading anything, with the gateway's own
 * sentence. A loopback server counts what reached it: nothing, for every cell over a limit.
 */
let server: Server;
let url: string;
let received: number;

beforeEach(async () => {
  received = 0;
  server = createServer((req, res) => {
    received++;
    req.resume();
    req.on('end', () => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(() => new Promise<void>((r) => server.close(() => r())));

const base: StartSessionRequest = { projectId: '00000000-0000-4000-8000-000000000000', instruction: 'fix it' };
const cells: { source: string; limit: LimitName; request: (bytes: number) => StartSessionRequest }[] = [
  { source: 'the instruction (-p)', limit: 'instructionBytes', request: (n) => ({ ...base, instruction: 'i'.repeat(n) }) },
  { source: 'the starting patch (--include-uncommitted)', limit: 'startingPatchBytes', request: (n) => ({ ...base, startingPatch: '+'.repeat(n) }) },
  // Within each field's limit, but a JSON encoding (two bytes per newline) over the body limit.
  {
    source: 'the whole request, JSON-encoded',
    limit: 'sessionRequestBodyBytes',
    request: (n) => ({
      ...base,
      startingPatch: '\n'.repeat(Limits.startingPatchBytes),
      userAgents: [{ fileName: 'a.md', text: 'a'.repeat(n - JSON.stringify({ ...base, startingPatch: '\n'.repeat(Limits.startingPatchBytes), userAgents: [{ fileName: 'a.md', text: '' }] }).length) }],
    }),
  },
];

describe.each(cells)('lemni refuses $source over $limit before uploading', ({ limit, request }) => {
  it('one byte over: the sentence, class too_large, nothing sent', async () => {
    const client = new GatewayClient(url, 't');
    const r = request(Limits[limit] + 1);
    let error: unknown;
    await client.startSession(r).catch((e: unknown) => (error = e));
    expect(error).toBeInstanceOf(CliError);
    const message = (error as CliError).message;
    expect(message.startsWith(tooLargeMessage(limit, Limits[limit] + 1))).toBe(true);
    expect((error as CliError).errorClass).toBe('too_large');
    expect(received).toBe(0);
  });

  it('exactly at the limit: sent', async () => {
    const client = new GatewayClient(url, 't');
    await client.startSession(request(Limits[limit])).catch(() => undefined);
    expect(received).toBe(1);
  });
});
