import { ErrorBody, fillPath, gatewayPath, GatewayRoutes, type GatewayRoute, type GatewayRouteName } from '@lemniscate/contracts';
import { withTestDatabases } from '../support/db';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, login, PASSWORD, tokenFor, startGateway, type Gateway } from '../support/harness';

jest.setTimeout(120_000);

/**
 * The real gateway's answers have the shapes libs/contracts' GatewayRoutes promises: a walk that
 * calls every route of the table once, builds each request from the table (method, path, a body
 * its own schema accepts) and parses each answer with the route's response schema. The last test
 * fails when a route of the table was not called, so a new route comes with a sample here.
 */
interface Call {
  params?: Record<string, string | number>;
  query?: Record<string, string | number>;
  body?: unknown;
  headers?: Record<string, string>;
  /** A status other than the route's success status. */
  status?: number;
}

withTestDatabases((db) => {
  let gw: Gateway;
  let execHost: ExecHostDouble;
  const called = new Set<GatewayRouteName>();

  beforeAll(async () => {
    called.clear();
    // The exec-host double answers readiness and the project environment's routes.
    execHost = await startExecHostDouble();
    gw = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: execHost.url, LEMNISCATE_EXEC_HOST_TOKEN: execHost.token });
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
  });

  async function call(name: GatewayRouteName, c: Call = {}): Promise<{ body: unknown; text: string; headers: Record<string, string> }> {
    const route: GatewayRoute = GatewayRoutes[name];
    if (route.body !== undefined) {
      const ok = route.body.safeParse(c.body);
      expect({ name, requestBodyIssues: ok.error?.issues }).toEqual({ name, requestBodyIssues: undefined });
    }
    if (route.query !== undefined) expect({ name, queryOk: route.query.safeParse(c.query ?? {}).success }).toEqual({ name, queryOk: true });
    const path = fillPath(route.path, c.params ?? {});
    const agent = gw.http();
    let req = route.method === 'GET' ? agent.get(path) : route.method === 'POST' ? agent.post(path) : agent.delete(path);
    for (const [k, v] of Object.entries(c.headers ?? {})) req = req.set(k, v);
    if (c.query) req = req.query(c.query);
    const res = c.body === undefined ? await req : await req.send(c.body as object);
    const expected = c.status ?? route.status;
    expect({ name, status: res.status, unexpected: res.status === expected ? undefined : res.body }).toEqual({ name, status: expected, unexpected: undefined });
    if (expected >= 400) {
      // A route this gateway cannot serve successfully (single sign-on is not configured here; its success: oidc.medium.ts) answers the error body.
      expect({ name, errorIssues: ErrorBody.safeParse(res.body).error?.issues }).toEqual({ name, errorIssues: undefined });
    } else if (route.response !== undefined) {
      const parsed = route.response.safeParse(res.body);
      expect({ name, responseIssues: parsed.error?.issues }).toEqual({ name, responseIssues: undefined });
    }
    called.add(name);
    return { body: res.body, text: res.text, headers: res.headers as Record<string, string> };
  }

  it('answers every route of the table with the status and the body shape the table gives', async () => {
    await call('healthz');
    await call('readyz');
    expect((await call('metrics')).text).toContain('# HELP');
    expect((await call('apiDocs')).body).toMatchObject({ openapi: expect.stringMatching(/^3\.1/) });

    // Identity: a console session (cookie + CSRF), tokens, password.
    const web = await login(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    const cookie = { cookie: web.cookie, 'x-csrf-token': web.csrf };
    await call('login', { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    const asAdmin = bearer(admin);
    await call('me', { headers: asAdmin });
    expect((await call('oidcInfo')).body).toEqual({ enabled: false, label: null, localSignIn: true });
    // Without single sign-on configured, its start and callback say so (the flow: oidc.medium.ts).
    await call('oidcStart', { status: 404 });
    await call('oidcCallback', { query: { state: 's', code: 'c' }, status: 404 });
    await call('oidcCli', { body: { code: 'c'.repeat(43), codeVerifier: 'v'.repeat(43) }, status: 404 });
    const extra = (await call('createToken', { headers: cookie, body: { name: 'to revoke' } })).body as { id: string };
    await call('listTokens', { headers: asAdmin });
    await call('revokeToken', { headers: asAdmin, params: { id: extra.id } });
    await call('logout', { headers: cookie });

    // Projects, users, members.
    const projectId = await createProject(gw, admin, 'routes-walk');
    await call('createProject', { headers: asAdmin, body: { name: 'routes-walk-2', repositorySource: '/srv/git/routes-walk-2.git' } });
    await call('listProjects', { headers: asAdmin });
    await call('getProject', { headers: asAdmin, params: { projectId } });
    const dev = await createUser(gw, admin, 'walker@example.test', 'developer', [projectId]);
    const asDev = bearer(dev.token);
    const other = (await call('createUser', { headers: asAdmin, body: { email: 'other@example.test', displayName: 'Other', role: 'developer', password: PASSWORD, projectIds: [] } })).body as {
      id: string;
    };
    await call('listUsers', { headers: asAdmin });
    await call('getUser', { headers: asAdmin, params: { id: other.id } });
    await call('updateUser', { headers: asAdmin, params: { id: other.id }, body: { role: 'security_officer' } });
    await call('listUserTokens', { headers: asAdmin, params: { id: other.id } });
    await call('addMember', { headers: asAdmin, params: { projectId }, body: { userId: other.id } });
    await call('listMembers', { headers: asAdmin, params: { projectId } });
    await call('updateProject', { headers: asAdmin, params: { projectId }, body: { defaultRef: 'walked' } });
    await call('removeMember', { headers: asAdmin, params: { projectId, userId: other.id } });
    await call('revokeUser', { headers: asAdmin, params: { id: other.id } });

    // Policy.
    await call('publishPolicy', { headers: asAdmin, params: { projectId }, body: { sourceText: 'version: 1\n# walked\n', comment: 'walk' } });
    await call('publishPolicy', { headers: asAdmin, params: { projectId }, body: { sourceText: 'version: 1\n# walked again\n', comment: 'walk' } });
    await call('currentPolicy', { headers: asAdmin, params: { projectId } });
    await call('policyVersions', { headers: asAdmin, params: { projectId } });
    await call('policyVersion', { headers: asAdmin, params: { projectId, version: 1 } });
    await call('policyDiff', { headers: asAdmin, params: { projectId }, query: { from: 1, to: 2 } });
    await call('policyRollback', { headers: asAdmin, params: { projectId }, body: { version: 1, comment: 'back' } });
    await call('policyDryRun', { headers: asAdmin, params: { projectId }, body: { sourceText: 'version: 1\n' } });

    // The repository's access (for a URL: a local path takes none) and the project's agents.
    const byUrl = (await call('createProject', { headers: asAdmin, body: { name: 'routes-walk-url', repositorySource: 'https://git.example.test/routes.git' } })).body as { id: string };
    await call('setRepositoryAccess', { headers: asAdmin, params: { projectId: byUrl.id }, body: { credential: { kind: 'https', username: 'ci', password: 'token-walked' } } });
    await call('repositoryAccess', { headers: asAdmin, params: { projectId: byUrl.id } });
    await call('clearRepositoryAccess', { headers: asAdmin, params: { projectId: byUrl.id } });
    await call('projectAgents', { headers: asDev, params: { projectId } });
    await call('projectMcp', { headers: asDev, params: { projectId } });

    // The project's environment: a preparation, its status, its log.
    execHost.setEnvironment(projectId, { outcome: 'manual' });
    const prepared = (await call('prepareEnvironment', { headers: asDev, params: { projectId }, body: { force: false } })).body as { job: { jobId: string } };
    await call('environmentStatus', { headers: asDev, params: { projectId } });
    await call('environmentLog', { headers: asDev, params: { projectId, jobId: prepared.job.jobId }, query: { offset: 0 } });
    execHost.finishJob(prepared.job.jobId, 'ready');

    // Sessions and approvals (sessions are recorded here; their loops run in test/e2e).
    const session = (await call('createSession', { headers: asDev, body: { projectId, instruction: 'walk the routes', headless: true } })).body as { id: string };
    const second = (await call('createSession', { headers: asDev, body: { projectId, instruction: 'walk again' } })).body as { id: string };
    await call('listSessions', { headers: asDev, query: { projectId } });
    await call('getSession', { headers: asDev, params: { id: session.id } });
    await call('sessionToolCalls', { headers: asDev, params: { id: session.id } });
    const approvals = gw.app.get(ApprovalsService);
    const a1 = await approvals.request({ sessionId: second.id, kind: 'command', payload: { command: 'echo one' }, agent: 'general' });
    const a2 = await approvals.request({ sessionId: second.id, kind: 'command', payload: { command: 'echo two' }, agent: 'general' });
    await call('listApprovals', { headers: asDev, query: { sessionId: second.id } });
    await call('getApproval', { headers: asDev, params: { id: a1.id } });
    // A write waiting in a sandbox whose working copy the double holds: the lines around it.
    await gw.app.get(SessionsRepository).update(second.id, { sandboxId: 'sbx-walk' });
    execHost.files.set('sbx-walk\0notes.txt', 'one\ntwo\nthree\nfour\nfive\n');
    const a3 = await approvals.request({
      sessionId: second.id,
      kind: 'write',
      payload: { diff: '--- a/notes.txt\n+++ b/notes.txt\n@@ -5,1 +5,1 @@\n-five\n+FIVE\n', files: ['notes.txt'] },
      agent: 'general',
    });
    expect((await call('approvalContext', { headers: asDev, params: { id: a3.id }, query: { path: 'notes.txt', from: 1, to: 4 } })).body).toMatchObject({ lines: ['one', 'two', 'three', 'four'] });
    await call('approve', { headers: asDev, params: { id: a1.id }, body: {} });
    await call('reject', { headers: asDev, params: { id: a2.id }, body: { reason: 'not now' } });
    await call('stopSession', { headers: asDev, params: { id: session.id }, body: { reason: 'walked' } });
    await call('revokeSession', { headers: asAdmin, params: { id: second.id }, body: {} });

    // Audit and dashboard.
    await call('listAudit', { headers: asAdmin, query: { projectId } });
    await call('auditKinds', { headers: asAdmin });
    await call('auditCount', { headers: asAdmin, query: { projectId } });
    await call('auditVerify', { headers: asAdmin });
    await call('auditSinks', { headers: asAdmin });
    const exported = await call('auditExport', { headers: asAdmin, query: { projectId, format: 'jsonl' } });
    expect(exported.text.trim().split('\n').length).toBeGreaterThan(0);
    await call('dashboard', { headers: asAdmin, query: { days: 7 } });
    await call('changePassword', { headers: asDev, body: { currentPassword: PASSWORD, newPassword: 'another long enough password' } });
  });

  it('answers the exec-host pool routes: heartbeat, list, drain, undrain (a gateway in pool mode)', async () => {
    const fixed = gw;
    const pool = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: '', LEMNISCATE_EXEC_HOST_POOL: 'true', LEMNISCATE_EXEC_HOST_TOKEN: execHost.token });
    gw = pool;
    try {
      const heartbeat = { id: 'walker', address: execHost.url, runtimes: ['runc'], images: ['lemniscate/sandbox:current'], environments: [], capacity: 4, load: 0, version: '1.0.0' };
      await call('execHostHeartbeat', { headers: { authorization: `Bearer ${execHost.token}` }, body: heartbeat });
      const asAdmin = bearer((await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token);
      await call('listExecHosts', { headers: asAdmin });
      await call('drainExecHost', { headers: asAdmin, params: { hostId: 'walker' }, body: { reason: 'walk' } });
      await call('undrainExecHost', { headers: asAdmin, params: { hostId: 'walker' } });
    } finally {
      gw = fixed;
      await pool.close();
    }
  });

  it("accepts a subagent request built from the table's schema (the refusal is about the session, not the body)", async () => {
    const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    const projectId = await createProject(gw, admin, 'routes-subagent');
    const dev = await createUser(gw, admin, 'mentioner@example.test', 'developer', [projectId]);
    const parent = await gw.http().post(gatewayPath(GatewayRoutes.createSession)).set(bearer(dev.token)).send({ projectId, instruction: 'parent' });
    expect(parent.status).toBe(201);
    // A subagent is started by its parent's agent or by a mention, never by a new session's request naming a parent.
    const withParent = await gw.http().post(gatewayPath(GatewayRoutes.createSession)).set(bearer(dev.token)).send({ projectId, instruction: 'child', parentSessionId: parent.body.id });
    expect({ status: withParent.status, message: withParent.body.message }).toEqual({ status: 400, message: 'The request is invalid: body: unknown field "parentSessionId".' });
    const body = GatewayRoutes.startSubagent.body.parse({ agent: 'explore', instruction: 'look around' });
    const res = await gw
      .http()
      .post(gatewayPath(GatewayRoutes.startSubagent, { id: parent.body.id }))
      .set(bearer(dev.token))
      .send(body);
    // Sessions here are recorded without a loop, so the gateway refuses for that reason; the body passed validation.
    expect(ErrorBody.parse(res.body).code).not.toBe('validation_failed');
    expect(res.body.message).toMatch(/not running on this gateway/);
    const drifted = await gw
      .http()
      .post(gatewayPath(GatewayRoutes.startSubagent, { id: parent.body.id }))
      .set(bearer(dev.token))
      .send({ ...body, background: true });
    expect(drifted.status).toBe(400);
    expect(drifted.body.message).toBe('The request is invalid: body: unknown field "background".');
    called.add('startSubagent');
  });

  it('called every route of the table', () => {
    expect(Object.keys(GatewayRoutes).filter((n) => !called.has(n as GatewayRouteName))).toEqual([]);
  });
});
