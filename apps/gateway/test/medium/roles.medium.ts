import { randomUUID } from 'node:crypto';
import { defineAbilitiesFor, subject, type AppAbility, type AppSubject, type AppSubjectName, type Role } from '@lemniscate/policy';
import { CONTROLLERS } from '../../src/app.module';
import { AuditService } from '../../src/audit/audit.service';
import type { RouteInfo } from '../../src/openapi/routes';
import { listRoutes } from '../../src/openapi/routes';
import { ApprovalsRepository } from '../../src/db/repositories/approvals.repository';
import { ToolCallsRepository } from '../../src/db/repositories/tool-calls.repository';
import { withTestDatabases } from '../support/db';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';
import { EventsClient } from '../support/ws-client';

jest.setTimeout(300_000);

/**
 * The authorization matrix (C1, T3), generated: every declared route × every role × membership of
 * the project under test (member, never a member, revoked) × query shape (no filter, own project,
 * other project, unknown id). Two projects carry unique marker strings in their session
 * instructions, tool calls, approvals, policies and audit entries; a response may contain a
 * project's marker only if the caller is currently a member of that project, and the foreign
 * project's marker never. Whether a cell should succeed is computed from the role table in
 * libs/policy (defineAbilitiesFor); an allowed read must succeed, a refused one must be 403/404.
 * Writes are sent only where they must be refused (their successful forms have their own tests).
 */
const ROLES: Role[] = ['admin', 'developer', 'security_officer'];
type Membership = 'member' | 'not_member' | 'revoked';
const MEMBERSHIPS: Membership[] = ['member', 'not_member', 'revoked'];
type Shape = 'none' | 'own' | 'other' | 'unknown';
const SHAPES: Shape[] = ['none', 'own', 'other', 'unknown'];

const OWN_MARK = 'xq7ownmark';
const FOREIGN_MARK = 'xq7foreignmark';

interface World {
  own: string;
  foreign: string;
  foreignSession: string;
  foreignApproval: string;
  foreignUser: string;
  foreignToken: string;
  ownerSession: string;
  ownerApproval: string;
  ownerUser: string;
  /** A preparation of each project's environment. */
  ownJob: string;
  foreignJob: string;
}

interface Subject {
  role: Role;
  membership: Membership;
  userId: string;
  token: string;
  /** The session (and its approval) in the own project this person reads: their own if a developer. */
  session: string;
  approval: string;
}

interface Target {
  path: string;
  body?: unknown;
  /** The record the route's permission is checked against; absent for lists and unscoped routes. */
  fields?: Record<string, string>;
  /** A list filtered by project: refused or empty when the filter is outside the caller's projects. */
  list?: boolean;
  /**
   * For a route the planted records cannot satisfy (a command's approval has no file lines): the
   * answer an allowed caller gets once the permission check passed, as opposed to a refusal.
   */
  answeredBy?: { status: number; message: RegExp };
}

type Build = (shape: Shape, w: World, s: Subject) => Target | undefined;

const pick = (shape: Shape, own: string, other: string): string | undefined => (shape === 'own' ? own : shape === 'other' ? other : shape === 'unknown' ? randomUUID() : undefined);
const projectOf = (shape: Shape, w: World): string | undefined => pick(shape, w.own, w.foreign);
const noneOnly =
  (path: string, body?: unknown): Build =>
  (shape) =>
    shape === 'none' ? { path, body } : undefined;
const listBy =
  (base: string): Build =>
  (shape, w) => {
    if (shape === 'none') return { path: base, list: true };
    return { path: `${base}${base.includes('?') ? '&' : '?'}projectId=${projectOf(shape, w)}`, list: true };
  };
const inProject =
  (suffix: string, body?: (w: World, s: Subject) => unknown): Build =>
  (shape, w, s) => {
    const projectId = projectOf(shape, w);
    if (!projectId) return undefined;
    return { path: `/projects/${projectId}${suffix}`, body: body?.(w, s), fields: { projectId } };
  };
const sessionRoute =
  (suffix: string, body?: unknown): Build =>
  (shape, w, s) => {
    if (shape === 'none') return undefined;
    const id = pick(shape, s.session, w.foreignSession) as string;
    const owner = shape === 'own' ? (s.role === 'developer' ? s.userId : w.ownerUser) : w.foreignUser;
    return { path: `/sessions/${id}${suffix}`, body, fields: { projectId: shape === 'own' ? w.own : shape === 'other' ? w.foreign : id, userId: owner } };
  };
