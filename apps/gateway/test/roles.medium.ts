import { CONTROLLERS } from '../src/app.module';
import { listRoutes } from '../src/common/routes';
import { withTestDatabases } from '../src/db/testing';
import { ApprovalsService } from '../src/sessions/approvals.service';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from './harness';

jest.setTimeout(120_000);

/**
 * Every role tried against every route it must not reach (C1, server side). The people: an
 * administrator, a developer who owns the session, a security officer, all members of the project;
 * another developer of the same project; an administrator who is not a member of it.
 */
type Who = 'admin' | 'developer' | 'security_officer' | 'other_developer' | 'outside_admin';

interface Ids {
  project: string;
  session: string;
  approval: string;
  developerId: string;
  token: string;
}

interface Case {
  forbidden: Who[];
  request?: (ids: Ids) => { path: string; body?: unknown };
}

/** Keyed by the route as declared; a new route without an entry here fails the first test. */
const MATRIX: Record<string, Case> = {
  'POST /auth/login': { forbidden: [] },
  'POST /auth/logout': { forbidden: [] },
  'GET /auth/me': { forbidden: [] },
  'POST /auth/password': { forbidden: [] },
  'POST /auth/tokens': { forbidden: [] },
  'GET /auth/tokens': { forbidden: [] },
  'DELETE /auth/tokens/:id': { forbidden: [] },
  'GET /users': { forbidden: [] },
  'POST /users': {
    forbidden: ['developer', 'security_officer', 'other_developer'],
    request: () => ({ path: '/api/v1/users', body: { email: 'intruder@example.test', displayName: 'I', role: 'admin', password: 'a long enough password' } }),
  },
  'GET /users/:id': { forbidden: ['security_officer', 'other_developer'], request: (i) => ({ path: `/api/v1/users/${i.developerId}` }) },
  'POST /users/:id/revoke': { forbidden: ['developer', 'security_officer', 'other_developer'], request: (i) => ({ path: `/api/v1/users/${i.developerId}/revoke` }) },
  'GET /projects': { forbidden: [] },
  'POST /projects': { forbidden: ['developer', 'security_officer', 'other_developer'], request: () => ({ path: '/api/v1/projects', body: { name: 'sneaky', repositorySource: '/x' } }) },
  'GET /projects/:projectId': { forbidden: ['outside_admin'], request: (i) => ({ path: `/api/v1/projects/${i.project}` }) },
  'POST /projects/:projectId/members': {
    forbidden: ['developer', 'security_officer', 'other_developer', 'outside_admin'],
    request: (i) => ({ path: `/api/v1/projects/${i.project}/members`, body: { userId: i.developerId } }),
  },
  'DELETE /projects/:projectId/members/:userId': {
    forbidden: ['developer', 'security_officer', 'other_developer', 'outside_admin'],
    request: (i) => ({ path: `/api/v1/projects/${i.project}/members/${i.developerId}` }),
  },
  'GET /projects/:projectId/policy': { forbidden: ['outside_admin'], request: (i) => ({ path: `/api/v1/projects/${i.project}/policy` }) },
  'POST /projects/:projectId/policy': {
    forbidden: ['developer', 'security_officer', 'other_developer', 'outside_admin'],
    request: (i) => ({ path: `/api/v1/projects/${i.project}/policy`, body: { document: { version: 1, commands: { default: 'allow' } } } }),
  },
  'POST /projects/:projectId/policy/dry-run': {
    forbidden: ['developer', 'security_officer', 'other_developer', 'outside_admin'],
    request: (i) => ({ path: `/api/v1/projects/${i.project}/policy/dry-run`, body: { sourceText: 'version: 1\n' } }),
  },
  'GET /projects/:projectId/policy/versions': { forbidden: ['outside_admin'], request: (i) => ({ path: `/api/v1/projects/${i.project}/policy/versions` }) },
  'GET /projects/:projectId/policy/versions/:version': { forbidden: ['outside_admin'], request: (i) => ({ path: `/api/v1/projects/${i.project}/policy/versions/1` }) },
  'GET /projects/:projectId/policy/diff': { forbidden: ['outside_admin'], request: (i) => ({ path: `/api/v1/projects/${i.project}/policy/diff?from=1&to=1` }) },
  'POST /projects/:projectId/policy/rollback': {
    forbidden: ['developer', 'security_officer', 'other_developer', 'outside_admin'],
    request: (i) => ({ path: `/api/v1/projects/${i.project}/policy/rollback`, body: { version: 1 } }),
  },
  'POST /sessions': { forbidden: ['security_officer', 'outside_admin'], request: (i) => ({ path: '/api/v1/sessions', body: { projectId: i.project, instruction: 'do it' } }) },
  'POST /sessions/:id/subagents': { forbidden: ['security_officer', 'outside_admin', 'other_developer'], request: (i) => ({ path: `/api/v1/sessions/${i.session}/subagents`, body: { agent: 'explore', instruction: 'look around' } }) },
  'GET /sessions': { forbidden: [] },
  'GET /sessions/:id': { forbidden: ['other_developer', 'outside_admin'], request: (i) => ({ path: `/api/v1/sessions/${i.session}` }) },
  'GET /sessions/:id/tool-calls': { forbidden: ['other_developer', 'outside_admin'], request: (i) => ({ path: `/api/v1/sessions/${i.session}/tool-calls` }) },
  'POST /sessions/:id/stop': { forbidden: ['security_officer', 'other_developer', 'outside_admin'], request: (i) => ({ path: `/api/v1/sessions/${i.session}/stop`, body: {} }) },
  'POST /sessions/:id/revoke': {
    forbidden: ['developer', 'security_officer', 'other_developer', 'outside_admin'],
    request: (i) => ({ path: `/api/v1/sessions/${i.session}/revoke`, body: {} }),
  },
  'GET /approvals': { forbidden: [] },
  'GET /approvals/:id': { forbidden: ['other_developer', 'outside_admin'], request: (i) => ({ path: `/api/v1/approvals/${i.approval}` }) },
  'POST /approvals/:id/approve': { forbidden: ['security_officer', 'other_developer', 'outside_admin'], request: (i) => ({ path: `/api/v1/approvals/${i.approval}/approve`, body: {} }) },
  'POST /approvals/:id/reject': { forbidden: ['security_officer', 'other_developer', 'outside_admin'], request: (i) => ({ path: `/api/v1/approvals/${i.approval}/reject`, body: {} }) },
  'GET /audit': { forbidden: ['developer', 'other_developer', 'outside_admin'], request: (i) => ({ path: `/api/v1/audit?projectId=${i.project}` }) },
  'GET /audit/verify': { forbidden: ['developer', 'other_developer'], request: () => ({ path: '/api/v1/audit/verify' }) },
  'GET /audit/export': { forbidden: ['developer', 'other_developer', 'outside_admin'], request: (i) => ({ path: `/api/v1/audit/export?projectId=${i.project}&format=csv` }) },
  'GET /healthz': { forbidden: [] },
  'GET /readyz': { forbidden: [] },
  'GET /metrics': { forbidden: [] },
  'GET /api/docs': { forbidden: [] },
};

