import { fillPath, GatewayRoutes, pathParams, type GatewayRoute } from '@lemniscate/contracts';
import { FakeGateway, GATEWAY_PASSPHRASE_SENTENCE, GOOD_TOKEN, approvalView, fakeKeyFingerprint, sessionView } from '../../support/fake-gateway';
import { openSshKey } from '../../support/ssh-keys';
import { GatewayClient } from '../../../src/gateway/gateway-client';

/**
 * The CLI's fake gateway refuses what the gateway would refuse, from the same table (libs/contracts'
 * GatewayRoutes), so a CLI request that drifts from the gateway's contract fails a unit test. The
 * cases are generated from the table: every route with a body, every route with a query.
 */
let gateway: FakeGateway;
let client: GatewayClient;

beforeEach(async () => {
  gateway = await new FakeGateway().start();
  client = new GatewayClient(gateway.url, GOOD_TOKEN);
});
afterEach(async () => {
  await gateway.close();
});

const table = Object.entries(GatewayRoutes) as [string, GatewayRoute][];
const apiRoutes = table.filter(([, r]) => r.path.startsWith('/api/v1/'));
const sampleParams = (r: GatewayRoute) => Object.fromEntries(pathParams(r.path).map((n) => [n, n === 'version' ? '1' : 's1']));
/** A query that names its extra parameters' type (zod's catchall, not strict's never) accepts them on purpose. */
const acceptsOtherNames = (r: GatewayRoute) => {
  const catchall = (r.query as { _zod?: { def?: { catchall?: { _zod?: { def?: { type?: string } } } } } } | undefined)?._zod?.def?.catchall;
  return catchall !== undefined && catchall._zod?.def?.type !== 'never';
};
const relative = (r: GatewayRoute, query = '') => `${fillPath(r.path, sampleParams(r)).slice('/api/v1'.length)}${query}`;

