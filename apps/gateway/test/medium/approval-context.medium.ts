import { randomUUID } from 'node:crypto';
import { createTwoFilesPatch } from 'diff';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { withTestDatabases } from '../support/db';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

/**
 * Expanding the lines around a change (#18, A1): GET /approvals/:id/context reads the changed file
 * from the session's sandbox, checks it against the change, and answers the lines as they were
 * before it. Attacked: files the change does not name (a traversal, a secret next to it), readers
 * who may not read the approval, a file that moved on, an ended session, every malformed query.
 */
jest.setTimeout(60_000);

const OLD = Array.from({ length: 60 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
const NEW = OLD.replace('line 30\n', 'line 30 changed\n').replace('line 5\n', '');
const DIFF = createTwoFilesPatch('a/src/long.ts', 'b/src/long.ts', OLD, NEW, '', '', { context: 3 }).replace(/^=+\n/m, '');
const ADDED = createTwoFilesPatch('/dev/null', 'b/src/new.ts', '', 'fresh\n', '', '', { context: 3 }).replace(/^=+\n/m, '');

withTestDatabases((db) => {
  let gw: Gateway;
  let execHost: ExecHostDouble;
  let admin: string;
  let project: string;
  let other: string;
  let dev: { token: string; userId: string };

  beforeAll(async () => {
    execHost = await startExecHostDouble();
    gw = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: execHost.url, LEMNISCATE_EXEC_HOST_TOKEN: execHost.token });
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'context');
    other = await createProject(gw, admin, 'context-other');
    dev = await createUser(gw, admin, 'ctx-dev@example.test', 'developer', [project]);
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
  });

  /** A running session with its own sandbox id, whose working copy holds `files`. */
  async function sessionWith(files: Record<string, string>): Promise<{ id: string; sandboxId: string }> {
    const res = await gw.http().post('/api/v1/sessions').set(bearer(dev.token)).send({ projectId: project, instruction: 'tidy long.ts' });
    expect(res.status).toBe(201);
    const sandboxId = `sbx-${randomUUID()}`;
    await gw.app.get(SessionsRepository).update(res.body.id as string, { sandboxId });
    for (const [path, text] of Object.entries(files)) execHost.files.set(`${sandboxId}\0${path}`, text);
    return { id: res.body.id as string, sandboxId };
  }
  const ask = (sessionId: string, kind: 'write' | 'changes' | 'third_party', diff = DIFF) =>
    gw.app.get(ApprovalsService).request({ sessionId, kind, payload: { diff, files: ['src/long.ts'] }, agent: 'general' });
  const context = (id: string, query: string, token = dev.token) => gw.http().get(`/api/v1/approvals/${id}/context?${query}`).set(bearer(token));

  it('a waiting write: the working copy still holds the old text, answered as it is', async () => {
    const s = await sessionWith({ 'src/long.ts': OLD });
    const a = await ask(s.id, 'write');
    const res = await context(a.id, 'path=src/long.ts&from=10&to=14');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ path: 'src/long.ts', from: 10, lines: ['line 10', 'line 11', 'line 12', 'line 13', 'line 14'], totalLines: 60 });
    // Past the end: what there is, and the total says where the file stops.
    const tail = await context(a.id, 'path=src/long.ts&from=55&to=80');
    expect(tail.body).toEqual({ path: 'src/long.ts', from: 55, lines: ['line 55', 'line 56', 'line 57', 'line 58', 'line 59', 'line 60'], totalLines: 60 });
    expect((await context(a.id, 'path=src/long.ts&from=61&to=70')).body).toMatchObject({ lines: [], totalLines: 60 });
  });

  it.each(['changes', 'third_party'] as const)('a %s request: the command already changed the working copy; the old lines are rebuilt from it', async (kind) => {
    const s = await sessionWith({ 'src/long.ts': NEW });
    const a = await ask(s.id, kind);
    const res = await context(a.id, 'path=src/long.ts&from=1&to=8');
    expect(res.status).toBe(200);
    // Line 5 was removed by the change: the old numbering still has it.
    expect(res.body).toEqual({ path: 'src/long.ts', from: 1, lines: ['line 1', 'line 2', 'line 3', 'line 4', 'line 5', 'line 6', 'line 7', 'line 8'], totalLines: 60 });
  });

  it('a file without a newline at its end is read on either side', async () => {
    const old = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten';
    const next = old.replace('ten', 'TEN');
    const diff = createTwoFilesPatch('a/src/long.ts', 'b/src/long.ts', old, next, '', '', { context: 2 }).replace(/^=+\n/m, '');
    for (const [kind, wc] of [
      ['write', old],
      ['changes', next],
    ] as const) {
      const s = await sessionWith({ 'src/long.ts': wc });
      const a = await ask(s.id, kind, diff);
      const res = await context(a.id, 'path=src/long.ts&from=1&to=3');
      expect({ kind, status: res.status, body: res.body }).toEqual({ kind, status: 200, body: { path: 'src/long.ts', from: 1, lines: ['one', 'two', 'three'], totalLines: 10 } });
    }
  });

  it('a file that moved on since the change was proposed is said to have moved on, not shown out of step', async () => {
    const s = await sessionWith({ 'src/long.ts': OLD.replace('line 29\n', 'line 29 edited since\n') });
    const a = await ask(s.id, 'write');
    const res = await context(a.id, 'path=src/long.ts&from=1&to=5');
    expect(res.status).toBe(409);
    expect(res.body.message).toBe('src/long.ts has changed in the sandbox since this change was proposed, so the lines around it cannot be shown as they were.');
    // Gone from the working copy altogether: the same sentence.
    const gone = await sessionWith({});
    const b = await ask(gone.id, 'write');
    expect((await context(b.id, 'path=src/long.ts&from=1&to=5')).body.message).toMatch(/has changed in the sandbox since/);
  });

  it('reads only the files the change names: a traversal, a neighbour, a created file and a command are refused with a sentence', async () => {
    const s = await sessionWith({ 'src/long.ts': OLD, '.env': 'SECRET=hunter2\n', 'src/new.ts': 'fresh\n' });
    const a = await ask(s.id, 'write');
    const reads = () => execHost.calls.filter((c) => c.path.startsWith(`/v1/sandboxes/${s.sandboxId}/files/read`)).length;
    const before = reads();
    for (const path of ['.env', '../../etc/passwd', '/etc/passwd', 'src/../.env', 'b/src/long.ts', 'src/long.ts/', 'SRC/long.ts']) {
      const res = await context(a.id, `path=${encodeURIComponent(path)}&from=1&to=5`);
      expect({ path, status: res.status, message: res.body.message }).toEqual({
        path,
        status: 404,
        message: `The change of approval ${a.id} does not touch ${path}; only the files it changes can be read here.`,
      });
      expect(res.text).not.toContain('hunter2');
    }
    expect(reads()).toBe(before);

    const created = await gw.app.get(ApprovalsService).request({ sessionId: s.id, kind: 'write', payload: { diff: ADDED, files: ['src/new.ts'] }, agent: 'general' });
    const whole = await context(created.id, 'path=src/new.ts&from=1&to=5');
    expect({ status: whole.status, message: whole.body.message }).toEqual({ status: 400, message: 'src/new.ts is created whole by this change: every line of it is already in the diff.' });

    const command = await gw.app.get(ApprovalsService).request({ sessionId: s.id, kind: 'command', payload: { command: 'cat .env' }, agent: 'general' });
    const cmd = await context(command.id, 'path=.env&from=1&to=5');
    expect({ status: cmd.status, message: cmd.body.message }).toEqual({ status: 400, message: `Approval ${command.id} is a command, not a change to files: it has no lines around it.` });
    expect(reads()).toBe(before);
  });

  it('whoever may not read the approval is refused before anything is read: another developer, a member of another project, an unknown id', async () => {
    const s = await sessionWith({ 'src/long.ts': OLD });
    const a = await ask(s.id, 'write');
    const colleague = await createUser(gw, admin, `ctx-colleague-${randomUUID()}@example.test`, 'developer', [project]);
    const outsider = await createUser(gw, admin, `ctx-outsider-${randomUUID()}@example.test`, 'developer', [other]);
    const officer = await createUser(gw, admin, `ctx-officer-${randomUUID()}@example.test`, 'security_officer', [other]);
    const before = execHost.calls.length;
    for (const [who, token] of [
      ['colleague', colleague.token],
      ['outsider', outsider.token],
      ['officer of another project', officer.token],
    ] as const) {
      const res = await context(a.id, 'path=src/long.ts&from=1&to=5', token);
      expect({ who, refused: res.status === 403 || res.status === 404 }).toEqual({ who, refused: true });
      expect(res.text).not.toContain('line 1');
    }
    expect((await context(randomUUID(), 'path=src/long.ts&from=1&to=5')).status).toBe(404);
    expect(execHost.calls.length).toBe(before);
    // The project's administrator may, as they may answer it.
    const byAdmin = await context(a.id, 'path=src/long.ts&from=1&to=2', admin);
    expect({ status: byAdmin.status, body: byAdmin.body }).toEqual({ status: 200, body: { path: 'src/long.ts', from: 1, lines: ['line 1', 'line 2'], totalLines: 60 } });
  });

  it('an ended session has no sandbox to read: said so', async () => {
    const s = await sessionWith({ 'src/long.ts': OLD });
    const a = await ask(s.id, 'write');
    expect((await gw.http().post(`/api/v1/sessions/${s.id}/stop`).set(bearer(dev.token)).send({ reason: 'done' })).status).toBe(200);
    const res = await context(a.id, 'path=src/long.ts&from=1&to=5');
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(new RegExp(`^Session ${s.id} has ended \\(\\w+\\) and its sandbox is gone, so the lines around the change cannot be read any more`));
  });

  it.each([
    ['no path', 'from=1&to=5', /path/],
    ['an empty path', 'path=&from=1&to=5', /path/],
    ['no range', 'path=src/long.ts', /from/],
    ['a line 0', 'path=src/long.ts&from=0&to=5', /from/],
    ['a backward range', 'path=src/long.ts&from=9&to=5', /to: the last line comes at or after the first/],
    ['too many lines', 'path=src/long.ts&from=1&to=501', /to: at most 500 lines are read at once/],
    ['a word for a number', 'path=src/long.ts&from=one&to=5', /from/],
    ['an unknown parameter', 'path=src/long.ts&from=1&to=5&side=new', /side/],
  ])('refuses %s with a sentence', async (_, query, message) => {
    const s = await sessionWith({ 'src/long.ts': OLD });
    const a = await ask(s.id, 'write');
    const res = await context(a.id, query);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(res.body.message).toMatch(message);
  });
});