const approvalRoute =
  (suffix: string, body?: unknown): Build =>
  (shape, w, s) => {
    if (shape === 'none') return undefined;
    const id = pick(shape, s.approval, w.foreignApproval) as string;
    const owner = shape === 'own' ? (s.role === 'developer' ? s.userId : w.ownerUser) : w.foreignUser;
    return { path: `/approvals/${id}${suffix}`, body, fields: { projectId: shape === 'own' ? w.own : shape === 'other' ? w.foreign : id, sessionUserId: owner } };
  };
const userRoute =
  (suffix: string): Build =>
  (shape, w) => {
    if (shape === 'none') return undefined;
    const id = pick(shape, w.ownerUser, w.foreignUser) as string;
    return { path: `/users/${id}${suffix}`, fields: { id } };
  };

/** Keyed by the route as declared: a route the gateway gains without an entry here fails the first test. */
const REQUESTS: Record<string, Build> = {
  'POST /auth/login': noneOnly('/auth/login', { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }),
  'POST /auth/logout': noneOnly('/auth/logout', {}),
  'GET /auth/me': noneOnly('/auth/me'),
  'GET /auth/oidc': noneOnly('/auth/oidc'),
  // This gateway has no single sign-on: anyone is told so (the flow itself: oidc.medium.ts).
  'GET /auth/oidc/start': (shape) => (shape === 'none' ? { path: '/auth/oidc/start', answeredBy: { status: 404, message: /^Single sign-on is not configured on this gateway\.$/ } } : undefined),
  'GET /auth/oidc/callback': (shape) =>
    shape === 'none' ? { path: '/auth/oidc/callback?state=s&code=c', answeredBy: { status: 404, message: /^Single sign-on is not configured on this gateway\.$/ } } : undefined,
  'POST /auth/oidc/cli': (shape) =>
    shape === 'none'
      ? { path: '/auth/oidc/cli', body: { code: 'c'.repeat(43), codeVerifier: 'v'.repeat(43) }, answeredBy: { status: 404, message: /^Single sign-on is not configured on this gateway\.$/ } }
      : undefined,
  'POST /auth/password': noneOnly('/auth/password', { currentPassword: 'x', newPassword: 'y' }),
  'POST /auth/tokens': noneOnly('/auth/tokens', { name: 'another' }),
  'GET /auth/tokens': noneOnly('/auth/tokens'),
  'DELETE /auth/tokens/:id': (shape, w) => (shape === 'other' ? { path: `/auth/tokens/${w.foreignToken}`, fields: { userId: w.foreignUser } } : undefined),
  'GET /users': noneOnly('/users'),
  'POST /users': noneOnly('/users', { email: `intruder-${randomUUID()}@example.test`, displayName: 'I', role: 'admin', password: 'a long enough password' }),
  'GET /users/:id': userRoute(''),
  'POST /users/:id/revoke': userRoute('/revoke'),
  'POST /users/:id': (shape, w, s) => {
    const t = userRoute('')(shape, w, s);
    return t && { ...t, body: { role: 'admin' } };
  },
  'GET /users/:id/tokens': userRoute('/tokens'),
  'GET /projects': noneOnly('/projects'),
  'POST /projects': noneOnly('/projects', { name: 'sneaky', repositorySource: '/x' }),
  'GET /projects/:projectId': (shape, w) => {
    const id = projectOf(shape, w);
    return id ? { path: `/projects/${id}`, fields: { id } } : undefined;
  },
  'POST /projects/:projectId': (shape, w) => {
    const id = projectOf(shape, w);
    return id ? { path: `/projects/${id}`, body: { defaultRef: 'sneaky' }, fields: { id } } : undefined;
  },
  'GET /projects/:projectId/members': (shape, w) => {
    const id = projectOf(shape, w);
    // Members' emails are for the project's administrators: the route asks for the right to change the project.
    return id ? { path: `/projects/${id}/members`, fields: { id } } : undefined;
  },
  'POST /projects/:projectId/members': (shape, w, s) => {
    const id = projectOf(shape, w);
    return id ? { path: `/projects/${id}/members`, body: { userId: s.userId }, fields: { id } } : undefined;
  },
  'DELETE /projects/:projectId/members/:userId': (shape, w) => {
    const id = projectOf(shape, w);
    return id ? { path: `/projects/${id}/members/${shape === 'own' ? w.ownerUser : w.foreignUser}`, fields: { id } } : undefined;
  },
  'GET /projects/:projectId/policy': inProject('/policy'),
  'POST /projects/:projectId/policy': inProject('/policy', () => ({ document: { version: 1, commands: { default: 'allow' } } })),
  'POST /projects/:projectId/policy/dry-run': inProject('/policy/dry-run', () => ({ sourceText: 'version: 1\n' })),
  'GET /projects/:projectId/policy/versions': inProject('/policy/versions'),
  'GET /projects/:projectId/policy/versions/:version': inProject('/policy/versions/1'),
  'GET /projects/:projectId/policy/diff': inProject('/policy/diff?from=1&to=1'),
  'POST /projects/:projectId/policy/rollback': inProject('/policy/rollback', () => ({ version: 1 })),
  'GET /projects/:projectId/repository': inProject('/repository'),
  'POST /projects/:projectId/repository/access': (shape, w) => {
    const id = projectOf(shape, w);
    // A local repository takes no access: an allowed caller is answered 422, a refused one 403/404 before that.
    return id ? { path: `/projects/${id}/repository/access`, body: { credential: { kind: 'https', username: 'u', password: 'p' } }, fields: { id } } : undefined;
  },
  'DELETE /projects/:projectId/repository/access': (shape, w) => {
    const id = projectOf(shape, w);
    return id ? { path: `/projects/${id}/repository/access`, fields: { id } } : undefined;
  },
  'GET /projects/:projectId/agents': inProject('/agents'),
  'GET /projects/:projectId/mcp': inProject('/mcp'),
  'GET /projects/:projectId/environment': inProject('/environment'),
  'POST /projects/:projectId/environment/prepare': (shape, w, s) => {
    const projectId = projectOf(shape, w);
    // Preparing takes the right to start a session in the project.
    return projectId ? { path: `/projects/${projectId}/environment/prepare`, body: {}, fields: { projectId, userId: s.userId } } : undefined;
  },
  'GET /projects/:projectId/environment/jobs/:jobId/log': (shape, w) => {
    const projectId = projectOf(shape, w);
    if (!projectId) return undefined;
    const job = shape === 'own' ? w.ownJob : shape === 'other' ? w.foreignJob : 'job-unknown';
    return { path: `/projects/${projectId}/environment/jobs/${job}/log`, fields: { projectId } };
  },
  'POST /sessions': (shape, w, s) => {
    const projectId = projectOf(shape, w);
    return projectId ? { path: '/sessions', body: { projectId, instruction: 'do it' }, fields: { projectId, userId: s.userId } } : undefined;
  },
  'POST /sessions/:id/subagents': sessionRoute('/subagents', { agent: 'explore', instruction: 'look around' }),
  'GET /sessions': listBy('/sessions'),
  'GET /sessions/:id': sessionRoute(''),
  'GET /sessions/:id/tool-calls': sessionRoute('/tool-calls'),
  'POST /sessions/:id/stop': sessionRoute('/stop', {}),
  'POST /sessions/:id/revoke': sessionRoute('/revoke', {}),
  'GET /approvals': listBy('/approvals'),
  'GET /approvals/:id': approvalRoute(''),
  // The planted approvals are commands: an allowed reader is told so; everyone else is refused first.
  'GET /approvals/:id/context': (shape, w, s) => {
    const t = approvalRoute('/context?path=src%2Fa.ts&from=1&to=20')(shape, w, s);
    return t && { ...t, answeredBy: { status: 400, message: /is a command, not a change to files/ } };
  },
  'POST /approvals/:id/approve': approvalRoute('/approve', {}),
  'POST /approvals/:id/reject': approvalRoute('/reject', {}),
  'GET /audit': listBy('/audit?limit=1000'),
  'GET /audit/kinds': noneOnly('/audit/kinds'),
  'GET /audit/count': listBy('/audit/count'),
  'GET /audit/verify': noneOnly('/audit/verify'),
  'GET /audit/export': listBy('/audit/export?format=jsonl'),
  'GET /audit/sinks': noneOnly('/audit/sinks'),
  'GET /stats/dashboard': noneOnly('/stats/dashboard?days=30'),
  'POST /exec-hosts/heartbeat': noneOnly('/exec-hosts/heartbeat', { id: 'x', address: 'http://127.0.0.1:9', runtimes: ['runc'], images: [], environments: [], capacity: 1, load: 0, version: '0' }),
  'GET /admin/exec-hosts': noneOnly('/admin/exec-hosts'),
  'POST /admin/exec-hosts/:hostId/drain': noneOnly('/admin/exec-hosts/fixed/drain', {}),
  'POST /admin/exec-hosts/:hostId/undrain': noneOnly('/admin/exec-hosts/fixed/undrain', {}),
  'GET /healthz': noneOnly('/healthz'),
  'GET /readyz': noneOnly('/readyz'),
  'GET /metrics': noneOnly('/metrics'),
  'GET /api/docs': noneOnly('/api/docs'),
};

