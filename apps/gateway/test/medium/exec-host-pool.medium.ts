import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ErrorBody, ExecHostHeartbeatResponse, ExecHostView, type ExecHostHeartbeat } from '@lemniscate/contracts';
import { z } from 'zod';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { ExecHostPool } from '../../src/exec-host/exec-host-pool';
import { withTestDatabases } from '../support/db';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(180_000);

/**
 * The exec-host pool (docs/decisions/0010-exec-host-pool.md) through two real gateway replicas on
 * one database, with exec-host doubles as its members: registrations refused for every wrong token,
 * transport and address (each audited), sessions placed by load and never over capacity, every call
 * of a session sent to the host holding its sandbox from either replica, drain and undrain by role,
 * a silent host declared lost once and its sessions ended as sandbox_lost while the others go on.
 */
const TOKEN = 'pool-test-token-0123456789';
const LOST_SECONDS = 3;

withTestDatabases((db) => {
  let gw1: Gateway;
  let gw2: Gateway;
  let fixed: Gateway;
  const hosts = {} as Record<'a' | 'b' | 'c', ExecHostDouble>;
  const alive = new Set<'a' | 'b' | 'c'>(['a', 'b', 'c']);
  let beating: NodeJS.Timeout | undefined;
  let admin: string;
  let officer: string;
  let developer: string;
  let project: string;
  let scriptDir: string;

  const beat = (id: string, address: string, over: Partial<ExecHostHeartbeat> = {}): ExecHostHeartbeat => ({
    id,
    address,
    runtimes: ['runc'],
    images: ['lemniscate/sandbox:current'],
    environments: [],
    capacity: 2,
    load: 0,
    version: '0.0.0-test',
    ...over,
  });
  const send = (gw: Gateway, body: unknown, authorization: string | null = `Bearer ${TOKEN}`) => {
    const req = gw.http().post('/api/v1/exec-hosts/heartbeat');
    if (authorization !== null) req.set('authorization', authorization);
    return req.send(body as object);
  };
  const heartbeatAll = async () => {
    for (const id of alive) {
      // As an exec-host does: the projects whose environment is ready on it.
      const environments = [...new Set([...hosts[id].jobs.values()].filter((j) => j.state === 'ready').map((j) => j.projectId))];
      const res = await send(id === 'b' ? gw2 : gw1, beat(id, hosts[id].url, { environments }));
      if (res.status !== 200) throw new Error(`heartbeat of ${id}: ${res.status} ${JSON.stringify(res.body)}`);
    }
  };

  const startSession = async (gw: Gateway = gw1): Promise<string> => {
    const res = await gw.http().post('/api/v1/sessions').set(bearer(developer)).send({ projectId: project, instruction: 'wait for my question to be answered' });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  const placement = (id: string) => gw1.app.get(SessionsRepository).findById(id);
  async function until<T>(what: string, probe: () => Promise<T | undefined | null | false>, ms = 20_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const value = await probe();
      if (value) return value;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  /** Waits until a session's sandbox exists (it then waits for its question). */
  const placed = (id: string) => until(`session ${id} placed`, async () => ((await placement(id))?.sandboxId ? placement(id) : null));
  const ended = (id: string) => until(`session ${id} ended`, async () => ((await placement(id))?.status !== 'running' ? placement(id) : null));
  const list = async (gw: Gateway) => z.array(ExecHostView).parse((await gw.http().get('/api/v1/admin/exec-hosts').set(bearer(admin))).body);

  beforeAll(async () => {
    scriptDir = mkdtempSync(path.join(os.tmpdir(), 'lemni-pool-'));
    writeFileSync(path.join(scriptDir, 'models.yaml'), 'scripted:\n  enabled: true\n');
    writeFileSync(path.join(scriptDir, 'wait.json'), JSON.stringify({ turns: [{ tool_calls: [{ name: 'Question', arguments: { question: 'Shall I go on?' } }] }, { text: 'Done.' }] }));
    for (const id of ['a', 'b', 'c'] as const) hosts[id] = await startExecHostDouble(TOKEN);
    const env = {
      LEMNISCATE_EXEC_HOST_URL: '',
      LEMNISCATE_EXEC_HOST_POOL: 'true',
      LEMNISCATE_EXEC_HOST_TOKEN: TOKEN,
      LEMNISCATE_EXEC_HOST_LOST_SECONDS: String(LOST_SECONDS),
      LEMNISCATE_MODELS_CONFIG: path.join(scriptDir, 'models.yaml'),
      LEMNISCATE_DEFAULT_MODEL: `scripted:${path.join(scriptDir, 'wait.json')}`,
    };
    gw1 = await startGateway(db(), env, undefined, { sessionLoops: 'run' });
    gw2 = await startGateway(db(), env, undefined, { sessionLoops: 'run' });
    fixed = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: hosts.a.url, LEMNISCATE_EXEC_HOST_TOKEN: TOKEN });
    admin = (await tokenFor(gw1, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw1, admin, 'pool');
    developer = (await createUser(gw1, admin, 'pool-dev@example.test', 'developer', [project])).token;
    officer = (await createUser(gw1, admin, 'pool-officer@example.test', 'security_officer', [project])).token;
    await heartbeatAll();
    beating = setInterval(() => void heartbeatAll().catch(() => undefined), 500);
  });
  afterAll(async () => {
    if (beating) clearInterval(beating);
    await gw1?.close();
    await gw2?.close();
    await fixed?.close();
    for (const h of Object.values(hosts)) await h?.close();
    rmSync(scriptDir, { recursive: true, force: true });
  });

  it('refuses every registration with a wrong or missing token, and audits it once a minute per host and source', async () => {
    const cases: [string, string | null][] = [
      ['no header', null],
      ['empty bearer', 'Bearer '],
      ['wrong token', 'Bearer pool-test-token-0123456788'],
      ['a prefix of the token', `Bearer ${TOKEN.slice(0, -1)}`],
      ['the token and more', `Bearer ${TOKEN}x`],
      ['another scheme', `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`],
      ['lower-case scheme', `bearer ${TOKEN}`],
    ];
    for (const [i, [label, authorization]] of cases.entries()) {
      for (const gw of [gw1, gw2]) {
        const res = await send(gw, beat(`intruder-${i}`, hosts.a.url), authorization);
        expect([label, res.status]).toEqual([label, 401]);
        expect(ErrorBody.parse(res.body).message).toMatch(/did not present the token this gateway was given/);
      }
    }
    // Twice per case (both replicas) and again: one audit entry per host id and source per replica.
    await send(gw1, beat('intruder-0', hosts.a.url), null);
    const refused = (await auditKinds(gw1, ['exec_host.registration_refused'])).filter((e) => (e.payload as { hostId: string }).hostId.startsWith('intruder-'));
    for (const [i] of cases.entries()) {
      const mine = refused.filter((e) => (e.payload as { hostId: string }).hostId === `intruder-${i}`);
      expect(mine.length).toBeGreaterThanOrEqual(1);
      expect(mine.length).toBeLessThanOrEqual(2);
    }
    expect((await list(gw1)).map((h) => h.id)).toEqual(['a', 'b', 'c']);
  });

  it('refuses addresses the pool cannot trust or reach, with a sentence, audited', async () => {
    const closed = await closedPort();
    const cases: [string, string, RegExp][] = [
      ['a network address without a CA', 'http://10.1.2.3:7071', /accepts only exec-hosts on its own machine/],
      ['a public name without a CA', 'http://exec-host.example.com:7071', /accepts only exec-hosts on its own machine/],
      ['https without a CA to check it', 'https://127.0.0.1:7071', /accepts only exec-hosts on its own machine/],
      ['a loopback port nobody listens on', `http://127.0.0.1:${closed}`, /could not verify exec-host .* at http:\/\/127\.0\.0\.1/],
      ['a socket that does not exist', '/nonexistent/exec-host.sock'.replace(/^/, 'unix:'), /could not verify exec-host/],
    ];
    for (const [i, [label, address, sentence]] of cases.entries()) {
      const res = await send(gw1, beat(`untrusted-${i}`, address));
      expect([label, res.status]).toEqual([label, 403]);
      expect(ErrorBody.parse(res.body).message).toMatch(sentence);
    }
    // A host answering with another token is not verified either: the gateway's calls would be refused.
    const other = await startExecHostDouble('another-token-0123456789');
    try {
      const res = await send(gw1, beat('untrusted-token', other.url));
      expect(res.status).toBe(403);
      expect(ErrorBody.parse(res.body).message).toMatch(/refused the gateway token/);
    } finally {
      await other.close();
    }
    const audited = (await auditKinds(gw1, ['exec_host.registration_refused'])).map((e) => (e.payload as { hostId: string }).hostId);
    for (const [i] of cases.entries()) expect(audited).toContain(`untrusted-${i}`);
    expect(audited).toContain('untrusted-token');
    expect((await list(gw1)).map((h) => h.id)).toEqual(['a', 'b', 'c']);
  });

  it('refuses malformed heartbeats with the field named', async () => {
    const bad: [string, unknown][] = [
      ['an upper-case id', beat('Host-A', hosts.a.url)],
      ['an id ending with "-"', beat('a-', hosts.a.url)],
      ['no runtime', beat('x', hosts.a.url, { runtimes: [] })],
      ['an unknown runtime', { ...beat('x', hosts.a.url), runtimes: ['kata'] }],
      ['no capacity', beat('x', hosts.a.url, { capacity: 0 })],
      ['a negative load', beat('x', hosts.a.url, { load: -1 })],
      ['an address with a path', beat('x', `${hosts.a.url}/v1`)],
      ['a relative socket', beat('x', 'unix:exec.sock')],
      ['an unknown field', { ...beat('x', hosts.a.url), role: 'admin' }],
      ['not JSON object', ['x']],
    ];
    for (const [label, body] of bad) {
      const res = await send(gw1, body);
      expect([label, res.status]).toEqual([label, 400]);
      expect(ErrorBody.parse(res.body).message).toMatch(/^The request is invalid: /);
    }
  });

  it('a gateway with one fixed exec-host takes no registration, lists that host, and cannot drain it', async () => {
    const res = await send(fixed, beat('a', hosts.a.url));
    expect(res.status).toBe(409);
    expect(ErrorBody.parse(res.body).message).toMatch(/one fixed exec-host \(LEMNISCATE_EXEC_HOST_URL\) and takes no registrations/);
    const views = z.array(ExecHostView).parse((await fixed.http().get('/api/v1/admin/exec-hosts').set(bearer(admin))).body);
    expect(views).toEqual([expect.objectContaining({ id: 'fixed', kind: 'fixed', address: hosts.a.url, state: 'active' })]);
    const drain = await fixed.http().post('/api/v1/admin/exec-hosts/fixed/drain').set(bearer(admin)).send({});
    expect(drain.status).toBe(409);
    expect(ErrorBody.parse(drain.body).message).toMatch(/cannot be drained/);
  });

  it('who may see and drain exec-hosts: every route × role', async () => {
    const expected: Record<string, Record<string, number>> = {
      list: { admin: 200, officer: 200, developer: 403, none: 401 },
      drain: { admin: 200, officer: 403, developer: 403, none: 401 },
      undrain: { admin: 200, officer: 403, developer: 403, none: 401 },
    };
    const tokens: Record<string, string | null> = { admin, officer, developer, none: null };
    for (const [route, byRole] of Object.entries(expected)) {
      for (const [role, status] of Object.entries(byRole)) {
        for (const gw of [gw1, gw2]) {
          const req = route === 'list' ? gw.http().get('/api/v1/admin/exec-hosts') : gw.http().post(`/api/v1/admin/exec-hosts/c/${route}`);
          if (tokens[role]) req.set(bearer(tokens[role] as string));
          const res = await (route === 'list' ? req : req.send({}));
          expect([route, role, res.status]).toEqual([route, role, status]);
        }
      }
    }
    // The admin's drain and undrain above leave c active.
    expect((await list(gw1)).find((h) => h.id === 'c')?.state).toBe('active');
    const unknown = await gw1.http().post('/api/v1/admin/exec-hosts/nowhere/drain').set(bearer(admin)).send({});
    expect(unknown.status).toBe(404);
    expect(ErrorBody.parse(unknown.body).message).toMatch(/No exec-host "nowhere" has registered/);
    const badId = await gw1.http().post('/api/v1/admin/exec-hosts/NOT_AN_ID/drain').set(bearer(admin)).send({});
    expect(badId.status).toBe(400);
    const badReason = await gw1
      .http()
      .post('/api/v1/admin/exec-hosts/c/drain')
      .set(bearer(admin))
      .send({ reason: 'x'.repeat(501) });
    expect(badReason.status).toBe(400);
  });

  it("a project's environment is prepared on one host, read there from either replica, and its sessions are placed where it is ready", async () => {
    const envProject = await createProject(gw1, admin, 'pool-env');
    const developer = (await createUser(gw1, admin, 'pool-env-dev@example.test', 'developer', [envProject])).token;
    for (const h of Object.values(hosts)) h.setEnvironment(envProject, { outcome: 'manual' });
    const prepared = await gw1.http().post(`/api/v1/projects/${envProject}/environment/prepare`).set(bearer(developer)).send({});
    expect(prepared.status).toBe(202);
    const jobId = prepared.body.job.jobId as string;
    const home = (Object.keys(hosts) as ('a' | 'b' | 'c')[]).filter((id) => hosts[id].jobs.size > 0);
    expect(home).toHaveLength(1);
    const where = home[0] as 'a' | 'b' | 'c';
    // The other replica reads the same preparation, on the same host, and its log.
    const status = await gw2.http().get(`/api/v1/projects/${envProject}/environment`).set(bearer(developer));
    expect(status.body).toMatchObject({ state: 'preparing', job: { jobId } });
    const log = await gw2.http().get(`/api/v1/projects/${envProject}/environment/jobs/${jobId}/log?offset=0`).set(bearer(developer));
    expect(log.status).toBe(200);
    for (const other of (['a', 'b', 'c'] as const).filter((h) => h !== where)) expect(hosts[other].jobs.size).toBe(0);
    hosts[where].finishJob(jobId, 'ready');
    // Its next heartbeat says so; sessions of the project go there, whatever the load elsewhere.
    await until('the environment reported ready', async () => (await list(gw1)).find((h) => h.id === where)?.environments.includes(envProject));
    const ids: string[] = [];
    for (const gw of [gw1, gw2]) {
      const res = await gw.http().post('/api/v1/sessions').set(bearer(developer)).send({ projectId: envProject, instruction: 'in the environment' });
      expect(res.status).toBe(201);
      ids.push(res.body.id as string);
    }
    for (const id of ids) {
      const row = await placed(id);
      expect(row?.execHost).toBe(where);
      expect(hosts[where].creates.find((c) => c.sessionId === id)?.environment).toMatchObject({ projectId: envProject });
      expect((await gw1.http().post(`/api/v1/sessions/${id}/stop`).set(bearer(developer)).send({})).status).toBe(200);
      await ended(id);
    }
  });

  it('places sessions on the least loaded host, never over capacity, and refuses with a sentence when every host is full', async () => {
    const started: string[] = [];
    for (let i = 0; i < 6; i++) started.push(await startSession(i % 2 ? gw2 : gw1));
    const rows = await Promise.all(started.map(placed));
    const perHost = count(rows.map((r) => r?.execHost ?? 'none'));
    expect(perHost).toEqual({ a: 2, b: 2, c: 2 });
    for (const r of rows) expect(hosts[r?.execHost as 'a'].creates.map((c) => c.sessionId)).toContain(r?.id);
    const views = await list(gw2);
    expect(views.map((v) => [v.id, v.liveSessions])).toEqual([
      ['a', 2],
      ['b', 2],
      ['c', 2],
    ]);

    const over = await startSession();
    const end = await ended(over);
    expect(end).toMatchObject({ status: 'failed', execHost: null, sandboxId: null });
    const audit = await until(`session ${over} ended in the audit log`, async () => (await auditKinds(gw1, ['session.ended'])).find((e) => e.sessionId === over));
    expect((audit.payload as { message: string }).message).toMatch(
      /No exec-host can take a new runc sandbox now: a is full \(2 of 2 sessions\); b is full \(2 of 2 sessions\); c is full \(2 of 2 sessions\)/,
    );

    // Every call of a session goes to its host, from the replica that did not start it too.
    const target = rows[0]!;
    const stop = await gw2.http().post(`/api/v1/sessions/${target.id}/stop`).set(bearer(developer)).send({});
    expect(stop.status).toBe(200);
    await ended(target.id);
    const host = target.execHost as 'a' | 'b' | 'c';
    expect(hosts[host].destroyed).toContain(target.sandboxId);
    for (const other of (['a', 'b', 'c'] as const).filter((h) => h !== host)) expect(hosts[other].destroyed).not.toContain(target.sandboxId);
  });

  it('a drained host takes no new session while its own go on; undrained, it takes them again', async () => {
    const drained = await gw1.http().post('/api/v1/admin/exec-hosts/a/drain').set(bearer(admin)).send({ reason: 'kernel upgrade' });
    expect(drained.status).toBe(200);
    expect(ExecHostView.parse(drained.body)).toMatchObject({ id: 'a', state: 'draining', drainReason: 'kernel upgrade', drainedBy: expect.stringMatching(/^user:/) });
    // Its heartbeats keep it drained.
    await new Promise((r) => setTimeout(r, 700));
    expect((await list(gw2)).find((h) => h.id === 'a')?.state).toBe('draining');
    // One slot is free (on the host of the session stopped above, or elsewhere): never on a.
    const live = await list(gw1);
    const free = live.filter((h) => h.id !== 'a' && h.liveSessions < h.capacity).map((h) => h.id);
    const next = await startSession(gw2);
    const row = free.length ? await placed(next) : await ended(next);
    expect(row?.execHost).not.toBe('a');
    const kinds = (await auditKinds(gw1, ['exec_host.drained'])).map((e) => e.payload);
    expect(kinds).toContainEqual(expect.objectContaining({ hostId: 'a', reason: 'kernel upgrade' }));
    const undrained = await gw2.http().post('/api/v1/admin/exec-hosts/a/undrain').set(bearer(admin)).send();
    expect(ExecHostView.parse(undrained.body)).toMatchObject({ state: 'active', drainedBy: null, drainReason: null });
  });

  it('a host that stops heartbeating is lost once: its sessions end as sandbox_lost, the others go on, new sessions avoid it, and it returns', async () => {
    const running = await gw1.app.get(SessionsRepository).list({ projectId: project, status: 'running' });
    const onC = running.filter((s) => s.execHost === 'c').map((s) => s.id);
    const elsewhere = running.filter((s) => s.execHost && s.execHost !== 'c').map((s) => s.id);
    expect(onC.length).toBeGreaterThan(0);
    alive.delete('c');
    for (const id of onC) {
      const row = await ended(id);
      expect(row).toMatchObject({ status: 'failed', stopReason: 'crash' });
      // The ending's audit entry follows the row's end.
      const audit = await until(`session ${id} ended in the audit log`, async () => (await auditKinds(gw1, ['session.ended'])).find((e) => e.sessionId === id));
      expect((audit.payload as { message: string }).message).toMatch(/exec-host holding this session's sandbox stopped sending heartbeats and was declared lost/);
    }
    for (const id of elsewhere) expect((await placement(id))?.status).toBe('running');
    const lost = (await auditKinds(gw1, ['exec_host.lost'])).filter((e) => (e.payload as { hostId: string }).hostId === 'c');
    expect(lost).toHaveLength(1);
    expect((lost[0]?.payload as { sessions: string[] }).sessions.sort()).toEqual([...onC].sort());
    expect((await list(gw2)).find((h) => h.id === 'c')?.state).toBe('lost');
    // Calls for its sandboxes fail at once with the sentence, from either replica.
    const pool = gw2.app.get(ExecHostPool);
    await pool.refresh();
    const sandbox = (await placement(onC[0] as string))?.sandboxId as string;
    await expect(pool.changes(sandbox)).rejects.toMatchObject({ code: 'sandbox_lost', message: expect.stringMatching(/Exec-host c stopped sending heartbeats/) });

    const next = await startSession();
    const row = await until('placed or refused', async () => {
      const r = await placement(next);
      return r?.sandboxId || r?.status !== 'running' ? r : null;
    });
    expect(row?.execHost).not.toBe('c');

    alive.add('c');
    await until('c back', async () => (await list(gw1)).find((h) => h.id === 'c')?.state === 'active');
    // The heartbeat that brought it back writes its row, then its audit entry: wait for the entry,
    // then let a few more heartbeats pass — none of them may say it returned again.
    const returnedOf = async () => (await auditKinds(gw1, ['exec_host.returned'])).filter((e) => (e.payload as { hostId: string }).hostId === 'c');
    await until('c returned in the audit log', async () => (await returnedOf()).length > 0);
    await new Promise((r) => setTimeout(r, 2500));
    expect(await returnedOf()).toHaveLength(1);
  });

  it('a replica that last saw a host lost reads it again before refusing a call to it: a sandbox placed there after its return is used', async () => {
    // A session placed on c since its return (it is the least loaded host).
    let onC: string | undefined;
    for (let i = 0; i < 4 && !onC; i++) {
      const id = await startSession();
      const row = await placed(id);
      if (row?.execHost === 'c') onC = row.sandboxId ?? undefined;
    }
    expect(onC).toBeDefined();
    // gw2's view as it stands between c's return and its next read of the pool: c lost, its calls cut.
    // Its periodic read is held back meanwhile, so only the call itself can find c back.
    const pool = gw2.app.get(ExecHostPool);
    const inside = pool as unknown as { timer?: NodeJS.Timeout; hosts: Map<string, { state: string }>; lossSignals: Map<string, AbortController> };
    clearInterval(inside.timer);
    try {
      const current = inside.hosts.get('c')!;
      inside.hosts.set('c', { ...current, state: 'lost' });
      const cut = new AbortController();
      cut.abort();
      inside.lossSignals.set('c', cut);
      await expect(pool.patch(onC!)).resolves.toMatchObject({ patch: '' });
      expect(inside.hosts.get('c')?.state).toBe('active');
    } finally {
      pool.onApplicationBootstrap();
    }
  });

  it('the heartbeat answer says the host’s state and the pool’s timing', async () => {
    const res = await send(gw1, beat('a', hosts.a.url));
    expect(ExecHostHeartbeatResponse.parse(res.body)).toEqual({ id: 'a', state: 'active', heartbeatSeconds: 1, lostAfterSeconds: LOST_SECONDS });
  });
});

function count(values: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

/** A loopback port that was free a moment ago (nobody listens on it). */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