describe('the fake gateway checks every request against GatewayRoutes', () => {
  it('refuses the @mention body that once broke mentions (an unknown "background" field), as the gateway does', async () => {
    gateway.sessions.set('s1', sessionView('s1'));
    const res = await client.raw('POST', '/sessions/s1/subagents', { body: { agent: 'explore', instruction: 'find the parsers', background: true } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'validation_failed', message: 'The request is invalid: body: unknown field "background".' });
    expect(gateway.takeDrift()).toEqual([expect.objectContaining({ method: 'POST', path: '/api/v1/sessions/s1/subagents', message: 'The request is invalid: body: unknown field "background".' })]);
    expect(gateway.sessions.size).toBe(1);
  });

  it.each(apiRoutes.filter(([, r]) => r.body !== undefined))('%s: a body with an unknown field is refused and recorded as drift', async (_, r) => {
    const res = await client.raw(r.method, relative(r), { body: { zzUnknownField: true } });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; message: string };
    expect(body.code).toBe('validation_failed');
    expect(body.message).toContain('unknown field "zzUnknownField"');
    expect(gateway.takeDrift().map((d) => d.message)).toEqual([body.message]);
  });

  it("the routes whose query accepts other names are only the identity provider's answer", () => {
    expect(apiRoutes.filter(([, r]) => acceptsOtherNames(r)).map(([name]) => name)).toEqual(['oidcCallback']);
  });

  it.each(apiRoutes.filter(([, r]) => r.query !== undefined && !acceptsOtherNames(r)))('%s: a query with an unknown parameter is refused and recorded as drift', async (_, r) => {
    const res = await client.raw(r.method, relative(r), { query: { zzUnknownParam: '1' } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toContain('query: unknown field "zzUnknownParam"');
    expect(gateway.takeDrift()).toHaveLength(1);
  });

  it.each(apiRoutes.filter(([, r]) => r.params !== undefined))('%s: a path value the contract refuses is refused and recorded as drift', async (_, r) => {
    const bad = Object.fromEntries(pathParams(r.path).map((n) => [n, n === 'version' ? 'latest' : n === 'hostId' ? 'Not_A_Host' : 'a.b']));
    const res = await client.raw(r.method, fillPath(r.path, bad).slice('/api/v1'.length), r.body !== undefined ? { body: {} } : {});
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/^The request is invalid: params\./);
    expect(gateway.takeDrift()).toHaveLength(1);
  });

  it('a route the gateway does not serve is drift too', async () => {
    const res = await client.raw('PUT', '/sessions/s1', { body: {} });
    expect(res.status).toBe(404);
    expect(gateway.takeDrift()).toEqual([expect.objectContaining({ message: 'The gateway serves no route PUT /api/v1/sessions/s1 (libs/contracts GatewayRoutes).' })]);
  });

  it('drift nobody took fails the test at close(), even when the CLI reported the refusal', async () => {
    const other = await new FakeGateway().start();
    const res = await new GatewayClient(other.url, GOOD_TOKEN).raw('POST', '/sessions', { body: { projectId: 'p1', instruction: 'x', background: true } });
    expect(res.status).toBe(400);
    await expect(other.close()).rejects.toThrow('POST /api/v1/sessions: The request is invalid: body: unknown field "background".');
  });

  it("an answer of the fake that breaks the route's response schema is reported, not passed to the CLI", async () => {
    gateway.auditVerify = { ok: 'yes' };
    await expect(client.auditVerify()).rejects.toThrow(/HTTP 500|response/);
    expect(gateway.takeDrift()[0]?.message).toMatch(/^the fake gateway's own answer breaks the response schema: response\.ok/);
  });
});

describe('the fake plays the repository routes as the gateway does', () => {
  it("refuses an access its source cannot use with the gateway's sentence, an unknown project with a 404, and never shows the secret", async () => {
    gateway.projects.push({ id: 'p3', name: 'api', repositorySource: 'ssh://git@git.example.org:2222/team/api.git', defaultRef: 'main', createdAt: new Date().toISOString() });
    const key = openSshKey().privateKey;
    await expect(client.setRepositoryAccess('p3', { credential: { kind: 'ssh', privateKey: key } })).rejects.toThrow(
      'The repository access of project "api" cannot be set: an SSH repository needs the server\'s host key in knownHosts',
    );
    await expect(client.setRepositoryAccess('p3', { credential: { kind: 'ssh', privateKey: openSshKey({ passphrase: true }).privateKey }, knownHosts: 'h ssh-ed25519 AAAA\n' })).rejects.toThrow(
      GATEWAY_PASSPHRASE_SENTENCE,
    );
    await expect(client.repositoryAccess('p9')).rejects.toThrow('There is no project p9.');
    const view = await client.setRepositoryAccess('p3', { credential: { kind: 'ssh', privateKey: key }, knownHosts: 'h ssh-ed25519 AAAA\n' });
    expect(view.credential).toEqual({ kind: 'ssh', username: null, keyFingerprint: fakeKeyFingerprint(key) });
    expect(JSON.stringify(await client.repositoryAccess('p3'))).not.toContain(key.split('\n')[1]);
    expect(gateway.takeDrift()).toEqual([]);
  });
});

describe("every GatewayClient call is a request the gateway's table accepts", () => {
  it('sends no request the gateway would refuse, and names a route of the table each time', async () => {
    const session = sessionView('s1');
    gateway.sessions.set('s1', session);
    gateway.approvals = [approvalView('a1', { sessionId: 's1' }), approvalView('a2', { sessionId: 's1' })];
    const web = await client.login('dev@example.org', 'correct horse');
    await new GatewayClient(gateway.url, undefined).createToken('laptop', web);
    await client.me();
    await client.projectByName('demo');
    await client.publishPolicy('p1', 'version: 1\n', 'a comment');
    gateway.projects.push({ id: 'p2', name: 'web', repositorySource: 'https://git.example.org/team/web.git', defaultRef: 'main', createdAt: new Date().toISOString() });
    await client.setRepositoryAccess('p2', { credential: { kind: 'https', username: 'ci-bot', password: 'a token' }, caPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' });
    await client.repositoryAccess('p2');
    await client.clearRepositoryAccess('p2');
    await client.projectAgents('p1');
    const started = await client.startSession({
      projectId: 'p1',
      instruction: 'fix the tests',
      headless: true,
      model: 'scripted:/tmp/x.json',
      includedUncommitted: true,
      baseCommit: 'abcdef1',
      startingPatch: 'diff',
    });
    await client.listSessions({ projectId: 'p1', status: 'running', limit: 5 });
    await client.getSession(started.id);
    await client.toolCalls(started.id);
    await client.startSubagent('s1', 'explore', 'find the parsers');
    await client.listApprovals({ state: 'pending', sessionId: 's1' });
    await client.getApproval('a1');
    await client.answerApproval('a1', 'approve', { rememberCommand: true });
    await client.answerApproval('a2', 'reject', { reason: 'not now' });
    await client.auditVerify({ seq: 3, hash: 'a'.repeat(64) });
    await client.auditExport({ format: 'csv', project: 'p1', user: 'u7', from: '2026-11-01T00:00:00.000Z' }, () => undefined);
    await client.stopSession(started.id, 'enough');
    await client.revokeSession('s1');
    expect(gateway.takeDrift()).toEqual([]);
    expect(gateway.requests.filter((q) => q.route === undefined)).toEqual([]);
    expect([...new Set(gateway.requests.map((q) => q.route))].sort()).toEqual(
      [
        'login',
        'createToken',
        'me',
        'listProjects',
        'publishPolicy',
        'setRepositoryAccess',
        'repositoryAccess',
        'clearRepositoryAccess',
        'projectAgents',
        'createSession',
        'listSessions',
        'getSession',
        'sessionToolCalls',
        'startSubagent',
        'listApprovals',
        'getApproval',
        'approve',
        'reject',
        'auditVerify',
        'auditExport',
        'stopSession',
        'revokeSession',
      ].sort(),
    );
  });
});
