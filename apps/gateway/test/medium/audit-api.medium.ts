import { withTestDatabases } from '../support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(60_000);

withTestDatabases((db) => {
  let gw: Gateway;
  let admin: string;
  let officer: string;
  let project: string;
  beforeAll(async () => {
    gw = await startGateway(db());
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'audited');
    officer = (await createUser(gw, admin, 'officer@example.test', 'security_officer', [project])).token;
    await gw.http().post('/api/v1/auth/login').send({ email: 'officer@example.test', password: 'wrong password' });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('filters by project, kind and time, newest first by default', async () => {
    const res = await gw.http().get(`/api/v1/audit?projectId=${project}&kind=project.create,policy.publish`).set(bearer(officer));
    expect(res.status).toBe(200);
    expect(res.body.map((e: { kind: string }) => e.kind)).toEqual(['project.create']);
    // A failed sign-in belongs to no project: administrators read it, security officers do not (C1).
    const failed = await gw.http().get('/api/v1/audit?kind=auth.login_failed').set(bearer(admin));
    expect(failed.body[0]).toMatchObject({ actor: 'anonymous', payload: { email: 'officer@example.test' } });
    expect((await gw.http().get('/api/v1/audit?kind=auth.login_failed').set(bearer(officer))).body).toEqual([]);
    const future = await gw
      .http()
      .get(`/api/v1/audit?from=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)
      .set(bearer(officer));
    expect(future.body).toEqual([]);
    const bad = await gw.http().get('/api/v1/audit?kind=DROP TABLE').set(bearer(officer));
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('query.kind');
  });

  it('the server owns the list of kinds: a kind it never records is refused, in the list and in the export', async () => {
    const kinds = await gw.http().get('/api/v1/audit/kinds').set(bearer(officer));
    expect(kinds.status).toBe(200);
    expect(kinds.body.kinds).toEqual(expect.arrayContaining(['session.instruction', 'auth.login_failed', 'policy.publish']));
    for (const path of ['/api/v1/audit?kind=nope', '/api/v1/audit?kind=project.create,nope', '/api/v1/audit/export?kind=nope&format=csv']) {
      const res = await gw.http().get(path).set(bearer(officer));
      expect([path, res.status]).toEqual([path, 400]);
      expect(res.body.message).toMatch(/^The gateway records no audit entries of kind "nope"; the kinds it records are listed by GET \/api\/v1\/audit\/kinds/);
    }
    // Every kind the server lists is accepted as a filter.
    const all = await gw
      .http()
      .get(`/api/v1/audit?kind=${(kinds.body.kinds as string[]).join(',')}`)
      .set(bearer(officer));
    expect(all.status).toBe(200);
    expect(all.body.length).toBeGreaterThan(0);
  });

  it('a person is found by email, and entries name them by email and display name', async () => {
    for (const actor of [ADMIN_EMAIL, `user:${ADMIN_EMAIL}`, ADMIN_EMAIL.toUpperCase()]) {
      const res = await gw
        .http()
        .get(`/api/v1/audit?projectId=${project}&actor=${encodeURIComponent(actor)}`)
        .set(bearer(officer));
      expect([actor, res.status]).toEqual([actor, 200]);
      expect(res.body.map((e: { kind: string }) => e.kind)).toContain('project.create');
      for (const e of res.body) expect(e.actorIdentity).toMatchObject({ email: ADMIN_EMAIL, displayName: expect.any(String) });
    }
    // The export names people too: JSONL carries actorIdentity, CSV two more columns.
    const jsonl = await gw
      .http()
      .get(`/api/v1/audit/export?projectId=${project}&actor=${encodeURIComponent(ADMIN_EMAIL)}&format=jsonl`)
      .set(bearer(officer))
      .buffer(true)
      .parse((res, cb) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => cb(null, text));
      });
    const exported = String(jsonl.body)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { actorIdentity: unknown });
    expect(exported.length).toBeGreaterThan(0);
    for (const e of exported) expect(e.actorIdentity).toMatchObject({ email: ADMIN_EMAIL });
    const csv = await gw
      .http()
      .get(`/api/v1/audit/export?projectId=${project}&actor=${encodeURIComponent(ADMIN_EMAIL)}&format=csv`)
      .set(bearer(officer));
    expect(csv.text.split('\r\n')[0]).toBe('seq,at,actor,actor_email,actor_name,kind,project_id,session_id,tool,command,path,decision,rule,reason,approval_id,answer,exit_code,details,prev_hash,hash');
    expect(csv.text.split('\r\n')[1]).toContain(`,${ADMIN_EMAIL},`);
    const nobody = await gw.http().get(`/api/v1/audit?projectId=${project}&actor=nobody@example.test`).set(bearer(officer));
    expect([nobody.status, nobody.body]).toEqual([200, []]);
  });

  it('exports JSONL and CSV as attachments', async () => {
    const jsonl = await gw
      .http()
      .get(`/api/v1/audit/export?projectId=${project}&format=jsonl`)
      .set(bearer(officer))
      .buffer(true)
      .parse((res, cb) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => cb(null, text));
      });
    expect(jsonl.status).toBe(200);
    expect(jsonl.headers['content-type']).toMatch(/^application\/x-ndjson/);
    expect(jsonl.headers['content-disposition']).toContain('lemniscate-audit.jsonl');
    const lines = String(jsonl.body)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { projectId: string });
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l.projectId).toBe(project);
    const csv = await gw.http().get('/api/v1/audit/export?format=csv').set(bearer(officer));
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    expect(csv.text.split('\n')[0]).toMatch(/^seq,/);
  });

  it('verifies the chain, and names the entry a superuser altered', async () => {
    const clean = await gw.http().get('/api/v1/audit/verify').set(bearer(officer));
    expect(clean.body).toMatchObject({ ok: true });
    const victim = (await gw.http().get('/api/v1/audit?kind=project.create').set(bearer(officer))).body[0].seq as number;
    await db().superuser('ALTER TABLE audit_log DISABLE TRIGGER USER');
    await db().superuser(`UPDATE audit_log SET payload = replace(payload, 'audited', 'innocent') WHERE seq = $1`, [victim]);
    await db().superuser('ALTER TABLE audit_log ENABLE TRIGGER USER');
    const broken = await gw.http().get('/api/v1/audit/verify').set(bearer(officer));
    expect(broken.body).toMatchObject({ ok: false, seq: victim, problem: 'altered' });
  });
});