const routes = listRoutes(CONTROLLERS);

it('the matrix names every route the gateway has', () => {
  expect(Object.keys(MATRIX).sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
});

withTestDatabases((db) => {
  let gw: Gateway;
  const tokens = {} as Record<Who, string>;
  let ids: Ids;

  beforeAll(async () => {
    gw = await startGateway(db());
    const admin = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    tokens.admin = admin.token;
    const project = await createProject(gw, admin.token, 'roles');
    const developer = await createUser(gw, admin.token, 'dev@example.test', 'developer', [project]);
    tokens.developer = developer.token;
    tokens.security_officer = (await createUser(gw, admin.token, 'sec@example.test', 'security_officer', [project])).token;
    tokens.other_developer = (await createUser(gw, admin.token, 'dev2@example.test', 'developer', [project])).token;
    tokens.outside_admin = (await createUser(gw, admin.token, 'admin2@example.test', 'admin', [])).token;
    const session = await gw.http().post('/api/v1/sessions').set(bearer(developer.token)).send({ projectId: project, instruction: 'fix the tests' });
    const approval = await gw.app.get(ApprovalsService).request({ sessionId: session.body.id, kind: 'command', payload: { command: 'npm install' }, agent: 'general' });
    ids = { project, session: session.body.id, approval: approval.id, developerId: developer.userId, token: developer.token };
  });
  afterAll(async () => {
    await gw?.close();
  });

  const forbiddenCases = routes.flatMap((r) => {
    const key = `${r.method} ${r.path}`;
    const c = MATRIX[key];
    return (c?.forbidden ?? []).map((who) => [who, key, r.method, c] as const);
  });

  it.each(forbiddenCases)('%s is refused %s', async (who, _key, method, c) => {
    const { path, body } = c?.request?.(ids) ?? { path: '' };
    const req = gw.http()[method.toLowerCase() as 'get' | 'post' | 'delete'](path).set(bearer(tokens[who]));
    const res = await (body === undefined ? req : req.send(body as object));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('forbidden');
    expect(res.body.message).toMatch(/^As (an administrator|a developer|a security officer) you may not /);
  });

  it('nothing the refused requests asked for happened, and every refusal was audited', async () => {
    const session = await gw.http().get(`/api/v1/sessions/${ids.session}`).set(bearer(tokens.developer));
    expect(session.body.status).toBe('running');
    const approval = await gw.http().get(`/api/v1/approvals/${ids.approval}`).set(bearer(tokens.developer));
    expect(approval.body.state).toBe('pending');
    const versions = await gw.http().get(`/api/v1/projects/${ids.project}/policy/versions`).set(bearer(tokens.admin));
    expect(versions.body).toHaveLength(0);
    const denied = await auditKinds(gw, ['authz.denied']);
    expect(denied.length).toBeGreaterThanOrEqual(forbiddenCases.length);
  });

  it('lists show each person only what they may see', async () => {
    const sessionsOf = async (who: Who) => ((await gw.http().get('/api/v1/sessions').set(bearer(tokens[who]))).body as { id: string }[]).map((s) => s.id);
    expect(await sessionsOf('developer')).toEqual([ids.session]);
    expect(await sessionsOf('security_officer')).toEqual([ids.session]);
    expect(await sessionsOf('other_developer')).toEqual([]);
    expect(await sessionsOf('outside_admin')).toEqual([]);
    const approvalsOf = async (who: Who) => ((await gw.http().get('/api/v1/approvals').set(bearer(tokens[who]))).body as unknown[]).length;
    expect(await approvalsOf('admin')).toBe(1);
    expect(await approvalsOf('other_developer')).toBe(0);
    expect(await approvalsOf('outside_admin')).toBe(0);
    const usersOf = async (who: Who) => ((await gw.http().get('/api/v1/users').set(bearer(tokens[who]))).body as unknown[]).length;
    expect(await usersOf('developer')).toBe(1);
    expect(await usersOf('admin')).toBe(5);
  });

  it('without a credential every non-public route is refused before any permission is considered', async () => {
    for (const r of routes.filter((x) => x.permission?.kind !== 'public')) {
      const path = `/api/v1${r.path}`.replace(':projectId', ids.project).replace(':userId', ids.developerId).replace(':version', '1').replace(':id', ids.session);
      const res = await gw.http()[r.method.toLowerCase() as 'get' | 'post' | 'delete'](path);
      expect([r.path, res.status]).toEqual([r.path, 401]);
    }
  });
});
