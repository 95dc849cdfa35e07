import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EnvironmentLog, EnvironmentStatus, ErrorBody, fillPath, GatewayRoutes, type GatewayRouteName } from '@lemniscate/contracts';
import { EnvironmentsService } from '../../src/environments/environments.service';
import { EventsService } from '../../src/events/events.service';
import { SessionRuntimeService } from '../../src/runtime/runtime.service';
import { withTestDatabases, type TestDatabase } from '../support/db';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(180_000);

/**
 * Project environments (S8) through the real gateway on both databases, with the exec-host double
 * playing the exec-host's environment routes: who may read and prepare (every environment route ×
 * every kind of caller), each preparation audited once when asked and once when it ends however
 * many readers look at it at the same time and across a restart, the log kept after the exec-host
 * forgets it, and session starts: refused with a sentence (and nothing half-created) while the
 * environment is not ready, one preparation for concurrent starts, none after a failure, and a
 * sandbox created with the project's environment (its default ref, the policy's mirrors).
 */

type Caller = 'admin' | 'developer member' | 'developer non-member' | 'officer member' | 'officer non-member' | 'no token';
const CALLERS: Caller[] = ['admin', 'developer member', 'developer non-member', 'officer member', 'officer non-member', 'no token'];
const ROUTES = ['environmentStatus', 'prepareEnvironment', 'environmentLog'] as const satisfies readonly GatewayRouteName[];

/** What each caller gets, from the access rules: members read; whoever may start a session prepares. */
const EXPECTED: Record<(typeof ROUTES)[number], Record<Caller, number>> = {
  environmentStatus: { admin: 200, 'developer member': 200, 'developer non-member': 403, 'officer member': 200, 'officer non-member': 403, 'no token': 401 },
  prepareEnvironment: { admin: 202, 'developer member': 202, 'developer non-member': 403, 'officer member': 403, 'officer non-member': 403, 'no token': 401 },
  environmentLog: { admin: 200, 'developer member': 200, 'developer non-member': 403, 'officer member': 200, 'officer non-member': 403, 'no token': 401 },
};

const MIRROR = 'https://npm.mirror.example/';
let cells = 0;
afterAll(() => process.stdout.write(`environment access matrix: ${cells} cells\n`));

