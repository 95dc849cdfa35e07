import { CONTROLLERS } from '../../src/app.module';
import { listRoutes } from '../../src/openapi/routes';
import { withTestDatabases } from '../support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(120_000);

const NUL = 'a\u0000b';

/** A YAML "billion laughs": seven levels of nine aliases each. */
function aliasBomb(): string {
  const lines = ['version: 1', 'a: &a [x, x, x, x, x, x, x, x, x]'];
  for (const [i, name] of ['b', 'c', 'd', 'e', 'f', 'g'].entries()) lines.push(`${name}: &${name} [${Array(9).fill(`*${'abcdef'[i]}`).join(', ')}]`);
  return `${lines.join('\n')}\n`;
}

/**
 * Hostile input gets a clear 400 and changes nothing: a NUL character anywhere in any body or query
 * (PostgreSQL cannot store one in text), and a YAML alias bomb as a policy's source.
 */
withTestDatabases((db) => {
  let gw: Gateway;
  let admin: string;
  let project: string;
  beforeAll(async () => {
    gw = await startGateway(db());
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'bad-input');
  });
  afterAll(async () => {
    await gw?.close();
  });

  const fill = (path: string) => `/api/v1${path.replace(':projectId', project).replace(/:[A-Za-z]+/g, '00000000-0000-4000-8000-000000000000')}`;
  const routes = listRoutes(CONTROLLERS);

  it.each(routes.filter((r) => r.contract.body).map((r) => [`${r.method} ${r.path}`, r] as const))('%s refuses a NUL in its body with a 400 naming the field', async (_name, route) => {
    const method = route.method.toLowerCase() as 'post' | 'put' | 'patch' | 'delete';
    const res = await gw
      .http()
      [method](fill(route.path))
      .set(bearer(admin))
      .send({ note: NUL, nested: { list: ['ok', NUL] } });
    // Sign-in is open to anyone; every other route checks rights first, and an administrator has them here.
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.message).toContain('body.note: contains a NUL character');
    expect(res.body.message).toContain('body.nested.list.1: contains a NUL character');
  });

  it.each(routes.filter((r) => r.contract.query && r.method === 'GET').map((r) => [`${r.method} ${r.path}`, r] as const))('%s refuses a NUL in its query with a 400', async (_name, route) => {
    const res = await gw
      .http()
      .get(`${fill(route.path)}?x=${encodeURIComponent(NUL)}`)
      .set(bearer(admin));
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('query.x: contains a NUL character');
  });

  it.each(routes.filter((r) => r.path.includes(':')).map((r) => [`${r.method} ${r.path}`, r] as const))('%s answers a NUL in a path parameter with a 4xx, never a 500', async (_name, route) => {
    const method = route.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    const res = await gw
      .http()
      [method](`/api/v1${route.path.replace(/:[A-Za-z]+/g, '%00')}`)
      .set(bearer(admin))
      .send({});
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(typeof res.body.message).toBe('string');
  });

  it.each([
    ['waiting=maybe', 'query.waiting'],
    ['from=yesterday', 'query.from'],
    ['to=2026-13-45', 'query.to'],
    ['userId=', 'query.userId'],
    ['owner=me', 'query: unknown field "owner"'],
  ])('the sessions list refuses %s with a sentence naming the field', async (query, field) => {
    const res = await gw.http().get(`/api/v1/sessions?${query}`).set(bearer(admin));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.message).toContain(field);
  });

  it('refuses NUL in the fields people type, with otherwise valid bodies, and stores nothing', async () => {
    const before = (await gw.http().get('/api/v1/sessions').set(bearer(admin))).body.length as number;
    const cases: [string, string, object][] = [
      ['/api/v1/sessions', 'body.instruction', { projectId: project, instruction: `fix ${NUL}` }],
      ['/api/v1/sessions', 'body.branch', { projectId: project, instruction: 'fix it', branch: NUL }],
      [`/api/v1/projects/${project}/policy`, 'body.comment', { document: { version: 1 }, comment: NUL }],
      [`/api/v1/projects/${project}/policy`, 'body.sourceText', { sourceText: `version: 1\n# ${NUL}\n` }],
      [`/api/v1/projects/${project}/policy`, 'body.document.commands.free.0', { document: { version: 1, commands: { free: [NUL] } } }],
      ['/api/v1/users', 'body.displayName', { email: 'nul@example.test', displayName: NUL, role: 'developer', password: 'a long enough password' }],
    ];
    for (const [url, field, body] of cases) {
      const res = await gw.http().post(url).set(bearer(admin)).send(body);
      expect({ url, field, status: res.status, message: res.body.message }).toMatchObject({ status: 400, message: expect.stringContaining(`${field}: contains a NUL character`) });
    }
    expect((await gw.http().get('/api/v1/sessions').set(bearer(admin))).body).toHaveLength(before);
    expect((await gw.http().get(`/api/v1/projects/${project}/policy`).set(bearer(admin))).status).toBe(404);
    expect((await gw.http().get('/api/v1/users').set(bearer(admin))).body.map((u: { email: string }) => u.email)).not.toContain('nul@example.test');
  });

  it('refuses a YAML alias bomb as a policy source with a 400 and a sentence, on publish and on dry run', async () => {
    const publish = await gw.http().post(`/api/v1/projects/${project}/policy`).set(bearer(admin)).send({ sourceText: aliasBomb() });
    expect(publish.status).toBe(400);
    expect(publish.body.code).toBe('policy_invalid');
    expect(publish.body.message).toMatch(/aliases \(\*name\) expand to more than 100 copies/);
    const dry = await gw.http().post(`/api/v1/projects/${project}/policy/dry-run`).set(bearer(admin)).send({ sourceText: aliasBomb() });
    expect(dry.status).toBeLessThan(500);
    expect(JSON.stringify(dry.body)).toMatch(/expand to more than 100 copies/);
    expect((await gw.http().get(`/api/v1/projects/${project}/policy`).set(bearer(admin))).status).toBe(404);
  });
});
