import { ProjectMemberView, ProjectView } from '@lemniscate/contracts';
import { z } from 'zod';
import { withTestDatabases } from '../support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(300_000);

/**
 * Project administration after creation, on both databases: changing the repository source and the
 * default ref (audited with before and after; a no-op changes and records nothing; every malformed
 * body refused with a sentence; a new source refused while repository access is set, so a credential
 * is never sent where it was not set for), and the member list with emails and roles.
 */
withTestDatabases((db) => {
  let gw: Gateway;
  let admin: string;
  let projectId: string;

  beforeAll(async () => {
    gw = await startGateway(db());
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    projectId = await createProject(gw, admin, 'administered');
  });
  afterAll(async () => {
    await gw?.close();
  });

  const update = (id: string, body: unknown, token = admin) =>
    gw
      .http()
      .post(`/api/v1/projects/${id}`)
      .set(bearer(token))
      .send(body as object);
  const auditOf = async (kind: string) => {
    const res = await gw.http().get(`/api/v1/audit?kind=${kind}&projectId=${projectId}&limit=100`).set(bearer(admin));
    return res.body as { payload: Record<string, unknown>; actor: string }[];
  };

  it('changes the default ref and the source, and records before and after', async () => {
    const res = await update(projectId, { defaultRef: 'release', repositorySource: '/srv/git/moved.git' });
    expect(res.status).toBe(200);
    expect(ProjectView.parse(res.body)).toMatchObject({ id: projectId, defaultRef: 'release', repositorySource: '/srv/git/moved.git' });
    const shown = await gw.http().get(`/api/v1/projects/${projectId}`).set(bearer(admin));
    expect(shown.body).toMatchObject({ defaultRef: 'release', repositorySource: '/srv/git/moved.git' });
    const [entry] = await auditOf('project.update');
    expect(entry?.payload).toEqual({
      name: 'administered',
      before: { defaultRef: 'main', repositorySource: '/srv/git/administered.git' },
      after: { defaultRef: 'release', repositorySource: '/srv/git/moved.git' },
    });
  });

  it('a change to what is already there records nothing', async () => {
    const before = (await auditOf('project.update')).length;
    const res = await update(projectId, { defaultRef: 'release' });
    expect(res.status).toBe(200);
    expect((await auditOf('project.update')).length).toBe(before);
  });

  it.each([
    [{}, 'name at least one of repositorySource and defaultRef to change'],
    [{ defaultRef: '' }, 'defaultRef: must not be empty'],
    [{ defaultRef: 'x'.repeat(256) }, 'defaultRef'],
    [{ repositorySource: '' }, 'repositorySource'],
    [{ repositorySource: 'ftp://example.test/x.git' }, 'repositorySource'],
    [{ name: 'renamed' }, 'unknown field "name"'],
    [{ defaultRef: 7 }, 'defaultRef'],
  ])('refuses %j with a sentence and changes nothing', async (body, said) => {
    const res = await update(projectId, body);
    expect(res.status).toBe(400);
    expect(res.body.message).toContain(said);
    expect((await gw.http().get(`/api/v1/projects/${projectId}`).set(bearer(admin))).body).toMatchObject({ defaultRef: 'release', repositorySource: '/srv/git/moved.git' });
  });

  it('an unknown project is 404 and a developer or officer is refused', async () => {
    expect((await update('00000000-0000-4000-8000-000000000000', { defaultRef: 'x' })).status).toBe(404);
    const dev = await createUser(gw, admin, 'dev-admin-test@example.test', 'developer', [projectId]);
    const officer = await createUser(gw, admin, 'officer-admin-test@example.test', 'security_officer', [projectId]);
    for (const token of [dev.token, officer.token]) {
      const res = await update(projectId, { defaultRef: 'hijacked' }, token);
      expect(res.status).toBe(403);
      expect(res.body.message).toMatch(/^As (a developer|a security officer) you may not /);
      expect((await gw.http().get(`/api/v1/projects/${projectId}/members`).set(bearer(token))).status).toBe(403);
    }
  });

  it('lists the members with email and role, for administrators', async () => {
    const res = await gw.http().get(`/api/v1/projects/${projectId}/members`).set(bearer(admin));
    expect(res.status).toBe(200);
    const members = z.array(ProjectMemberView).parse(res.body);
    expect(members.map((m) => [m.email, m.role])).toEqual(
      [
        [ADMIN_EMAIL, 'admin'],
        ['dev-admin-test@example.test', 'developer'],
        ['officer-admin-test@example.test', 'security_officer'],
      ].sort((a, b) => (a[0] as string).localeCompare(b[0] as string)),
    );
  });

  it('a new source is refused while repository access is set; the ref may still change', async () => {
    const byUrl = await gw.http().post('/api/v1/projects').set(bearer(admin)).send({ name: 'with-credential', repositorySource: 'https://git.example.test/org/app.git' });
    expect(byUrl.status).toBe(201);
    const id = byUrl.body.id as string;
    const set = await gw
      .http()
      .post(`/api/v1/projects/${id}/repository/access`)
      .set(bearer(admin))
      .send({ credential: { kind: 'https', username: 'ci', password: 'token-never-elsewhere' } });
    expect(set.status).toBe(200);
    const moved = await update(id, { repositorySource: 'https://evil.example.test/org/app.git' });
    expect(moved.status).toBe(409);
    expect(moved.body.message).toBe(
      'Project "with-credential" has repository access set for https://git.example.test/org/app.git; clear it first (`lemni repository clear --project with-credential`), then change the source and set the access again for the new one, so a credential is never sent where it was not set for.',
    );
    expect((await update(id, { defaultRef: 'develop' })).status).toBe(200);
    expect((await gw.http().delete(`/api/v1/projects/${id}/repository/access`).set(bearer(admin))).status).toBe(200);
    const after = await update(id, { repositorySource: 'https://git2.example.test/org/app.git' });
    expect(after.status).toBe(200);
    expect(after.body.repositorySource).toBe('https://git2.example.test/org/app.git');
  });
});
