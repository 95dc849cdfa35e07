import { withTestDatabases } from '../support/db';
import { SessionsService } from '../../src/sessions/sessions.service';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

withTestDatabases((db) => {
  let gw: Gateway;
  let admin: string;
  let project: string;

  beforeAll(async () => {
    gw = await startGateway(db());
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'dry');
    const dev = await createUser(gw, admin, 'dev@example.test', 'developer', [project]);
    const session = await gw.http().post('/api/v1/sessions').set(bearer(dev.token)).send({ projectId: project, instruction: 'build it' });
    const sessions = gw.app.get(SessionsService);
    await sessions.recordToolCall(session.body.id, { name: 'Bash', arguments: { command: 'npm test' }, decision: { effect: 'ask', rule: 'commands.default', reason: 'asked' }, agent: 'general' });
    await sessions.recordToolCall(session.body.id, { name: 'Bash', arguments: { command: 'ls' }, decision: { effect: 'ask', rule: 'commands.default', reason: 'asked' }, agent: 'general' });
  });
  afterAll(async () => gw?.close());

  it('lists the decisions a draft would change, and only those', async () => {
    const res = await gw.http().post(`/api/v1/projects/${project}/policy/dry-run`).set(bearer(admin)).send({ sourceText: 'version: 1\ncommands:\n  free: ["npm test"]\n', sessions: 5 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ sessionsReplayed: 1, toolCallsReplayed: 2 });
    expect(res.body.changes).toEqual([
      expect.objectContaining({ tool: 'Bash', subject: 'npm test', before: expect.objectContaining({ effect: 'ask' }), after: expect.objectContaining({ effect: 'allow', rule: 'commands.free[0]' }) }),
    ]);
  });

  it('refuses an invalid draft with the path of the problem, and publishes nothing', async () => {
    const res = await gw.http().post(`/api/v1/projects/${project}/policy/dry-run`).set(bearer(admin)).send({ sourceText: 'version: 1\ncommands:\n  free: [""]\n' });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/commands\.free\[0\]/);
    const versions = await gw.http().get(`/api/v1/projects/${project}/policy/versions`).set(bearer(admin));
    expect(versions.body).toEqual([]);
  });

  it('refuses a body without a draft, naming the field', async () => {
    const res = await gw.http().post(`/api/v1/projects/${project}/policy/dry-run`).set(bearer(admin)).send({ sessions: 5 });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/sourceText/);
  });
});
