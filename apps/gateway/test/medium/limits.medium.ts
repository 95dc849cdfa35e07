import { Limits, tooLargeMessage, type LimitName } from '@lemniscate/contracts';
import { request as httpRequest } from 'node:http';
import { lingerBytes } from '../../src/setup';
import { withTestDatabases } from '../support/db';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

/**
 * One set of size limits (Limits), attacked through the gateway's API over a real database: for every
 * limit a request body can carry, a value exactly at the limit is accepted and one byte over is refused
 * with the limit's sentence, before anything is stored or anyone is asked.
 */
jest.setTimeout(180_000);

withTestDatabases((db) => {
  let gw: Gateway;
  let execHost: ExecHostDouble;
  let admin: string;
  let project: string;
  let dev: string;

  beforeAll(async () => {
    execHost = await startExecHostDouble();
    gw = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: execHost.url, LEMNISCATE_EXEC_HOST_TOKEN: execHost.token });
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'limits');
    dev = (await createUser(gw, admin, 'dev@example.test', 'developer', [project])).token;
    parent = (await gw.http().post('/api/v1/sessions').set(bearer(dev)).send({ projectId: project, instruction: 'parent' })).body.id as string;
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
  });

  const sessions = async () => (await gw.http().get('/api/v1/sessions?limit=500').set(bearer(dev))).body.length as number;
  const versions = async () => (await gw.http().get(`/api/v1/projects/${project}/policy/versions`).set(bearer(admin))).body.length as number;
  const approvals = async () => (await gw.http().get('/api/v1/approvals?limit=500').set(bearer(dev))).body.length as number;
  /** A YAML policy document of exactly `bytes` bytes: a valid document padded with a comment. */
  const policyText = (bytes: number) => {
    const head = 'version: 1\n# ';
    return head + 'p'.repeat(bytes - head.length);
  };
  let parent = '';

  interface Cell {
    source: string;
    limit: LimitName;
    send: (bytes: number) => Promise<{ status: number; body: { code?: string; message?: string } }>;
    stored: () => Promise<number>;
    /** What an accepted value answers. */
    accepted: number;
  }
  const cells: Cell[] = [
    {
      source: 'POST /sessions instruction',
      limit: 'instructionBytes',
      send: (n) =>
        gw
          .http()
          .post('/api/v1/sessions')
          .set(bearer(dev))
          .send({ projectId: project, instruction: 'i'.repeat(n) }),
      stored: sessions,
      accepted: 201,
    },
    {
      source: 'POST /sessions startingPatch',
      limit: 'startingPatchBytes',
      send: (n) =>
        gw
          .http()
          .post('/api/v1/sessions')
          .set(bearer(dev))
          .send({ projectId: project, instruction: 'apply my work', startingPatch: '+'.repeat(n) }),
      stored: sessions,
      accepted: 201,
    },
    {
      source: 'POST /sessions/:id/subagents instruction',
      limit: 'instructionBytes',
      send: (n) =>
        gw
          .http()
          .post(`/api/v1/sessions/${parent}/subagents`)
          .set(bearer(dev))
          .send({ agent: 'explore', instruction: 's'.repeat(n) }),
      stored: sessions,
      accepted: -1,
    },
    {
      source: 'POST /projects/:id/policy sourceText',
      limit: 'policySourceBytes',
      send: (n) =>
        gw
          .http()
          .post(`/api/v1/projects/${project}/policy`)
          .set(bearer(admin))
          .send({ sourceText: policyText(n) }),
      stored: versions,
      accepted: 201,
    },
    {
      source: 'POST /projects/:id/policy/dry-run sourceText',
      limit: 'policySourceBytes',
      send: (n) =>
        gw
          .http()
          .post(`/api/v1/projects/${project}/policy/dry-run`)
          .set(bearer(admin))
          .send({ sourceText: policyText(n) }),
      stored: versions,
      accepted: 200,
    },
  ];

  it(`covers every limit a request body can carry (${cells.length} sources × 2 sizes)`, () => {
    const carried: LimitName[] = ['instructionBytes', 'startingPatchBytes', 'policySourceBytes'];
    expect([...new Set(cells.map((c) => c.limit))].sort()).toEqual(carried.sort());
  });

  describe.each(cells)('$source ($limit)', (cell) => {
    it('one byte over the limit: 400 with the sentence, nothing stored, nobody asked', async () => {
      const [before, asked] = [await cell.stored(), await approvals()];
      const bytes = Limits[cell.limit] + 1;
      const res = await cell.send(bytes);
      expect({ status: res.status, code: res.body.code }).toEqual({ status: 400, code: 'validation_failed' });
      expect(res.body.message).toContain(tooLargeMessage(cell.limit, bytes));
      expect(res.body.message).not.toMatch(/\.\.|at .*\.ts|SELECT|INSERT/);
      expect(await cell.stored()).toBe(before);
      expect(await approvals()).toBe(asked);
    });

    it('exactly at the limit: accepted as any other value', async () => {
      const res = await cell.send(Limits[cell.limit]);
      if (cell.accepted > 0) expect({ status: res.status, body: res.status === cell.accepted ? null : res.body }).toEqual({ status: cell.accepted, body: null });
      // A subagent of a recorded session may be refused for other reasons; never for its size.
      else expect(res.body.message ?? '').not.toContain('limited to');
    });
  });

  /** A body the client announces as `length` bytes; the gateway answers from the header, before reading it. */
  function announce(path: string, length: number, token: string): Promise<{ status: number; body: { code?: string; message?: string } }> {
    const url = new URL(path, gw.baseUrl);
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json', 'content-length': String(length) } }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { code?: string; message?: string } });
        });
      });
      req.on('error', reject);
      req.write('{');
    });
  }

  it.each([
    ['a session start', '/api/v1/sessions', 'sessionRequestBodyBytes'],
    ['a session start with a trailing slash and a query', '/api/v1/sessions/?x=1', 'sessionRequestBodyBytes'],
    ['a policy publication', '/api/v1/projects/x/policy', 'requestBodyBytes'],
    ['an approval answer', '/api/v1/approvals/x/approve', 'requestBodyBytes'],
    ['a login', '/api/v1/auth/login', 'requestBodyBytes'],
  ] as const)('refuses a body one byte over its limit for %s, with the sentence, before reading it', async (_what, path, limit) => {
    const before = await sessions();
    const res = await announce(path, Limits[limit] + 1, dev);
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 400, code: 'validation_failed' });
    expect(res.body.message).toBe(tooLargeMessage(limit, Limits[limit] + 1));
    expect(await sessions()).toBe(before);
  });

  it('a client that sends the whole over-limit body reads the sentence, never a reset connection (every time)', async () => {
    // The refusal comes from the header, while the client is still writing; the gateway then reads the
    // rest of the body and throws it away, so fetch (which reads only after writing) gets its answer.
    const body = JSON.stringify({ sourceText: `version: 1\n${'#'.repeat(Limits.requestBodyBytes + 64 * 1024)}` });
    for (let i = 0; i < 8; i++) {
      const res = await fetch(new URL(`/api/v1/projects/${project}/policy`, gw.baseUrl), { method: 'POST', headers: { ...bearer(admin), 'content-type': 'application/json' }, body });
      expect({ status: res.status, message: ((await res.json()) as { message: string }).message }).toEqual({ status: 400, message: tooLargeMessage('requestBodyBytes', Buffer.byteLength(body)) });
    }
  });

  it('a body announced far beyond what is worth reading is answered and its connection closed', async () => {
    const length = lingerBytes('requestBodyBytes') + 1;
    const url = new URL('/api/v1/projects/x/policy', gw.baseUrl);
    const answer = await new Promise<{ status: number; connection: string | undefined; closed: boolean }>((resolve, reject) => {
      let status = 0;
      let connection: string | undefined;
      const req = httpRequest(url, { method: 'POST', headers: { ...bearer(dev), 'content-type': 'application/json', 'content-length': String(length) } }, (res) => {
        [status, connection] = [res.statusCode ?? 0, res.headers.connection];
        res.resume();
      });
      // The server closes the connection although the client has not finished its body.
      req.on('socket', (socket) => socket.once('close', () => resolve({ status, connection, closed: true })));
      req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' || error.code === 'EPIPE' ? undefined : reject(error)));
      req.write('{');
    });
    expect(answer).toEqual({ status: 400, connection: 'close', closed: true });
  });

  it('reads a session start up to its own limit: a body larger than every other route allows is not refused for its size', async () => {
    const res = await gw
      .http()
      .post('/api/v1/sessions')
      .set(bearer(dev))
      .send({ projectId: project, instruction: 'large', startingPatch: '\n'.repeat(Limits.requestBodyBytes) });
    expect(res.status).toBe(201);
  });
});