withTestDatabases((db) => {
  let execHost: ExecHostDouble;
  let gw: Gateway;
  let admin: string;
  let adminId: string;
  let projects: Record<'matrix' | 'audit' | 'sessions' | 'observed' | 'failed' | 'restart' | 'base' | 'invalid' | 'race', string>;
  const tokens = {} as Record<Caller, string | null>;
  let developerId: string;
  let scriptDir: string;

  const env = () => ({
    LEMNISCATE_EXEC_HOST_URL: execHost.url,
    LEMNISCATE_EXEC_HOST_TOKEN: execHost.token,
    LEMNISCATE_MODELS_CONFIG: path.join(scriptDir, 'models.yaml'),
    LEMNISCATE_DEFAULT_MODEL: `scripted:${path.join(scriptDir, 'done.json')}`,
  });
  const start = (database: TestDatabase) => startGateway(database, env(), undefined, { sessionLoops: 'run', environmentPollMs: 25 });

  beforeAll(async () => {
    scriptDir = mkdtempSync(path.join(os.tmpdir(), 'lemni-env-'));
    writeFileSync(path.join(scriptDir, 'models.yaml'), 'scripted:\n  enabled: true\n');
    writeFileSync(path.join(scriptDir, 'done.json'), JSON.stringify({ turns: [{ text: 'Done.' }] }));
    execHost = await startExecHostDouble();
    gw = await start(db());
    ({ token: admin, userId: adminId } = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD));
    projects = {
      matrix: await createProject(gw, admin, 'env-matrix'),
      audit: await createProject(gw, admin, 'env-audit'),
      sessions: await createProject(gw, admin, 'env-sessions'),
      observed: await createProject(gw, admin, 'env-observed'),
      failed: await createProject(gw, admin, 'env-failed'),
      restart: await createProject(gw, admin, 'env-restart'),
      base: await createProject(gw, admin, 'env-base'),
      invalid: await createProject(gw, admin, 'env-invalid'),
      race: await createProject(gw, admin, 'env-race'),
    };
    const all = Object.values(projects);
    const developer = await createUser(gw, admin, 'env-dev@example.test', 'developer', all);
    developerId = developer.userId;
    tokens.admin = admin;
    tokens['developer member'] = developer.token;
    tokens['developer non-member'] = (await createUser(gw, admin, 'env-outsider@example.test', 'developer', [])).token;
    tokens['officer member'] = (await createUser(gw, admin, 'env-officer@example.test', 'security_officer', all)).token;
    tokens['officer non-member'] = (await createUser(gw, admin, 'env-officer-out@example.test', 'security_officer', [])).token;
    tokens['no token'] = null;
    // The policy's environment: mirrors, and a set-up time below the exec-host's minimum (sent as 10 s).
    for (const id of all) {
      const res = await gw
        .http()
        .post(`/api/v1/projects/${id}/policy`)
        .set(bearer(admin))
        .send({ document: { version: 1, environment: { mirrors: [MIRROR], setupTimeoutSeconds: 3 } } });
      expect(res.status).toBe(201);
    }
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
    rmSync(scriptDir, { recursive: true, force: true });
  });

  const call = (caller: Caller, name: (typeof ROUTES)[number], params: Record<string, string>, query?: Record<string, string | number>, body?: object) => {
    const route = GatewayRoutes[name];
    const url = fillPath(route.path, params);
    let req = route.method === 'GET' ? gw.http().get(url) : gw.http().post(url);
    const token = tokens[caller];
    if (token) req = req.set(bearer(token));
    if (query) req = req.query(query);
    return route.method === 'POST' ? req.send(body ?? {}) : req;
  };
  const statusOf = async (projectId: string, caller: Caller = 'developer member') => {
    const res = await call(caller, 'environmentStatus', { projectId });
    expect(res.status).toBe(200);
    return EnvironmentStatus.parse(res.body);
  };
  const kinds = async (projectId: string, kind: string) => (await auditKinds(gw, [kind])).filter((e) => e.projectId === projectId);
  const startSession = (projectId: string, extra: object = {}) =>
    gw
      .http()
      .post('/api/v1/sessions')
      .set(bearer(tokens['developer member'] as string))
      .send({ projectId, instruction: 'make the tests pass', mode: 'headless', ...extra });

  it(`answers every environment route for every kind of caller as the project's other routes do`, async () => {
    execHost.setEnvironment(projects.matrix, { outcome: 'ready', durationMs: 20 });
    const first = await call('admin', 'prepareEnvironment', { projectId: projects.matrix });
    expect(first.status).toBe(202);
    const jobId = EnvironmentStatus.parse(first.body).job?.jobId as string;
    expect(jobId).toMatch(/^job-/);
    await gw.app.get(EnvironmentsService).settled();

    const failures: string[] = [];
    for (const caller of CALLERS) {
      // The answer the project's other routes give this caller: an environment route gives the same to a non-member.
      const project = await (tokens[caller]
        ? gw
            .http()
            .get(`/api/v1/projects/${projects.matrix}`)
            .set(bearer(tokens[caller] as string))
        : gw.http().get(`/api/v1/projects/${projects.matrix}`));
      for (const name of ROUTES) {
        const res = await call(caller, name, name === 'environmentLog' ? { projectId: projects.matrix, jobId } : { projectId: projects.matrix });
        cells += 1;
        const expected = EXPECTED[name][caller];
        if (res.status !== expected) failures.push(`${caller} ${name}: ${res.status} (expected ${expected}) ${JSON.stringify(res.body)}`);
        if (name !== 'prepareEnvironment' && res.status !== project.status) failures.push(`${caller} ${name}: ${res.status}, whereas GET /projects/:id answers ${project.status}`);
        if (res.status >= 400 && !ErrorBody.safeParse(res.body).success) failures.push(`${caller} ${name}: the refusal is not an error body`);
        if (res.status === 403 && !/^As (an administrator|a developer|a security officer) you may not /.test(String(res.body.message)))
          failures.push(`${caller} ${name}: the refusal is not a sentence`);
        if (res.status === 200 && name === 'environmentLog') EnvironmentLog.parse(res.body);
      }
    }
    // A project that does not exist, and a job of another project, are not found.
    const unknown = await call('admin', 'environmentStatus', { projectId: '00000000-0000-4000-8000-000000000000' });
    const foreignJob = await call('admin', 'environmentLog', { projectId: projects.audit, jobId });
    cells += 2;
    if (unknown.status !== 404) failures.push(`unknown project: ${unknown.status}`);
    if (foreignJob.status !== 404) failures.push(`a job of another project: ${foreignJob.status}`);
    expect(failures).toEqual([]);
    // Refusals are audited as every refusal is; nothing was prepared by the refused.
    const requested = await kinds(projects.matrix, 'environment.prepare_requested');
    expect(requested.map((e) => e.actor).sort()).toEqual([`user:${adminId}`, `user:${adminId}`, `user:${developerId}`].sort());
    expect([...execHost.jobs.values()].filter((j) => j.projectId === projects.matrix)).toHaveLength(1);
  });

  it('audits a preparation once when asked and its end exactly once, however many read its status at the same time', async () => {
    execHost.setEnvironment(projects.audit, { outcome: 'manual', finalLog: `${'x'.repeat(99)}\n`.repeat(1200) });
    const res = await call('developer member', 'prepareEnvironment', { projectId: projects.audit }, undefined, { force: false });
    expect(res.status).toBe(202);
    const prepared = EnvironmentStatus.parse(res.body);
    expect(prepared.state).toBe('preparing');
    const jobId = prepared.job?.jobId as string;
    // The exec-host was asked with the project's default ref, the policy's mirrors and the minimum set-up time.
    const asked = execHost.calls.filter((c) => c.path === '/v1/environments/prepare').at(-1)?.body as Record<string, unknown>;
    expect(asked).toMatchObject({ projectId: projects.audit, repository: { source: '/srv/git/env-audit.git', ref: 'main' }, mirrors: [MIRROR], setupTimeoutSeconds: 10, force: false });

    const readers = () => Promise.all(Array.from({ length: 12 }, () => statusOf(projects.audit)));
    expect(new Set((await readers()).map((s) => s.state))).toEqual(new Set(['preparing']));
    execHost.finishJob(jobId, 'ready');
    const after = await readers();
    await gw.app.get(EnvironmentsService).settled();
    await readers();
    expect(after.every((s) => s.state === 'ready')).toBe(true);

    const requested = await kinds(projects.audit, 'environment.prepare_requested');
    expect(requested.map((e) => ({ actor: e.actor, payload: e.payload }))).toEqual([
      { actor: `user:${developerId}`, payload: { key: prepared.key, force: false, automatic: false, jobId, state: 'preparing' } },
    ]);
    const ended = await kinds(projects.audit, 'environment.prepared');
    expect(ended).toHaveLength(1);
    expect(ended[0]?.payload).toMatchObject({ key: prepared.key, jobId, message: expect.stringContaining('Prepared'), durationMs: expect.any(Number) });
    expect(await kinds(projects.audit, 'environment.prepare_failed')).toEqual([]);

    // The whole log from the exec-host, page by page; then, once it forgets the job, the kept last 64 KiB.
    let offset = 0;
    let text = '';
    for (;;) {
      const page = EnvironmentLog.parse((await call('officer member', 'environmentLog', { projectId: projects.audit, jobId }, { offset })).body);
      text += page.text;
      if (page.nextOffset === offset) break;
      offset = page.nextOffset;
    }
    expect(text).toContain('$ npm ci');
    expect(text.endsWith('Snapshot taken; the environment is ready.\n')).toBe(true);
    execHost.forgetJob(jobId);
    const kept = EnvironmentLog.parse((await call('developer member', 'environmentLog', { projectId: projects.audit, jobId })).body);
    expect(kept.complete).toBe(true);
    expect(kept.nextOffset).toBe(Buffer.byteLength(text));
    expect(kept.offset).toBe(kept.nextOffset - 64 * 1024);
    expect(Buffer.from(text).subarray(kept.offset).toString()).toBe(kept.text);
  });

  it('refuses session starts with a sentence while the environment is not ready, prepares it once for concurrent starts, and leaves no session behind', async () => {
    execHost.setEnvironment(projects.sessions, { outcome: 'manual' });
    const creates = execHost.creates.length;
    const starts = await Promise.all(Array.from({ length: 6 }, () => startSession(projects.sessions)));
    for (const res of starts) {
      expect({ status: res.status, code: res.body.code }).toEqual({ status: 409, code: 'environment_not_ready' });
      expect(res.body.message).toMatch(/^The environment of project "env-sessions" (was never prepared for its current inputs: its preparation has started|is being prepared) \(job job-\d+/);
      expect(res.body.message).toContain('`lemni env logs --project env-sessions --follow`');
    }
    expect(starts.some((r) => /preparation has started/.test(r.body.message))).toBe(true);
    // One preparation, audited once as asked by the developer whose start caused it.
    const jobs = [...execHost.jobs.values()].filter((j) => j.projectId === projects.sessions);
    expect(jobs).toHaveLength(1);
    const requested = await kinds(projects.sessions, 'environment.prepare_requested');
    expect(requested.map((e) => [e.actor, (e.payload as { automatic: boolean }).automatic, (e.payload as { jobId: string }).jobId])).toEqual([[`user:${developerId}`, true, jobs[0]?.jobId]]);
    // Nothing half-created: no session, no sandbox asked for.
    const listed = await gw.http().get(`/api/v1/sessions?projectId=${projects.sessions}`).set(bearer(admin));
    expect(listed.body).toEqual([]);
    expect(execHost.creates.length).toBe(creates);

    // Ready: the session starts, and its sandbox carries the project's environment at the default ref, not the session's.
    execHost.finishJob(jobs[0]?.jobId as string, 'ready');
    const res = await startSession(projects.sessions, { baseCommit: 'b'.repeat(40), branch: 'feature' });
    expect(res.status).toBe(201);
    await gw.app.get(SessionRuntimeService).settled(res.body.id);
    const session = await gw.http().get(`/api/v1/sessions/${res.body.id}`).set(bearer(admin));
    expect(session.body.status).toBe('completed');
    const created = execHost.creates.find((c) => c.sessionId === res.body.id);
    expect(created?.repository).toEqual({ source: '/srv/git/env-sessions.git', ref: 'b'.repeat(40) });
    expect(created?.environment).toEqual({
      projectId: projects.sessions,
      repository: { source: '/srv/git/env-sessions.git', ref: 'main' },
      runtime: 'runc',
      mirrors: [MIRROR],
      limits: { cpus: 2, memoryMb: 2048, pids: 256, diskMb: 2048 },
      setupTimeoutSeconds: 10,
    });
    expect(await kinds(projects.sessions, 'environment.prepared')).toHaveLength(1);
  });

  it('audits the preparation a session start caused even when a status read recorded its job before the exec-host answered the start', async () => {
    // The exec-host begins the job at once but answers the start's request late; a status read meanwhile sees the job and records it.
    execHost.setEnvironment(projects.observed, { outcome: 'manual', prepareAnswerDelayMs: 400 });
    // A supertest request is sent once it is awaited: `then` sends it now.
    const starting = startSession(projects.observed).then((response) => response);
    const jobOf = () => [...execHost.jobs.values()].find((j) => j.projectId === projects.observed);
    for (const until = Date.now() + 5_000; !jobOf() && Date.now() < until;) await new Promise((resolve) => setTimeout(resolve, 10));
    const job = jobOf();
    expect(job).toBeDefined();
    await expect(statusOf(projects.observed)).resolves.toMatchObject({ state: 'preparing', job: { jobId: job?.jobId } });
    const res = await starting;
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 409, code: 'environment_not_ready' });
    expect(res.body.message).toMatch(/its preparation has started/);
    // Audited once, as asked by the developer whose start caused it; the status read audits nothing.
    const requested = await kinds(projects.observed, 'environment.prepare_requested');
    expect(requested.map((e) => [e.actor, (e.payload as { automatic: boolean }).automatic, (e.payload as { jobId: string }).jobId])).toEqual([[`user:${developerId}`, true, job?.jobId]]);
    // A second start joins the same preparation: refused, not audited again.
    const again = await startSession(projects.observed);
    expect({ status: again.status, code: again.body.code }).toEqual({ status: 409, code: 'environment_not_ready' });
    expect(await kinds(projects.observed, 'environment.prepare_requested')).toHaveLength(1);
    execHost.finishJob(job?.jobId as string, 'ready');
    await gw.app.get(EnvironmentsService).settled();
  });

  it('a failed preparation is not retried by session starts; they are refused with its reason', async () => {
    execHost.setEnvironment(projects.failed, { outcome: 'failed', durationMs: 10, failMessage: 'postCreateCommand "npm ci" exited with code 1.' });
    const first = await startSession(projects.failed);
    expect(first.status).toBe(409);
    await gw.app.get(EnvironmentsService).settled();
    expect((await statusOf(projects.failed)).state).toBe('failed');
    for (let i = 0; i < 3; i++) {
      const res = await startSession(projects.failed);
      expect({ status: res.status, code: res.body.code }).toEqual({ status: 409, code: 'environment_not_ready' });
      expect(res.body.message).toBe(
        'The preparation of the environment of project "env-failed" failed: postCreateCommand "npm ci" exited with code 1. Sessions are refused until it is prepared: read its log with `lemni env logs --project env-failed`, fix the devcontainer, or prepare it again with `lemni env prepare --project env-failed --force`.',
      );
    }
    expect([...execHost.jobs.values()].filter((j) => j.projectId === projects.failed)).toHaveLength(1);
    const failed = await kinds(projects.failed, 'environment.prepare_failed');
    expect(failed.map((e) => (e.payload as { message: string }).message)).toEqual(['postCreateCommand "npm ci" exited with code 1.']);
    // A person forces a new preparation.
    const forced = await call('developer member', 'prepareEnvironment', { projectId: projects.failed }, undefined, { force: true });
    expect({ status: forced.status, state: forced.body.state }).toEqual({ status: 202, state: 'preparing' });
  });

  it('a preparation whose end no gateway saw is recorded once when its status is next read after a restart; one the exec-host lost is recorded as lost', async () => {
    execHost.setEnvironment(projects.restart, { outcome: 'manual' });
    const res = await call('admin', 'prepareEnvironment', { projectId: projects.restart });
    const jobId = EnvironmentStatus.parse(res.body).job?.jobId as string;
    await gw.close();
    execHost.finishJob(jobId, 'ready');
    gw = await start(db());
    expect(await kinds(projects.restart, 'environment.prepared')).toEqual([]);
    const reads = await Promise.all(Array.from({ length: 10 }, () => statusOf(projects.restart, 'officer member')));
    expect(reads.every((s) => s.state === 'ready')).toBe(true);
    expect((await kinds(projects.restart, 'environment.prepared')).map((e) => (e.payload as { jobId: string }).jobId)).toEqual([jobId]);

    // Down again while a new preparation runs; meanwhile the inputs change and the exec-host forgets the job.
    const forced = await call('admin', 'prepareEnvironment', { projectId: projects.restart }, undefined, { force: true });
    const lostId = EnvironmentStatus.parse(forced.body).job?.jobId as string;
    await gw.close();
    execHost.forgetJob(lostId);
    execHost.setEnvironment(projects.restart, { key: `sha256:${'e'.repeat(64)}` });
    gw = await start(db());
    await Promise.all(Array.from({ length: 5 }, () => statusOf(projects.restart)));
    await gw.app.get(EnvironmentsService).settled();
    await statusOf(projects.restart);
    expect((await kinds(projects.restart, 'environment.prepare_lost')).map((e) => (e.payload as { jobId: string }).jobId)).toEqual([lostId]);
    const log = await call('developer member', 'environmentLog', { projectId: projects.restart, jobId: lostId });
    expect({ status: log.status, code: log.body.code }).toEqual({ status: 404, code: 'not_found' });
  });

  it('a repository without a devcontainer starts sessions from the sandbox image, with nothing to prepare', async () => {
    const status = await statusOf(projects.base);
    expect({ state: status.state, key: status.key, job: status.job }).toEqual({ state: 'base', key: null, job: null });
    const res = await startSession(projects.base);
    expect(res.status).toBe(201);
    await gw.app.get(SessionRuntimeService).settled(res.body.id);
    expect(execHost.creates.find((c) => c.sessionId === res.body.id)?.environment?.repository.ref).toBe('main');
    const prepared = await call('admin', 'prepareEnvironment', { projectId: projects.base });
    expect({ status: prepared.status, state: prepared.body.state }).toEqual({ status: 202, state: 'base' });
  });

  it("an unusable devcontainer is the developer's to fix: 422 with the exec-host's sentence, on status, prepare and session start", async () => {
    const sentence = 'The devcontainer names the image corp/builder:1, which is not on this exec-host.';
    execHost.setEnvironment(projects.invalid, { invalid: sentence });
    for (const res of [
      await call('admin', 'environmentStatus', { projectId: projects.invalid }),
      await call('admin', 'prepareEnvironment', { projectId: projects.invalid }),
      await startSession(projects.invalid),
    ]) {
      expect({ status: res.status, code: res.body.code, message: res.body.message }).toEqual({ status: 422, code: 'environment_invalid', message: sentence });
    }
  });

  it('a sandbox refused because the inputs changed after the start ends the session as failed with the sentence, not as a crash', async () => {
    execHost.setEnvironment(projects.race, { outcome: 'ready', durationMs: 5 });
    await call('admin', 'prepareEnvironment', { projectId: projects.race });
    await gw.app.get(EnvironmentsService).settled();
    expect((await statusOf(projects.race)).state).toBe('ready');
    execHost.beforeCreate = (request) => {
      if (request.environment?.projectId === projects.race) execHost.setEnvironment(projects.race, { key: `sha256:${'f'.repeat(64)}` });
    };
    try {
      const res = await startSession(projects.race);
      expect(res.status).toBe(201);
      await gw.app.get(SessionRuntimeService).settled(res.body.id);
      const sentence = 'The environment was never prepared for these inputs; sessions are refused until it is.';
      const session = await gw.http().get(`/api/v1/sessions/${res.body.id}`).set(bearer(admin));
      expect(session.body.status).toBe('failed');
      const events = await gw.app.get(EventsService).replay(0, { sessionIds: [res.body.id] });
      const failed = events.filter((e) => e.type === 'session_failed').map((e) => e.payload);
      expect(failed).toEqual([expect.objectContaining({ class: 'platform_error', message: sentence, exitCode: 1 })]);
      const ended = (await auditKinds(gw, ['session.ended'])).filter((e) => e.sessionId === res.body.id);
      expect(ended.map((e) => (e.payload as { message: string }).message)).toEqual([expect.stringContaining(sentence)]);
    } finally {
      execHost.beforeCreate = null;
    }
  });

  it('sent the exec-host only requests its contract accepts', () => {
    expect(execHost.invalid).toEqual([]);
  });
});