const routes = listRoutes(CONTROLLERS);
/** Probes and the API description live outside the /api/v1 prefix. */
const UNPREFIXED = new Set(['/healthz', '/readyz', '/metrics', '/api/docs']);
const key = (r: RouteInfo) => `${r.method} ${r.path}`;

it('the matrix covers every route the gateway declares, each with at least one query shape', () => {
  expect(Object.keys(REQUESTS).sort()).toEqual(routes.map(key).sort());
});

interface Expectation {
  allowed: boolean;
  /** A list whose filter is outside the caller's projects: refused, or answered with nothing. */
  emptyOrRefused: boolean;
}

function expectation(r: RouteInfo, t: Target, shape: Shape, ability: AppAbility, readableProjects: string[], w: World): Expectation {
  const p = r.permission;
  if (!p || p.kind === 'public') return { allowed: true, emptyOrRefused: false };
  if (p.kind === 'authenticated') return { allowed: true, emptyOrRefused: false };
  if (t.fields) {
    if (shape === 'unknown') return { allowed: false, emptyOrRefused: false };
    const fields = p.subject === 'Project' && t.fields.projectId ? { id: t.fields.projectId } : t.fields;
    return { allowed: ability.can(p.action, subject(p.subject as AppSubjectName, fields as never) as AppSubject), emptyOrRefused: false };
  }
  const routeLevel = ability.can(p.action, p.subject);
  if (!t.list || shape === 'none') return { allowed: routeLevel, emptyOrRefused: false };
  const filter = shape === 'own' ? w.own : shape === 'other' ? w.foreign : '';
  const readable = routeLevel && readableProjects.includes(filter);
  return { allowed: readable, emptyOrRefused: !readable };
}

