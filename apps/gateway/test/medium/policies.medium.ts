import { withTestDatabases } from '../support/db';
import { PoliciesService } from '../../src/projects/policies.service';
import { PolicyVersionsRepository } from '../../src/db/repositories/policy-versions.repository';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(60_000);

withTestDatabases((db, kind) => {
  let gw: Gateway;
  let admin: string;
  let project: string;
  beforeAll(async () => {
    gw = await startGateway(db());
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'policies');
  });
  afterAll(async () => {
    await gw?.close();
  });

  const url = (suffix = '') => `/api/v1/projects/${project}/policy${suffix}`;

  it('starts a project under the built-in default policy, nothing free, until one is published', async () => {
    const res = await gw.http().get(url()).set(bearer(admin));
    expect(res.status).toBe(404);
    expect(res.body.message).toBe('Project "policies" has no published policy; the built-in default applies.');
    expect(await gw.app.get(PoliciesService).inForce(project)).toMatchObject({ version: null, versionId: null, policy: { commands: { default: 'ask', free: [] } } });
    const first = await gw
      .http()
      .post(url())
      .set(bearer(admin))
      .send({ document: { version: 1 }, comment: 'start strict' });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ version: 1, document: { commands: { default: 'ask', free: [] } } });
    expect((await auditKinds(gw, ['policy.publish'])).at(-1)).toMatchObject({ payload: { before: null, after: { version: 1 } } });
  });

  it('refuses an invalid policy with the path and what is wrong, and keeps the version in force', async () => {
    const res = await gw.http().post(url()).set(bearer(admin)).send({ sourceText: 'version: 1\ncommands:\n  default: sometimes\n' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('policy_invalid');
    expect(res.body.message).toContain('commands.default');
    expect(res.body.details.issues[0].path).toBe('commands.default');
    expect((await gw.http().get(url()).set(bearer(admin))).body.version).toBe(1);
  });

  it('refuses a command both free and forbidden with the sentence lemni policy check prints', async () => {
    for (const body of [{ sourceText: 'version: 1\ncommands:\n  free: [curl]\n' }, { document: { version: 1, commands: { free: ['make deploy'], forbidden: ['make deploy'] } } }]) {
      const rule = 'sourceText' in body ? 'curl' : 'make deploy';
      const res = await gw.http().post(url()).set(bearer(admin)).send(body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        code: 'policy_invalid',
        message: `The policy was not published: commands.free[0]: \`${rule}\` is also forbidden by commands.forbidden[0]; a command cannot be both.`,
        details: { issues: [{ path: 'commands.free[0]', message: `\`${rule}\` is also forbidden by commands.forbidden[0]; a command cannot be both` }] },
      });
    }
    expect((await gw.http().get(url()).set(bearer(admin))).body.version).toBe(1);
  });

  it('refuses a body with both or neither of document and sourceText', async () => {
    const both = await gw
      .http()
      .post(url())
      .set(bearer(admin))
      .send({ document: { version: 1 }, sourceText: 'version: 1' });
    expect(both.status).toBe(400);
    expect(both.body.message).toContain('give exactly one of "document" or "sourceText"');
  });

  it('publishes YAML with its comments kept, in force for the very next decision, audited with before and after', async () => {
    const text = '# build commands are fine here\nversion: 1\ncommands:\n  free: ["npm test"]\n  reapproval: exempt\n';
    const res = await gw.http().post(url()).set(bearer(admin)).send({ sourceText: text, comment: 'let tests run' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ version: 2, sourceText: text, comment: 'let tests run' });
    const inForce = await gw.app.get(PoliciesService).inForce(project);
    expect(inForce).toMatchObject({ version: 2, policy: { commands: { free: ['npm test'], reapproval: 'exempt' } } });
    const entry = (await auditKinds(gw, ['policy.publish'])).at(-1);
    expect(entry).toMatchObject({ projectId: project, payload: { before: { version: 1 }, after: { version: 2 }, comment: 'let tests run' } });
  });

  it('lists versions newest first, shows one, and diffs two', async () => {
    const list = await gw.http().get(url('/versions')).set(bearer(admin));
    expect(list.body.map((v: { version: number }) => v.version)).toEqual([2, 1]);
    expect(list.body[0]).not.toHaveProperty('document');
    const show = await gw.http().get(url('/versions/1')).set(bearer(admin));
    expect(show.body.version).toBe(1);
    const diff = await gw.http().get(url('/diff?from=1&to=2')).set(bearer(admin));
    expect(diff.status).toBe(200);
    expect(diff.body.patch).toContain('--- policy v1');
    expect(diff.body.patch).toContain('+# build commands are fine here');
    const missing = await gw.http().get(url('/versions/9')).set(bearer(admin));
    expect(missing.status).toBe(404);
    expect(missing.body.message).toBe('Project "policies" has no policy version 9.');
    const badQuery = await gw.http().get(url('/diff?from=one&to=2')).set(bearer(admin));
    expect(badQuery.status).toBe(400);
    expect(badQuery.body.message).toContain('query.from');
  });

  it('rolls back by publishing the old version again as the newest', async () => {
    const res = await gw.http().post(url('/rollback')).set(bearer(admin)).send({ version: 1, comment: 'too lax' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ version: 3, comment: 'Rollback to version 1: too lax' });
    expect((await gw.app.get(PoliciesService).inForce(project)).policy.commands.free).toEqual([]);
    const entry = (await auditKinds(gw, ['policy.rollback'])).at(-1);
    expect(entry).toMatchObject({ payload: { before: { version: 2 }, after: { version: 3 }, rolledBackTo: 1 } });
  });

  it('asks which version is in force on every call (P3): PostgreSQL reads it each time, PGlite keeps it until a publish, even one landing during a read', async () => {
    const other = await createProject(gw, admin, 'policies-in-force');
    const versions = gw.app.get(PolicyVersionsRepository);
    const publication = (n: number) => ({ document: { version: 1, commands: { free: [`make v${n}`] } }, sourceText: `v${n}`, authorId: null });
    const first = await versions.publish(other, publication(1));
    expect(await versions.currentVersion(other)).toEqual({ id: first!.id, version: 1 });
    const reads = jest.spyOn((versions as unknown as { db: { select: () => unknown } }).db, 'select');
    expect(await versions.currentVersion(other)).toEqual({ id: first!.id, version: 1 });
    expect(reads).toHaveBeenCalledTimes(kind === 'pglite' ? 0 : 1);
    reads.mockClear();
    // A read started before a publish answers what it read, and that is not kept past the publish.
    const [during, second] = await Promise.all([versions.currentVersion(other), versions.publish(other, publication(2))]);
    expect([first!.id, second!.id]).toContain(during?.id);
    expect(await versions.currentVersion(other)).toEqual({ id: second!.id, version: 2 });
    expect((await gw.app.get(PoliciesService).inForce(other)).policy.commands.free).toEqual(['make v2']);
    reads.mockClear();
    expect(await versions.currentVersion(other)).toEqual({ id: second!.id, version: 2 });
    expect(reads).toHaveBeenCalledTimes(kind === 'pglite' ? 0 : 1);
  });

  it('refuses a duplicate project name with a sentence', async () => {
    const res = await gw.http().post('/api/v1/projects').set(bearer(admin)).send({ name: 'policies', repositorySource: '/x' });
    expect(res.status).toBe(409);
    expect(res.body.message).toBe('A project named "policies" already exists.');
  });
});
