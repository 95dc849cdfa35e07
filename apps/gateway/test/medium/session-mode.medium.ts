import { SessionMode } from '@lemniscate/contracts';
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { applyMigrations, DEFAULT_MIGRATIONS_DIR, readMigrations, type MigrationTarget } from '../../src/db/migrate';
import { freshDatabase, TEST_DATABASE_KINDS, withTestDatabases, type TestDatabase } from '../support/db';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(120_000);

// L4: a session is recorded with the mode it was started in, validated at the API, stored, shown.
withTestDatabases((db) => {
  let gw: Gateway;
  let project: string;
  let dev: { token: string; userId: string };

  beforeAll(async () => {
    gw = await startGateway(db());
    const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'modes');
    dev = await createUser(gw, admin, 'modes@example.test', 'developer', [project]);
  });
  afterAll(async () => {
    await gw?.close();
  });

  const start = (body: Record<string, unknown>) =>
    gw
      .http()
      .post('/api/v1/sessions')
      .set(bearer(dev.token))
      .send({ projectId: project, instruction: 'make the build green', ...body });

  // Every way a client can say it: the mode alone, the older pair alone, and both when they agree.
  const accepted: { body: Record<string, unknown>; mode: SessionMode }[] = [
    { body: {}, mode: 'interactive' },
    ...SessionMode.options.map((mode) => ({ body: { mode }, mode })),
    ...SessionMode.options.map((mode) => ({ body: { mode, headless: mode !== 'interactive', waitForApprovals: mode === 'headless_with_approvals' }, mode })),
    { body: { headless: false }, mode: 'interactive' },
    { body: { headless: true }, mode: 'headless' },
    { body: { headless: true, waitForApprovals: false }, mode: 'headless' },
    { body: { headless: true, waitForApprovals: true }, mode: 'headless_with_approvals' },
  ];

  it(`stores, returns and lists the mode of each of ${accepted.length} accepted requests, and the approval point follows it`, async () => {
    for (const { body, mode } of accepted) {
      const res = await start(body);
      expect({ body, status: res.status }).toEqual({ body, status: 201 });
      const id = res.body.id as string;
      expect({ body, mode: res.body.mode, headless: res.body.headless }).toEqual({ body, mode, headless: mode === 'headless' });
      const [row] = await db().superuser<{ mode: string; headless: boolean }>('SELECT mode, headless FROM sessions WHERE id = $1', [id]);
      expect({ body, row }).toEqual({ body, row: { mode, headless: mode === 'headless' } });
      const shown = await gw.http().get(`/api/v1/sessions/${id}`).set(bearer(dev.token));
      expect(shown.body.mode).toBe(mode);
      const listed = await gw.http().get('/api/v1/sessions').query({ projectId: project }).set(bearer(dev.token));
      expect((listed.body as { id: string; mode: string }[]).find((s) => s.id === id)?.mode).toBe(mode);
      // Only a plain headless run refuses at once; a run that waits for approvals keeps them pending.
      const approval = await gw.app.get(ApprovalsService).request({ sessionId: id, kind: 'command', payload: { command: 'npm install left-pad' }, agent: 'general' });
      expect({ body, state: approval.state }).toEqual({ body, state: mode === 'headless' ? 'refused_headless' : 'pending' });
      const audited = (await auditKinds(gw, ['session.instruction'])).find((e) => e.sessionId === id);
      expect(audited?.payload).toMatchObject({ mode });
    }
  });

  const refused: { body: Record<string, unknown>; field: string; sentence: RegExp }[] = [
    ...['bogus', 'HEADLESS', '', 'headless-with-approvals'].map((mode) => ({
      body: { mode },
      field: 'body.mode',
      sentence: /^must be one of "interactive", "headless" or "headless_with_approvals"$/,
    })),
    ...[1, true, null, ['headless']].map((mode) => ({ body: { mode }, field: 'body.mode', sentence: /^must be one of "interactive", "headless" or "headless_with_approvals"$/ })),
    { body: { mode: 'interactive', headless: true }, field: 'body.headless', sentence: /^says true, but mode "interactive" is an interactive session; send mode alone$/ },
    { body: { mode: 'headless', headless: false }, field: 'body.headless', sentence: /^says false, but mode "headless" is a headless session; send mode alone$/ },
    { body: { mode: 'headless', waitForApprovals: true }, field: 'body.waitForApprovals', sentence: /^says true, but mode "headless" refuses approvals at once; send mode alone$/ },
    {
      body: { mode: 'headless_with_approvals', waitForApprovals: false },
      field: 'body.waitForApprovals',
      sentence: /^says false, but mode "headless_with_approvals" waits for approvals; send mode alone$/,
    },
    { body: { mode: 'interactive', waitForApprovals: true }, field: 'body.waitForApprovals', sentence: /^says true, but mode "interactive" asks its developer directly; send mode alone$/ },
    { body: { waitForApprovals: true }, field: 'body.waitForApprovals', sentence: /^goes with a headless session/ },
    { body: { headless: false, waitForApprovals: true }, field: 'body.waitForApprovals', sentence: /^goes with a headless session/ },
  ];

  it(`refuses ${refused.length} requests whose mode is unknown or does not fit, with a 400 naming the field in a sentence, and records nothing`, async () => {
    const before = (await db().superuser<{ count: string }>('SELECT count(*) FROM sessions'))[0]!.count;
    for (const { body, field, sentence } of refused) {
      const res = await start(body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: 'validation_failed' });
      const issue = (res.body.details?.issues as { path: string; message: string }[] | undefined)?.find((i) => i.path === field);
      expect({ body, issue: issue?.path }).toEqual({ body, issue: field });
      expect(issue!.message).toMatch(sentence);
      expect(res.body.message).toMatch(/^The request is invalid: .+\.$/);
      expect(res.body.message).not.toMatch(/zod|ZodError|invalid_enum|Invalid option/);
    }
    const after = (await db().superuser<{ count: string }>('SELECT count(*) FROM sessions'))[0]!.count;
    expect(after).toBe(before);
  });

  it('the database itself refuses a mode and a headless flag that disagree, and an unknown mode', async () => {
    const [user] = await db().superuser<{ id: string }>('SELECT id FROM users LIMIT 1');
    const insert = (mode: string, headless: boolean) =>
      db().superuser('INSERT INTO sessions (project_id, user_id, agent, instruction, mode, headless) VALUES ($1, $2, $3, $4, $5, $6)', [project, user!.id, 'general', 'x', mode, headless]);
    await expect(insert('interactive', true)).rejects.toThrow(/sessions_mode_headless/);
    await expect(insert('headless_with_approvals', true)).rejects.toThrow(/sessions_mode_headless/);
    await expect(insert('headless', false)).rejects.toThrow(/sessions_mode_headless/);
    await expect(insert('batch', false)).rejects.toThrow(/sessions_mode_check/);
    await expect(db().superuser('INSERT INTO sessions (project_id, user_id, agent, instruction) VALUES ($1, $2, $3, $4)', [project, user!.id, 'general', 'x'])).rejects.toThrow(/mode/);
  });
});

