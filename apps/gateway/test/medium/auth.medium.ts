import { LoginFailuresRepository } from '../../src/db/repositories/login-failures.repository';
import { apiTokens } from '../../src/db/schema';
import { freshDatabase, withTestDatabases } from '../support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, login, startGateway, tokenFor, type Gateway } from '../support/harness';

// Projects do not carry a per-tier timeout in Jest 30; these tests open real databases and hash passwords.
jest.setTimeout(60_000);

withTestDatabases((db) => {
  let gw: Gateway;
  beforeAll(async () => {
    gw = await startGateway(db(), { LEMNISCATE_LOGIN_MAX_FAILURES: '3' });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('signs in with an httpOnly, SameSite=Strict cookie and returns a CSRF token', async () => {
    const res = await gw.http().post('/api/v1/auth/login').send({ email: ADMIN_EMAIL.toUpperCase(), password: ADMIN_PASSWORD });
    expect(res.status).toBe(200);
    expect(res.body.user).toMatchObject({ email: ADMIN_EMAIL, role: 'admin' });
    expect(res.body.csrfToken).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    const cookie = String(res.headers['set-cookie']);
    expect(cookie).toMatch(/^lemni_session=/);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\//);
    expect(cookie).not.toMatch(/Secure/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['x-powered-by']).toBeUndefined();
    expect((await auditKinds(gw, ['auth.login'])).length).toBeGreaterThan(0);
  });

  it('refuses a wrong password with one sentence, and audits it', async () => {
    const res = await gw.http().post('/api/v1/auth/login').send({ email: ADMIN_EMAIL, password: 'not the password' });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ code: 'unauthenticated', message: 'The email or the password is wrong.' });
    expect(res.body.requestId).toBe(res.headers['x-request-id']);
    const failed = await auditKinds(gw, ['auth.login_failed']);
    expect(failed.at(-1)).toMatchObject({ actor: 'anonymous', payload: { email: ADMIN_EMAIL, reason: 'wrong_password' } });
  });

  it('slows a guesser down: after the allowed failures even the right password waits', async () => {
    const email = 'nobody@example.test';
    for (let i = 0; i < 3; i++)
      expect(
        (
          await gw
            .http()
            .post('/api/v1/auth/login')
            .send({ email, password: `guess ${i}` })
        ).status,
      ).toBe(401);
    const res = await gw.http().post('/api/v1/auth/login').send({ email, password: 'guess 4' });
    expect(res.status).toBe(429);
    expect(res.body.code).toBe('rate_limited');
    expect(res.body.message).toMatch(/^Too many failed sign-in attempts; try again in \d+ seconds\.$/);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('paces a guesser across replicas: failures on one gateway slow the next try on another', async () => {
    const other = await startGateway(db(), { LEMNISCATE_LOGIN_MAX_FAILURES: '3' });
    try {
      const email = 'spread@example.test';
      for (let i = 0; i < 3; i++)
        expect(
          (
            await gw
              .http()
              .post('/api/v1/auth/login')
              .send({ email, password: `guess ${i}` })
          ).status,
        ).toBe(401);
      const res = await other.http().post('/api/v1/auth/login').send({ email, password: 'guess on the other replica' });
      expect(res.status).toBe(429);
      expect(res.body.message).toMatch(/^Too many failed sign-in attempts; try again in \d+ seconds\.$/);
    } finally {
      await other.close();
    }
  });

  it('a successful sign-in clears the account, and failures older than the window are forgotten', async () => {
    const failures = gw.app.get(LoginFailuresRepository);
    await failures.record(['account:old@example.test'], new Date(Date.now() - 3 * 3600_000), new Date(0));
    expect((await failures.recent(['account:old@example.test'], new Date(0))).get('account:old@example.test')).toHaveLength(1);
    // A new failure (any key) sweeps out what the window no longer counts.
    expect((await gw.http().post('/api/v1/auth/login').send({ email: 'someone@example.test', password: 'wrong' })).status).toBe(401);
    expect((await failures.recent(['account:old@example.test'], new Date(0))).get('account:old@example.test')).toEqual([]);
    expect((await gw.http().post('/api/v1/auth/login').send({ email: ADMIN_EMAIL, password: 'not it' })).status).toBe(401);
    expect((await gw.http().post('/api/v1/auth/login').send({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD })).status).toBe(200);
    expect((await failures.recent([`account:${ADMIN_EMAIL}`], new Date(0))).get(`account:${ADMIN_EMAIL}`)).toEqual([]);
  });

  it('needs the CSRF header for writes made with the cookie, not for reads', async () => {
    const s = await login(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    expect((await gw.http().get('/api/v1/auth/me').set('cookie', s.cookie)).status).toBe(200);
    const refused = await gw.http().post('/api/v1/auth/tokens').set('cookie', s.cookie).send({ name: 'x' });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('csrf_mismatch');
    const wrong = await gw.http().post('/api/v1/auth/tokens').set('cookie', s.cookie).set('x-csrf-token', 'forged').send({ name: 'x' });
    expect(wrong.status).toBe(403);
    const ok = await gw.http().post('/api/v1/auth/tokens').set('cookie', s.cookie).set('x-csrf-token', s.csrf).send({ name: 'x' });
    expect(ok.status).toBe(201);
    expect((await auditKinds(gw, ['auth.csrf_rejected'])).length).toBeGreaterThanOrEqual(2);
  });

  it('ends the cookie session on logout', async () => {
    const s = await login(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    expect((await gw.http().post('/api/v1/auth/logout').set('cookie', s.cookie).set('x-csrf-token', s.csrf)).status).toBe(200);
    const after = await gw.http().get('/api/v1/auth/me').set('cookie', s.cookie);
    expect(after.status).toBe(401);
    expect(after.body.message).toBe('Your console session has ended; sign in again.');
  });

  it('shows an API token once, keeps only its hash, and lists it without the secret', async () => {
    const { token } = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    expect(token).toMatch(/^lemni_/);
    const list = await gw.http().get('/api/v1/auth/tokens').set(bearer(token));
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.body)).not.toContain(token);
    expect(list.body[0]).toHaveProperty('prefix');
    const rows = await db().db.select().from(apiTokens);
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(JSON.stringify(row)).not.toContain(token.slice(10));
  });

  it('records when a token was last used, to the minute: its first use, then at most one write a minute', async () => {
    const { token } = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    const hashOf = (await db().db.select().from(apiTokens)).find((r) => token.startsWith(r.prefix) && r.lastUsedAt === null);
    expect(hashOf).toBeDefined();
    const lastUsed = async () => (await db().db.select().from(apiTokens)).find((r) => r.id === hashOf!.id)!.lastUsedAt;
    expect((await gw.http().get('/api/v1/auth/me').set(bearer(token))).status).toBe(200);
    const first = await lastUsed();
    expect(first).toBeInstanceOf(Date);
    for (let i = 0; i < 3; i++) expect((await gw.http().get('/api/v1/auth/me').set(bearer(token))).status).toBe(200);
    expect(await lastUsed()).toEqual(first);
    // A minute on: the next use is written.
    await db().superuser(`UPDATE api_tokens SET last_used_at = last_used_at - interval '61 seconds' WHERE id = '${hashOf!.id}'`);
    const before = Date.now();
    expect((await gw.http().get('/api/v1/auth/me').set(bearer(token))).status).toBe(200);
    expect((await lastUsed())!.getTime()).toBeGreaterThanOrEqual(before - 1000);
  });

  it('refuses a revoked token and an expired one with a sentence saying which', async () => {
    const { token } = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    const mine = await gw.http().get('/api/v1/auth/tokens').set(bearer(token));
    const id = (mine.body as { id: string; lastUsedAt: string | null }[]).find((t) => t.lastUsedAt !== null && token.startsWith((mine.body as { prefix: string }[])[0]?.prefix ?? '#'))?.id;
    const target = id ?? (mine.body as { id: string }[]).at(-1)?.id;
    const revoked = await gw.http().delete(`/api/v1/auth/tokens/${target}`).set(bearer(token));
    expect(revoked.status).toBe(200);
    expect(revoked.body.revokedAt).not.toBeNull();

    const second = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    await db().superuser(`UPDATE api_tokens SET expires_at = now() - interval '1 minute' WHERE revoked_at IS NULL`);
    const expired = await gw.http().get('/api/v1/auth/me').set(bearer(second.token));
    expect(expired.status).toBe(401);
    expect(expired.body.message).toMatch(/^This API token expired on /);
    expect((await auditKinds(gw, ['auth.token_rejected'])).some((e) => (e.payload as { reason: string }).reason === 'expired')).toBe(true);
  });

  it('explains a missing or malformed credential', async () => {
    const none = await gw.http().get('/api/v1/projects');
    expect(none.status).toBe(401);
    expect(none.body.message).toMatch(/sign in, or send an API token/);
    const odd = await gw.http().get('/api/v1/projects').set('authorization', 'Basic abc');
    expect(odd.body.message).toBe('The Authorization header must be "Bearer <token>".');
    const unknown = await gw.http().get('/api/v1/projects').set(bearer('lemni_notarealtoken'));
    expect(unknown.body.message).toBe('This API token is not valid.');
  });

  it('answers bad input with a 400 naming the field, and unreadable JSON with a sentence', async () => {
    const res = await gw.http().post('/api/v1/auth/login').send({ email: 'not-an-email', password: '' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.message).toContain('body.email');
    expect(res.body.message).toContain('body.password');
    const broken = await gw.http().post('/api/v1/auth/login').set('content-type', 'application/json').send('{"email":');
    expect(broken.status).toBe(400);
    expect(broken.body.code).toBe('validation_failed');
    expect(broken.body.message).toMatch(/valid JSON/);
    expect(broken.body.requestId).toEqual(expect.any(String));
    const nowhere = await gw.http().get('/api/v1/nowhere');
    expect(nowhere.status).toBe(404);
    expect(nowhere.body.code).toBe('route_not_found');
  });

  it('changes a password only with the current one, and ends console sessions', async () => {
    const { token } = await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    const s = await login(gw, ADMIN_EMAIL, ADMIN_PASSWORD);
    const wrong = await gw.http().post('/api/v1/auth/password').set(bearer(token)).send({ currentPassword: 'nope', newPassword: 'another long password' });
    expect(wrong.status).toBe(403);
    expect(wrong.body.message).toBe('The current password is wrong; the password was not changed.');
    const ok = await gw.http().post('/api/v1/auth/password').set(bearer(token)).send({ currentPassword: ADMIN_PASSWORD, newPassword: 'another long password' });
    expect(ok.status).toBe(200);
    expect((await gw.http().get('/api/v1/auth/me').set('cookie', s.cookie)).status).toBe(401);
    await login(gw, ADMIN_EMAIL, 'another long password');
    const back = await gw.http().post('/api/v1/auth/password').set(bearer(token)).send({ currentPassword: 'another long password', newPassword: ADMIN_PASSWORD });
    expect(back.status).toBe(200);
  });

  it('keeps a harmless caller request id and replaces a hostile one', async () => {
    const kept = await gw.http().get('/api/v1/projects').set('x-request-id', 'trace-123');
    expect(kept.body.requestId).toBe('trace-123');
    const replaced = await gw.http().get('/api/v1/projects').set('x-request-id', 'evil <script> id');
    expect(replaced.body.requestId).not.toContain('evil');
  });
});

describe('first start', () => {
  it('prints generated administrator credentials once, and they work', async () => {
    const database = await freshDatabase('pglite');
    try {
      const first = await startGateway(database, { LEMNISCATE_ADMIN_EMAIL: '', LEMNISCATE_ADMIN_PASSWORD: '' });
      const text = first.printed.join('\n');
      const password = /password: (\S+)/.exec(text)?.[1];
      expect(text).toContain('email:    admin@lemniscate.local');
      expect(password).toBeDefined();
      expect((await login(first, 'admin@lemniscate.local', password ?? '')).userId).toBeTruthy();
      expect(await auditKinds(first, ['user.bootstrap_admin'])).toEqual([expect.objectContaining({ actor: 'system', payload: expect.objectContaining({ passwordGenerated: true }) })]);
      expect(JSON.stringify(await auditKinds(first, ['user.bootstrap_admin']))).not.toContain(password ?? '#');
      await first.close();
      const second = await startGateway(database, { LEMNISCATE_ADMIN_EMAIL: '', LEMNISCATE_ADMIN_PASSWORD: '' });
      expect(second.printed).toEqual([]);
      await second.close();
    } finally {
      await database.close();
    }
  });
});