let cells = 0;
let wsCells = 0;
afterAll(() => {
  process.stdout.write(`authorization matrix: ${cells} cells (HTTP), ${wsCells} cells (WebSocket)\n`);
});

withTestDatabases((db) => {
  let gw: Gateway;
  let execHost: ExecHostDouble;
  let w: World;
  const subjects: Subject[] = [];

  beforeAll(async () => {
    execHost = await startExecHostDouble();
    gw = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: execHost.url, LEMNISCATE_EXEC_HOST_TOKEN: execHost.token });
    const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    const own = await createProject(gw, admin, 'own-project');
    const foreign = await createProject(gw, admin, `foreign-${FOREIGN_MARK}`);
    const approvals = gw.app.get(ApprovalsService);
    const toolCalls = gw.app.get(ToolCallsRepository);
    const audit = gw.app.get(AuditService);

    const plant = async (token: string, projectId: string, mark: string) => {
      const session = await gw
        .http()
        .post('/api/v1/sessions')
        .set(bearer(token))
        .send({ projectId, instruction: `fix the tests ${mark}-instruction` });
      expect(session.status).toBe(201);
      const approval = await approvals.request({ sessionId: session.body.id, kind: 'command', payload: { command: `echo ${mark}-approval` }, agent: 'general' });
      // A refused call: the dashboard's "most denied" would name it to anyone counting this project.
      await toolCalls.create({
        sessionId: session.body.id,
        seq: 1000,
        name: 'Bash',
        arguments: { command: `echo ${mark}-toolcall` },
        decision: { effect: 'deny', rule: 'commands.forbidden[0]', reason: 'planted' },
        agent: 'general',
      });
      return { session: session.body.id as string, approval: approval.id };
    };

    // The foreign project: its own developer, session, approval, tool call, policy and audit entries.
    const foreignDev = await createUser(gw, admin, 'foreign@example.test', 'developer', [foreign]);
    const f = await plant(foreignDev.token, foreign, FOREIGN_MARK);
    const tokens = await gw.http().get('/api/v1/auth/tokens').set(bearer(foreignDev.token));
    const publish = (projectId: string, mark: string) =>
      gw
        .http()
        .post(`/api/v1/projects/${projectId}/policy`)
        .set(bearer(admin))
        .send({ sourceText: `version: 1\n# ${mark}-policy\n`, comment: `${mark}-comment` });
    expect((await publish(foreign, FOREIGN_MARK)).status).toBe(201);
    await audit.append({ actor: 'system', kind: 'test.marker', projectId: foreign, sessionId: f.session, payload: { note: `${FOREIGN_MARK}-audit` } });

    // The own project: the same, planted by a developer who is not one of the people tried.
    const ownerDev = await createUser(gw, admin, 'owner@example.test', 'developer', [own]);
    const o = await plant(ownerDev.token, own, OWN_MARK);
    expect((await publish(own, OWN_MARK)).status).toBe(201);
    await audit.append({ actor: 'system', kind: 'test.marker', projectId: own, sessionId: o.session, payload: { note: `${OWN_MARK}-audit` } });

    const prepare = async (projectId: string) => {
      execHost.setEnvironment(projectId, { outcome: 'manual' });
      const res = await gw.http().post(`/api/v1/projects/${projectId}/environment/prepare`).set(bearer(admin)).send({});
      expect(res.status).toBe(202);
      return res.body.job.jobId as string;
    };
    w = {
      ownJob: await prepare(own),
      foreignJob: await prepare(foreign),
      own,
      foreign,
      foreignSession: f.session,
      foreignApproval: f.approval,
      foreignUser: foreignDev.userId,
      foreignToken: (tokens.body as { id: string }[])[0]?.id as string,
      ownerSession: o.session,
      ownerApproval: o.approval,
      ownerUser: ownerDev.userId,
    };

    for (const role of ROLES) {
      for (const membership of MEMBERSHIPS) {
        const person = await createUser(gw, admin, `${role}-${membership}@example.test`.replace('_', '-'), role, membership === 'not_member' ? [] : [own]);
        let session = o.session;
        let approval = o.approval;
        if (role === 'developer' && membership !== 'not_member') ({ session, approval } = await plant(person.token, own, `${OWN_MARK}-${membership}`));
        if (membership === 'revoked') expect((await gw.http().delete(`/api/v1/projects/${own}/members/${person.userId}`).set(bearer(admin))).status).toBe(200);
        subjects.push({ role, membership, userId: person.userId, token: person.token, session, approval });
      }
    }
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
  });

  it('no response carries a byte of a project the caller is not a member of, and every allowed read succeeds', async () => {
    const failures: string[] = [];
    for (const s of subjects) {
      const memberships = s.membership === 'member' ? [{ projectId: w.own }] : [];
      const ability = defineAbilitiesFor({ id: s.userId, role: s.role }, memberships);
      for (const r of routes) {
        const build = REQUESTS[key(r)] as Build;
        const readable = memberships.map((m) => m.projectId);
        for (const shape of SHAPES) {
          const t = build(shape, w, s);
          if (!t) continue;
          const expected = expectation(r, t, shape, ability, readable, w);
          // A write that should succeed is not sent here: it would change the world the other cells read.
          if (r.method !== 'GET' && expected.allowed) continue;
          const method = r.method.toLowerCase() as 'get' | 'post' | 'delete';
          const req = gw
            .http()
            [method](`${UNPREFIXED.has(r.path) ? '' : '/api/v1'}${t.path}`)
            .set(bearer(s.token))
            .buffer(true);
          const res = await (t.body === undefined ? req : req.send(t.body as object));
          cells += 1;
          const text = (res.text ?? '').toLowerCase() + JSON.stringify(res.headers).toLowerCase();
          const cell = `${s.role}/${s.membership} ${key(r)} [${shape}] → ${res.status}`;
          if (text.includes(FOREIGN_MARK)) failures.push(`${cell}: the foreign project's marker came back`);
          if (s.membership !== 'member' && text.includes(OWN_MARK)) failures.push(`${cell}: a project the caller is not a member of came back`);
          // Readiness answers 503 here by design: the test gateway has no exec-host to reach.
          const answered =
            (res.status >= 200 && res.status < 300) ||
            (r.path === '/readyz' && res.status === 503) ||
            (t.answeredBy !== undefined && res.status === t.answeredBy.status && t.answeredBy.message.test(String(res.body?.message)));
          if (expected.allowed && !answered) failures.push(`${cell}: an allowed request failed: ${res.text.slice(0, 200)}`);
          if (!expected.allowed && !expected.emptyOrRefused && res.status !== 403 && res.status !== 404) failures.push(`${cell}: expected a refusal`);
          if (expected.emptyOrRefused && res.status >= 200 && res.status < 300) {
            const body: unknown = res.body;
            const lines = Array.isArray(body) ? body.length : res.text.split('\n').filter(Boolean).length;
            if (lines > 0) failures.push(`${cell}: a filter outside the caller's projects returned ${lines} entries`);
          } else if (expected.emptyOrRefused && res.status !== 403 && res.status !== 404) failures.push(`${cell}: expected nothing or a refusal`);
          if (res.status === 403 && !/^As (an administrator|a developer|a security officer) you may not /.test(String(res.body?.message))) failures.push(`${cell}: the refusal is not a sentence`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(cells).toBeGreaterThan(routes.length * subjects.length);
  });

  it('members read their own project: sessions, approvals, tool calls, policy and audit entries carry its marker', async () => {
    for (const s of subjects.filter((x) => x.membership === 'member')) {
      const get = (path: string) => gw.http().get(`/api/v1${path}`).set(bearer(s.token));
      expect((await get(`/sessions/${s.session}`)).text).toContain(OWN_MARK);
      expect((await get(`/sessions/${s.session}/tool-calls`)).text).toContain(`${OWN_MARK}`);
      expect((await get(`/projects/${w.own}/policy`)).text).toContain(`${OWN_MARK}-policy`);
      const dashboard = await get('/stats/dashboard?days=30');
      expect(dashboard.status).toBe(200);
      expect(dashboard.text).toContain(`${OWN_MARK}${s.role === 'developer' ? '-member' : ''}-toolcall`);
      expect(dashboard.text).not.toContain(FOREIGN_MARK);
      if (s.role !== 'developer') {
        const audit = await get('/audit?limit=1000');
        expect(audit.text).toContain(`${OWN_MARK}-audit`);
        expect(audit.text).not.toContain(FOREIGN_MARK);
      }
    }
  });

  it('an id prefix finds only what the caller may read: every role × membership × prefix of each planted session and approval', async () => {
    const failures: string[] = [];
    const planted = [
      { kind: 'session', id: w.foreignSession, project: w.foreign, owner: w.foreignUser },
      { kind: 'approval', id: w.foreignApproval, project: w.foreign, owner: w.foreignUser },
      { kind: 'session', id: w.ownerSession, project: w.own, owner: w.ownerUser },
      { kind: 'approval', id: w.ownerApproval, project: w.own, owner: w.ownerUser },
      ...subjects
        .filter((x) => x.session !== w.ownerSession)
        .flatMap((x) => [
          { kind: 'session', id: x.session, project: w.own, owner: x.userId },
          { kind: 'approval', id: x.approval, project: w.own, owner: x.userId },
        ]),
    ];
    for (const s of subjects) {
      const ability = defineAbilitiesFor({ id: s.userId, role: s.role }, s.membership === 'member' ? [{ projectId: w.own }] : []);
      for (const p of planted) {
        for (const length of [4, 8, 36]) {
          const list = p.kind === 'session' ? '/sessions' : '/approvals';
          const res = await gw
            .http()
            .get(`/api/v1${list}?idPrefix=${p.id.slice(0, length)}`)
            .set(bearer(s.token));
          const cell = `${s.role}/${s.membership} ${list}?idPrefix=${p.id.slice(0, length)} (${p.project === w.own ? 'own' : 'foreign'} ${p.kind})`;
          if (res.status !== 200) {
            failures.push(`${cell}: ${res.status}`);
            continue;
          }
          const found = (res.body as { id: string; projectId: string; userId?: string; sessionId?: string }[]).map((x) => x.id);
          if (!(res.body as { id: string }[]).every((x) => x.id.startsWith(p.id.slice(0, length)))) failures.push(`${cell}: an id without the prefix came back`);
          if (res.text.includes(FOREIGN_MARK)) failures.push(`${cell}: the foreign project's marker came back`);
          if (s.membership !== 'member' && res.text.includes(OWN_MARK)) failures.push(`${cell}: a project the caller is not a member of came back`);
          // Whether the caller may read the planted record: then its whole id finds it.
          const fields = p.kind === 'session' ? { projectId: p.project, userId: p.owner } : { projectId: p.project, sessionUserId: p.owner };
          const readable = ability.can('read', subject(p.kind === 'session' ? 'Session' : 'Approval', fields as never) as AppSubject);
          if (length === 36 && readable && !found.includes(p.id)) failures.push(`${cell}: a record the caller may read was not found`);
          if (!readable && found.includes(p.id)) failures.push(`${cell}: a record the caller may not read was found`);
        }
      }
    }
    expect(failures).toEqual([]);
  });

  it("the sessions list's owner, waiting and time filters never widen what a caller sees: every role × membership × query", async () => {
    const failures: string[] = [];
    // Earlier cells may have answered the planted approvals: the owner's session gets one that waits, whatever its state.
    const repo = gw.app.get(ApprovalsRepository);
    for (const a of await repo.list({ sessionId: w.ownerSession, state: 'pending' })) await repo.answer(a.id, { state: 'rejected', decidedBy: null, reason: 'reset' });
    await repo.create({ sessionId: w.ownerSession, kind: 'command', payload: { command: `echo ${OWN_MARK}-waiting` }, agent: 'general' });
    const queries = (self: string) => [
      `userId=${w.foreignUser}`,
      `userId=${w.ownerUser}`,
      `userId=${self}`,
      'waiting=true',
      'waiting=false',
      'from=2000-01-01T00:00:00.000Z',
      'from=2000-01-01T00:00:00.000Z&to=2100-01-01T00:00:00.000Z',
      `waiting=true&userId=${w.foreignUser}`,
      `projectId=${w.foreign}&userId=${w.foreignUser}&waiting=true`,
      `projectId=${w.own}&userId=${w.ownerUser}&waiting=true`,
    ];
    for (const s of subjects) {
      const ability = defineAbilitiesFor({ id: s.userId, role: s.role }, s.membership === 'member' ? [{ projectId: w.own }] : []);
      for (const q of queries(s.userId)) {
        const res = await gw.http().get(`/api/v1/sessions?${q}`).set(bearer(s.token));
        const cell = `${s.role}/${s.membership} /sessions?${q}`;
        if (res.status !== 200) {
          // Only a filter on a project outside the caller's may be refused outright.
          if (!q.includes(w.foreign) && !(s.membership !== 'member' && q.includes(w.own))) failures.push(`${cell}: ${res.status}`);
          continue;
        }
        const rows = res.body as { id: string; projectId: string; userId: string; ownerEmail: string | null; pendingApprovals: number }[];
        if (res.text.includes(FOREIGN_MARK) || res.text.includes('foreign@example.test')) failures.push(`${cell}: the foreign project or its developer came back`);
        for (const r of rows) {
          if (!ability.can('read', subject('Session', { projectId: r.projectId, userId: r.userId } as never) as AppSubject)) failures.push(`${cell}: ${r.id} came back unreadable`);
          if (q.includes('userId=') && s.role !== 'developer' && !q.includes(`userId=${r.userId}`)) failures.push(`${cell}: ${r.id} belongs to someone else`);
          if (q.startsWith('waiting=true') && r.pendingApprovals < 1) failures.push(`${cell}: ${r.id} waits for nobody`);
        }
        // What a member who may read the planted owner's session must find with the filters that select it.
        const readsOwner = ability.can('read', subject('Session', { projectId: w.own, userId: w.ownerUser } as never) as AppSubject);
        if (readsOwner && (q === 'waiting=true' || q === `userId=${w.ownerUser}` || q.startsWith('from=') || q === `projectId=${w.own}&userId=${w.ownerUser}&waiting=true`)) {
          const owner = rows.find((r) => r.id === w.ownerSession);
          if (!owner) failures.push(`${cell}: the planted session it may read was not found`);
          else if (owner.ownerEmail !== 'owner@example.test' || owner.pendingApprovals !== 1) failures.push(`${cell}: owner ${owner.ownerEmail}, ${owner.pendingApprovals} waiting`);
        }
      }
      // A window that ends before anything started finds nothing, whoever asks.
      const before = await gw.http().get('/api/v1/sessions?to=2000-01-01T00:00:00.000Z').set(bearer(s.token));
      if (before.status !== 200 || (before.body as unknown[]).length !== 0) failures.push(`${s.role}/${s.membership} /sessions?to=2000: ${before.status} ${(before.body as unknown[]).length}`);
    }
    expect(failures).toEqual([]);
  });

  it('the audit count agrees with the list for every role × membership × filter, and counts nothing the list would not show', async () => {
    const failures: string[] = [];
    const filters = [
      '',
      `projectId=${w.own}`,
      `projectId=${w.foreign}`,
      'actor=foreign@example.test',
      'actor=owner@example.test',
      'kind=test.marker',
      `sessionId=${w.foreignSession}`,
      `sessionId=${w.ownerSession}`,
      'from=2000-01-01T00:00:00.000Z',
      'kind=test.marker,session.instruction&from=2000-01-01T00:00:00.000Z',
    ];
    for (const s of subjects) {
      for (const f of filters) {
        const [list, count] = await Promise.all([gw.http().get(`/api/v1/audit?limit=1000&${f}`).set(bearer(s.token)), gw.http().get(`/api/v1/audit/count?${f}`).set(bearer(s.token))]);
        const cell = `${s.role}/${s.membership} ?${f}`;
        if (list.status !== count.status) failures.push(`${cell}: the list answered ${list.status}, the count ${count.status}`);
        else if (list.status === 200 && (list.body as unknown[]).length !== count.body.count) failures.push(`${cell}: ${(list.body as unknown[]).length} listed, ${count.body.count} counted`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('entries that belong to no project are read by administrators only', async () => {
    for (const s of subjects) {
      const res = await gw.http().get('/api/v1/audit?limit=1000').set(bearer(s.token));
      if (s.role === 'developer') continue;
      const unscoped = (res.body as { projectId: string | null }[]).filter((e) => e.projectId === null);
      if (s.role === 'admin') expect(unscoped.length).toBeGreaterThan(0);
      else expect(unscoped).toEqual([]);
    }
  });

  it('verify counts the whole chain without returning any entry', async () => {
    const admin = subjects.find((s) => s.role === 'admin' && s.membership === 'not_member') as Subject;
    const res = await gw.http().get('/api/v1/audit/verify').set(bearer(admin.token));
    expect(res.status).toBe(200);
    expect(res.body.ok).toBe(true);
    expect(res.body.checked).toBeGreaterThan(10);
    expect(Object.keys(res.body).sort()).toEqual(['checked', 'lastHash', 'lastSeq', 'ok']);
  });

  it('the event stream: subscriptions to a foreign session or project are refused, and no foreign event arrives', async () => {
    const failures: string[] = [];
    const clients: [Subject, EventsClient][] = [];
    for (const s of subjects) {
      const client = await EventsClient.connect(gw.baseUrl, { token: s.token });
      clients.push([s, client]);
      const wants = [
        { sessionId: w.foreignSession, ok: false },
        { projectId: w.foreign, ok: false },
        { sessionId: randomUUID(), ok: false },
        { projectId: randomUUID(), ok: false },
        { projectId: w.own, ok: s.membership === 'member' },
        { sessionId: s.session, ok: s.membership === 'member' && (s.role !== 'developer' || s.session !== w.ownerSession) },
      ];
      for (const { ok, ...target } of wants) {
        client.send({ type: 'subscribe', ...target, sinceSeq: 0 });
        const messages = await client.until((m) => m.type === 'subscribed' || m.type === 'error');
        wsCells += 1;
        const last = messages[messages.length - 1] as { type: string };
        const text = JSON.stringify(messages).toLowerCase();
        const cell = `${s.role}/${s.membership} subscribe ${JSON.stringify(target)}`;
        if (last.type !== (ok ? 'subscribed' : 'error')) failures.push(`${cell}: got ${last.type}`);
        if (text.includes(FOREIGN_MARK)) failures.push(`${cell}: a foreign event arrived`);
        if (s.membership !== 'member' && text.includes(OWN_MARK)) failures.push(`${cell}: an event of a project the caller is not a member of arrived`);
      }
    }
    // Live: a new foreign session's events must reach nobody here; a new own one reaches its readers.
    const foreignDev = await tokenFor(gw, 'foreign@example.test', 'a long enough password');
    await gw
      .http()
      .post('/api/v1/sessions')
      .set(bearer(foreignDev.token))
      .send({ projectId: w.foreign, instruction: `live ${FOREIGN_MARK}-live` });
    const ownerDev = await tokenFor(gw, 'owner@example.test', 'a long enough password');
    await gw
      .http()
      .post('/api/v1/sessions')
      .set(bearer(ownerDev.token))
      .send({ projectId: w.own, instruction: `live ${OWN_MARK}-live` });
    for (const [s, client] of clients) {
      if (s.membership === 'member' && s.role !== 'developer') {
        const seen = await client.until((m) => JSON.stringify(m).includes(`${OWN_MARK}-live`));
        if (JSON.stringify(seen).toLowerCase().includes(FOREIGN_MARK)) failures.push(`${s.role}/${s.membership}: a live foreign event arrived`);
      }
      wsCells += 1;
      await client.close();
    }
    expect(failures).toEqual([]);
  });
});