/** Applies the files of `dir` still pending, with the login's own rights, as start-up does. */
async function migrateTo(database: TestDatabase, dir: string): Promise<string[]> {
  const files = await readMigrations(dir);
  if (database.driver.kind === 'pglite') {
    const client = database.driver.client;
    const target: MigrationTarget = {
      transaction: (fn) =>
        client.transaction((tx) => fn({ query: async <T>(text: string, params?: unknown[]) => (await tx.query<T>(text, params)).rows, exec: async (script) => void (await tx.exec(script)) })),
    };
    return (await applyMigrations(target, files)).applied;
  }
  const owner = new Client({ connectionString: database.driver.url });
  await owner.connect();
  try {
    const target: MigrationTarget = {
      transaction: async (fn) => {
        await owner.query('BEGIN');
        try {
          const out = await fn({ query: async <T>(text: string, params?: unknown[]) => (await owner.query(text, params)).rows as T[], exec: async (script) => void (await owner.query(script)) });
          await owner.query('COMMIT');
          return out;
        } catch (error) {
          await owner.query('ROLLBACK');
          throw error;
        }
      },
    };
    return (await applyMigrations(target, files)).applied;
  } finally {
    await owner.end();
  }
}

describe.each(TEST_DATABASE_KINDS.map((kind) => [kind]))('0007_session_mode on a database recorded before it (%s)', (kind) => {
  let before: string;
  let database: TestDatabase;
  beforeAll(async () => {
    before = await mkdtemp(path.join(os.tmpdir(), 'lemniscate-before-0007-'));
    for (const name of await readdir(DEFAULT_MIGRATIONS_DIR)) if (name < '0007') await copyFile(path.join(DEFAULT_MIGRATIONS_DIR, name), path.join(before, name));
    // The login's own role: the rows below are written as an older gateway wrote them.
    database = await freshDatabase(kind, { migrationsDir: before, appRole: null });
  });
  afterAll(async () => {
    await database?.close();
    await rm(before, { recursive: true, force: true });
  });

  it('gives every existing session a mode: headless, interactive, or headless_with_approvals where the audit log says it waited, subagents included', async () => {
    const q = database.superuser.bind(database);
    const [user] = await q<{ id: string }>(`INSERT INTO users (email, display_name, role, password_hash) VALUES ('old@example.test', 'old', 'developer', 'x') RETURNING id`);
    const [proj] = await q<{ id: string }>(`INSERT INTO projects (name, repository_source) VALUES ('old', '/srv/git/old.git') RETURNING id`);
    const session = async (headless: boolean, parent: string | null = null) =>
      (
        await q<{ id: string }>('INSERT INTO sessions (project_id, user_id, agent, instruction, headless, parent_session_id, depth) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id', [
          proj!.id,
          user!.id,
          'general',
          'x',
          headless,
          parent,
          parent ? 1 : 0,
        ])
      )[0]!.id;
    let seq = 0;
    const configured = async (sessionId: string, payload: string) =>
      q('INSERT INTO audit_log (seq, at, actor, kind, project_id, session_id, payload, prev_hash, hash) VALUES ($1, now(), $2, $3, $4, $5, $6, $7, $8)', [
        ++seq,
        'user:old',
        'session.configured',
        proj!.id,
        sessionId,
        payload,
        '0'.repeat(64),
        'f'.repeat(64),
      ]);
    const headless = await session(true);
    const headlessChild = await session(true, headless);
    const interactive = await session(false);
    await configured(interactive, '{"agent":"general","waitForApprovals":false}');
    const waited = await session(false);
    await configured(waited, '{"agent":"general","waitForApprovals":true,"warnings":[]}');
    const waitedChild = await session(false, waited);
    const waitedGrandchild = await session(false, waitedChild);
    // The words inside a string do not count: quotes there are escaped in canonical JSON.
    const mentions = await session(false);
    await configured(mentions, JSON.stringify({ agent: 'general', warnings: ['"waitForApprovals":true is not a setting'], waitForApprovals: false }));
    const unconfigured = await session(false);

    const applied = await migrateTo(database, DEFAULT_MIGRATIONS_DIR);
    // 0007 and whatever came after it; nothing before it runs again.
    expect(applied[0]).toBe('0007_session_mode.sql');
    expect(applied.every((name) => name >= '0007')).toBe(true);
    const rows = await q<{ id: string; mode: string; headless: boolean }>('SELECT id, mode, headless FROM sessions');
    const modeOf = new Map(rows.map((r) => [r.id, r.mode]));
    expect(Object.fromEntries(Object.entries({ headless, headlessChild, interactive, waited, waitedChild, waitedGrandchild, mentions, unconfigured }).map(([k, id]) => [k, modeOf.get(id)]))).toEqual({
      headless: 'headless',
      headlessChild: 'headless',
      interactive: 'interactive',
      waited: 'headless_with_approvals',
      waitedChild: 'headless_with_approvals',
      waitedGrandchild: 'headless_with_approvals',
      mentions: 'interactive',
      unconfigured: 'interactive',
    });
    expect(rows.every((r) => r.headless === (r.mode === 'headless'))).toBe(true);
  });
});
