import { withTestDatabases } from '../support/db';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(60_000);

/*
 * An administrator changes people's roles and reviews and revokes anyone's API tokens. Attacked from
 * every side: each non-administrator role, on itself and on others, trying to promote; an
 * administrator demoting themselves or the last administrator; a revoked account.
 */
withTestDatabases((db) => {
  let gw: Gateway;
  let execHost: ExecHostDouble;
  let admin: { token: string; userId: string };
  let project: string;

  beforeAll(async () => {
    execHost = await startExecHostDouble();
    gw = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: execHost.url, LEMNISCATE_EXEC_HOST_TOKEN: execHost.token });
    admin = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    project = await createProject(gw, admin.token, 'people');
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
  });

  const update = (token: string, id: string, body: unknown) =>
    gw
      .http()
      .post(`/api/v1/users/${id}`)
      .set(bearer(token))
      .send(body as object);
  const roleOf = async (id: string) => (await gw.http().get(`/api/v1/users/${id}`).set(bearer(admin.token))).body.role as string;

  it('nobody but an administrator changes a role: every other role × (itself, another person) × every role asked for is refused and changes nothing', async () => {
    const failures: string[] = [];
    for (const role of ['developer', 'security_officer'] as const) {
      const caller = await createUser(gw, admin.token, `${role.replace('_', '-')}-caller@example.test`, role, [project]);
      const other = await createUser(gw, admin.token, `${role.replace('_', '-')}-other@example.test`, 'developer', [project]);
      for (const target of [caller.userId, other.userId, admin.userId]) {
        for (const wanted of ['admin', 'developer', 'security_officer']) {
          const before = await roleOf(target);
          const res = await update(caller.token, target, { role: wanted, displayName: 'Mallory' });
          if (res.status !== 403 && res.status !== 404) failures.push(`${role} → ${target === caller.userId ? 'self' : 'other'} ${wanted}: ${res.status}`);
          if ((await roleOf(target)) !== before) failures.push(`${role} → ${target === caller.userId ? 'self' : 'other'} ${wanted}: the role changed`);
        }
        const tokens = await gw.http().get(`/api/v1/users/${target}/tokens`).set(bearer(caller.token));
        if (tokens.status !== 403 && tokens.status !== 404) failures.push(`${role} read the tokens of ${target}: ${tokens.status}`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('a new role applies at the next request, is audited with before and after, and a no-op records nothing', async () => {
    const person = await createUser(gw, admin.token, 'promoted@example.test', 'developer', [project]);
    expect((await gw.http().get('/api/v1/audit?limit=1').set(bearer(person.token))).status).toBe(403);
    const res = await update(admin.token, person.userId, { role: 'security_officer' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: person.userId, role: 'security_officer', projectIds: [project] });
    // The same token, the next request: the new role's rights.
    expect((await gw.http().get('/api/v1/audit?limit=1').set(bearer(person.token))).status).toBe(200);
    expect((await auditKinds(gw, ['user.update'])).at(-1)).toMatchObject({
      actor: `user:${admin.userId}`,
      payload: { userId: person.userId, before: { role: 'developer' }, after: { role: 'security_officer' } },
    });
    const count = (await auditKinds(gw, ['user.update'])).length;
    expect((await update(admin.token, person.userId, { role: 'security_officer' })).status).toBe(200);
    expect((await auditKinds(gw, ['user.update'])).length).toBe(count);
  });

  it('an administrator never changes their own role, and a revoked account is not changed, each with a sentence', async () => {
    const self = await update(admin.token, admin.userId, { role: 'developer' });
    expect(self.status).toBe(409);
    expect(self.body.message).toBe('You cannot change your own role; another administrator can.');
    expect(await roleOf(admin.userId)).toBe('admin');
    // Renaming oneself is fine.
    expect((await update(admin.token, admin.userId, { displayName: 'The Administrator' })).body).toMatchObject({ displayName: 'The Administrator', role: 'admin' });

    const leaver = await createUser(gw, admin.token, 'leaver@example.test', 'developer', []);
    expect((await gw.http().post(`/api/v1/users/${leaver.userId}/revoke`).set(bearer(admin.token)).send({})).status).toBe(201);
    const revoked = await update(admin.token, leaver.userId, { role: 'admin' });
    expect(revoked.status).toBe(409);
    expect(revoked.body.message).toBe('leaver@example.test was revoked; a revoked account cannot be changed.');
  });

  it('two administrators demoting each other at the same moment leave one administrator, never none', async () => {
    const activeAdmins = async (token: string) =>
      ((await gw.http().get('/api/v1/users').set(bearer(token))).body as { id: string; role: string; revokedAt: string | null }[]).filter((u) => u.role === 'admin' && !u.revokedAt).map((u) => u.id);
    for (let round = 0; round < 5; round++) {
      // Exactly two administrators: the first and a new one; every other is made a developer.
      const other = await createUser(gw, admin.token, `rival-${round}@example.test`, 'admin', []);
      for (const id of await activeAdmins(admin.token)) if (id !== admin.userId && id !== other.userId) expect((await update(admin.token, id, { role: 'developer' })).status).toBe(200);
      expect((await activeAdmins(admin.token)).sort()).toEqual([admin.userId, other.userId].sort());
      const [a, b] = await Promise.all([update(admin.token, other.userId, { role: 'developer' }), update(other.token, admin.userId, { role: 'developer' })]);
      // One wins. The other is refused: as the last administrator (409) when both checks raced, or as
      // no longer an administrator (403) when its request was read after the first change.
      expect([a.status, b.status].filter((x) => x === 200)).toHaveLength(1);
      const refused = a.status === 200 ? b : a;
      if (refused.status === 409) expect(refused.body.message).toMatch(/is the last active administrator; make someone else an administrator first\.$/);
      else expect(refused.status).toBe(403);
      const winner = a.status === 200 ? admin : other;
      expect(await activeAdmins(winner.token)).toEqual([winner.userId]);
      if (winner !== admin) expect((await update(winner.token, admin.userId, { role: 'admin' })).status).toBe(200);
    }
  });

  it("an administrator sees anyone's tokens (name, last use, expiry, never the secret) and revokes one, which stops working at once, audited", async () => {
    const person = await createUser(gw, admin.token, 'token-owner@example.test', 'developer', [project]);
    await gw.http().get('/api/v1/auth/me').set(bearer(person.token));
    const listed = await gw.http().get(`/api/v1/users/${person.userId}/tokens`).set(bearer(admin.token));
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual([expect.objectContaining({ name: expect.any(String), lastUsedAt: expect.any(String), expiresAt: expect.any(String), revokedAt: null })]);
    expect(listed.text).not.toContain(person.token);
    expect(Object.keys(listed.body[0]).sort()).toEqual(['createdAt', 'expiresAt', 'id', 'lastUsedAt', 'name', 'prefix', 'revokedAt']);
    const revoked = await gw.http().delete(`/api/v1/auth/tokens/${listed.body[0].id}`).set(bearer(admin.token));
    expect(revoked.status).toBe(200);
    const after = await gw.http().get('/api/v1/auth/me').set(bearer(person.token));
    expect(after.status).toBe(401);
    expect(after.body.message).toBe('This API token has been revoked.');
    expect((await auditKinds(gw, ['auth.token_revoked'])).at(-1)).toMatchObject({ actor: `user:${admin.userId}`, payload: { tokenId: listed.body[0].id, owner: person.userId } });
    expect((await gw.http().get('/api/v1/users/nobody-here/tokens').set(bearer(admin.token))).status).toBe(404);
  });

  it('refuses an empty or unknown change with a sentence', async () => {
    const person = await createUser(gw, admin.token, 'shape@example.test', 'developer', []);
    for (const [body, words] of [
      [{}, 'give "role", "displayName" or both'],
      [{ role: 'root' }, 'body.role'],
      [{ displayName: '   ' }, 'body.displayName'],
      [{ email: 'x@example.test' }, 'unknown field "email"'],
    ] as const) {
      const res = await update(admin.token, person.userId, body);
      expect(res.status).toBe(400);
      expect(res.body.message).toContain(words);
    }
  });
});
