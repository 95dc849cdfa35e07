import { pgErrorOf } from '../../src/db/errors';
import { withTestDatabases, type TestDatabase } from '../support/db';
import { ApiTokensRepository } from '../../src/db/repositories/api-tokens.repository';
import { ApprovalsRepository } from '../../src/db/repositories/approvals.repository';
import { ApprovedCommandsRepository } from '../../src/db/repositories/approved-commands.repository';
import { EventsRepository } from '../../src/db/repositories/events.repository';
import { PolicyVersionsRepository } from '../../src/db/repositories/policy-versions.repository';
import { ProjectMembershipsRepository } from '../../src/db/repositories/project-memberships.repository';
import { ProjectsRepository } from '../../src/db/repositories/projects.repository';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { ToolCallsRepository } from '../../src/db/repositories/tool-calls.repository';
import { Transactions } from '../../src/db/repositories/transactions';
import { UsersRepository } from '../../src/db/repositories/users.repository';
import { WebSessionsRepository } from '../../src/db/repositories/web-sessions.repository';

// Jest reads testTimeout only from the root configuration, not from a project: set it here.
jest.setTimeout(120_000);

function repositories(database: TestDatabase) {
  const db = database.db;
  return {
    users: new UsersRepository(db),
    projects: new ProjectsRepository(db),
    memberships: new ProjectMembershipsRepository(db),
    policies: new PolicyVersionsRepository(db),
    tokens: new ApiTokensRepository(db),
    webSessions: new WebSessionsRepository(db),
    sessions: new SessionsRepository(db),
    toolCalls: new ToolCallsRepository(db),
    approvals: new ApprovalsRepository(db),
    approvedCommands: new ApprovedCommandsRepository(db),
    events: new EventsRepository(db),
    transactions: new Transactions(db),
  };
}

/** The database refused the write, and named the constraint it broke. */
async function expectViolation(write: Promise<unknown>, constraint: string): Promise<void> {
  const error = await write.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(pgErrorOf(error)?.constraint).toBe(constraint);
}

let counter = 0;
const unique = (prefix: string) => `${prefix}-${++counter}`;

withTestDatabases((database) => {
  const r = () => repositories(database());

  async function fixture() {
    const { users, projects, sessions } = r();
    const user = await users.create({ email: `${unique('dev')}@example.test`, displayName: 'Dev', role: 'developer', passwordHash: 'scrypt$x' });
    const project = await projects.create({ name: unique('project'), repositorySource: '/srv/git/demo.git' });
    const session = await sessions.create({ projectId: project.id, userId: user.id, agent: 'general', instruction: 'fix the tests', mode: 'interactive' });
    return { user, project, session };
  }

  describe('users', () => {
    it('creates, finds by id and by email whatever its case, updates, counts and lists', async () => {
      const { users } = r();
      const before = await users.count();
      const user = await users.create({ email: 'Alice@Example.test', displayName: 'Alice', role: 'admin', passwordHash: 'h' });
      expect(user).toMatchObject({ email: 'Alice@Example.test', role: 'admin', disabledAt: null, revokedAt: null });
      expect(user.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(user.createdAt).toBeInstanceOf(Date);
      await expect(users.findById(user.id)).resolves.toEqual(user);
      await expect(users.findByEmail('alice@example.TEST')).resolves.toEqual(user);
      const revokedAt = new Date('2026-05-01T10:00:00.000Z');
      await expect(users.update(user.id, { revokedAt, displayName: 'Alice B.' })).resolves.toMatchObject({ revokedAt, displayName: 'Alice B.' });
      await expect(users.count()).resolves.toBe(before + 1);
      expect((await users.list()).map((u) => u.id)).toContain(user.id);
    });

    it('refuses a second account for the same email in another case', async () => {
      const { users } = r();
      await users.create({ email: 'bob@example.test', displayName: 'Bob', role: 'developer' });
      await expectViolation(users.create({ email: 'BOB@example.test', displayName: 'Bob 2', role: 'developer' }), 'users_email_lower_key');
    });

    it('refuses a role that does not exist', async () => {
      await expectViolation(r().users.create({ email: 'x@example.test', displayName: 'X', role: 'root' as 'admin' }), 'users_role_check');
    });

    it('answers undefined for an id that is not a UUID, rather than failing', async () => {
      await expect(r().users.findById('not-a-uuid')).resolves.toBeUndefined();
      await expect(r().users.update('not-a-uuid', { displayName: 'x' })).resolves.toBeUndefined();
    });
  });

  describe('projects and memberships', () => {
    it('creates, finds, lists, updates and scopes projects to members', async () => {
      const { projects, memberships, users } = r();
      const user = await users.create({ email: `${unique('m')}@example.test`, displayName: 'M', role: 'developer' });
      const a = await projects.create({ name: unique('alpha'), repositorySource: '/srv/a.git' });
      const b = await projects.create({ name: unique('beta'), repositorySource: '/srv/b.git', defaultRef: 'main' });
      expect(a.defaultRef).toBe('HEAD');
      await expect(projects.findByName(b.name)).resolves.toEqual(b);
      await memberships.add(user.id, a.id);
      await memberships.add(user.id, a.id);
      await expect(memberships.isMember(user.id, a.id)).resolves.toBe(true);
      await expect(memberships.isMember(user.id, b.id)).resolves.toBe(false);
      await expect(memberships.projectIdsOf(user.id)).resolves.toEqual([a.id]);
      await expect(projects.listForUser(user.id)).resolves.toEqual([a]);
      expect((await memberships.listForProject(a.id)).map((m) => m.userId)).toEqual([user.id]);
      await expect(projects.update(b.id, { defaultRef: 'release' })).resolves.toMatchObject({ defaultRef: 'release' });
      await expect(memberships.remove(user.id, a.id)).resolves.toBe(true);
      await expect(memberships.remove(user.id, a.id)).resolves.toBe(false);
      expect((await projects.list()).map((p) => p.id)).toEqual(expect.arrayContaining([a.id, b.id]));
    });

    it('refuses a duplicate name, and deleting a project that has sessions', async () => {
      const { projects } = r();
      const { project } = await fixture();
      await expectViolation(projects.create({ name: project.name, repositorySource: '/x' }), 'projects_name_key');
      await expectViolation(projects.delete(project.id), 'sessions_project_id_fkey');
      const lonely = await projects.create({ name: unique('lonely'), repositorySource: '/x' });
      await expect(projects.delete(lonely.id)).resolves.toBe(true);
      await expect(projects.delete(lonely.id)).resolves.toBe(false);
    });
  });

  describe('policy versions', () => {
    it('numbers versions 1, 2, 3… and the highest is in force', async () => {
      const { policies } = r();
      const { project, user } = await fixture();
      const v1 = await policies.publish(project.id, { document: { commands: { default: 'ask' } }, sourceText: 'commands: {default: ask}', authorId: user.id });
      const v2 = await policies.publish(project.id, { document: { commands: { default: 'deny' } }, sourceText: 'commands: {default: deny}', authorId: user.id, comment: 'tighter' });
      expect([v1?.version, v2?.version]).toEqual([1, 2]);
      await expect(policies.current(project.id)).resolves.toEqual(v2);
      await expect(policies.findByVersion(project.id, 1)).resolves.toEqual(v1);
      await expect(policies.findById(v2?.id as string)).resolves.toMatchObject({ comment: 'tighter', document: { commands: { default: 'deny' } } });
      expect((await policies.list(project.id)).map((v) => v.version)).toEqual([2, 1]);
    });

    it('gives concurrent publishes consecutive numbers instead of failing one', async () => {
      const { policies } = r();
      const { project } = await fixture();
      const published = await Promise.all(Array.from({ length: 8 }, (_, i) => policies.publish(project.id, { document: { i }, sourceText: `# ${i}`, authorId: null })));
      expect(published.map((v) => v?.version).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    });

    it('answers undefined for a project that does not exist', async () => {
      await expect(r().policies.publish('no-such-project', { document: {}, sourceText: '', authorId: null })).resolves.toBeUndefined();
    });
  });

  describe('api tokens and web sessions', () => {
    it('finds a token by hash, revokes it once, revokes all of a user', async () => {
      const { tokens } = r();
      const { user } = await fixture();
      const t1 = await tokens.create({ userId: user.id, name: 'ci', tokenHash: unique('hash'), prefix: 'lmn_ab12', expiresAt: new Date('2027-01-01T00:00:00Z') });
      const t2 = await tokens.create({ userId: user.id, name: 'laptop', tokenHash: unique('hash'), prefix: 'lmn_cd34' });
      await expect(tokens.findByHash(t1.tokenHash)).resolves.toEqual(t1);
      await expect(tokens.findById(t2.id)).resolves.toEqual(t2);
      const usedAt = new Date('2026-06-01T00:00:00.000Z');
      await tokens.touch(t1.id, usedAt);
      await expect(tokens.findById(t1.id)).resolves.toMatchObject({ lastUsedAt: usedAt });
      await expect(tokens.revoke(t1.id)).resolves.toBe(true);
      await expect(tokens.revoke(t1.id)).resolves.toBe(false);
      await expect(tokens.revokeAllForUser(user.id)).resolves.toBe(1);
      expect((await tokens.listForUser(user.id)).every((t) => t.revokedAt instanceof Date)).toBe(true);
      await expectViolation(tokens.create({ userId: user.id, name: 'dup', tokenHash: t1.tokenHash, prefix: 'x' }), 'api_tokens_token_hash_key');
    });

    it('revokes console sessions and deletes the expired and revoked ones', async () => {
      const { webSessions } = r();
      const { user } = await fixture();
      const live = await webSessions.create({ id: unique('ws'), userId: user.id, csrfToken: 'c1', expiresAt: new Date(Date.now() + 3_600_000) });
      const old = await webSessions.create({ id: unique('ws'), userId: user.id, csrfToken: 'c2', expiresAt: new Date(Date.now() - 1000) });
      const other = await webSessions.create({ id: unique('ws'), userId: user.id, csrfToken: 'c3', expiresAt: new Date(Date.now() + 3_600_000) });
      await expect(webSessions.revoke(other.id)).resolves.toBe(true);
      await expect(webSessions.revoke(other.id)).resolves.toBe(false);
      await expect(webSessions.deleteExpired()).resolves.toBeGreaterThanOrEqual(2);
      await expect(webSessions.findById(old.id)).resolves.toBeUndefined();
      await expect(webSessions.findById(live.id)).resolves.toEqual(live);
      await expect(webSessions.revokeAllForUser(user.id)).resolves.toBe(1);
    });
  });

  describe('sessions, tool calls, approvals', () => {
    it('records a session, counts actions atomically, ends it once', async () => {
      const { sessions } = r();
      const { session, user, project } = await fixture();
      expect(session).toMatchObject({ status: 'running', depth: 0, actionsUsed: 0, headless: false, stopReason: null, endedAt: null });
      await Promise.all(Array.from({ length: 10 }, () => sessions.addAction(session.id)));
      await expect(sessions.findById(session.id)).resolves.toMatchObject({ actionsUsed: 10 });
      await expect(sessions.addExtension(session.id)).resolves.toBe(1);
      await sessions.update(session.id, { baseCommit: 'abc1234', fingerprintStart: 'sha256:1', sandboxId: 'sbx-1' });
      const child = await sessions.create({ projectId: project.id, userId: user.id, parentSessionId: session.id, depth: 1, agent: 'explore', instruction: 'look', mode: 'interactive' });
      await expect(sessions.list({ parentSessionId: session.id })).resolves.toEqual([child]);
      await expect(sessions.listRunningForUser(user.id)).resolves.toHaveLength(2);
      const ended = await sessions.end(session.id, { status: 'stopped', stopReason: 'stopped', summary: 'stopped by the developer' });
      expect(ended).toMatchObject({ status: 'stopped', stopReason: 'stopped', summary: 'stopped by the developer', baseCommit: 'abc1234' });
      expect(ended?.endedAt).toBeInstanceOf(Date);
      await expect(sessions.end(session.id, { status: 'completed' })).resolves.toBeUndefined();
      await expect(sessions.findById(session.id)).resolves.toMatchObject({ status: 'stopped' });
    });

    it('lists sessions by project scope, user and status, newest first, in bounded pages', async () => {
      const { sessions } = r();
      const { project, user } = await fixture();
      const more = [];
      for (let i = 0; i < 3; i++)
        more.push(await sessions.create({ projectId: project.id, userId: user.id, agent: 'general', instruction: `task ${i}`, mode: 'interactive', startedAt: new Date(Date.UTC(2026, 0, 1 + i)) }));
      const listed = await sessions.list({ projectIds: [project.id], userId: user.id });
      expect(listed.map((s) => s.instruction)).toEqual(['fix the tests', 'task 2', 'task 1', 'task 0']);
      await expect(sessions.list({ projectIds: [] })).resolves.toEqual([]);
      await expect(sessions.list({ projectId: project.id, limit: 2 })).resolves.toHaveLength(2);
      await expect(sessions.list({ projectId: project.id, startedBefore: new Date(Date.UTC(2026, 0, 2)) })).resolves.toEqual([more[0]]);
      expect(() => sessions.list({ limit: 0 })).toThrow('A page size must be a positive whole number, not 0.');
    });

    it('numbers tool calls per session and stores their decision and result as JSON', async () => {
      const { toolCalls } = r();
      const { session } = await fixture();
      const a = await toolCalls.create({ sessionId: session.id, name: 'Bash', arguments: { command: 'npm test' }, agent: 'general' });
      const b = await toolCalls.create({ sessionId: session.id, name: 'Read', arguments: { path: 'a.ts' }, agent: 'general' });
      expect([a.seq, b.seq]).toEqual([1, 2]);
      const decision = { effect: 'ask', rule: 'commands.default', reason: 'No rule names npm.' };
      await toolCalls.update(a.id, { decision, result: { exit_code: 0, stdout: 'ok\u0001' } });
      await expect(toolCalls.findById(a.id)).resolves.toMatchObject({ decision, result: { exit_code: 0, stdout: 'ok\u0001' } });
      expect((await toolCalls.listForSession(session.id)).map((c) => c.name)).toEqual(['Bash', 'Read']);
      await expectViolation(toolCalls.create({ sessionId: session.id, seq: 1, name: 'Bash', arguments: {}, agent: 'general' }), 'tool_calls_session_seq_key');
    });

    it("writes the session's counters with a call's row when given, in the same statement, and only that session's", async () => {
      const { toolCalls, sessions } = r();
      const { session } = await fixture();
      const { session: other } = await fixture();
      await toolCalls.create({ sessionId: session.id, name: 'Bash', arguments: { command: 'ls' }, agent: 'general' }, { actionsUsed: 7, extensionsUsed: 1 });
      await expect(sessions.findById(session.id)).resolves.toMatchObject({ actionsUsed: 7, extensionsUsed: 1 });
      await expect(sessions.findById(other.id)).resolves.toMatchObject({ actionsUsed: 0, extensionsUsed: 0 });
      // A call refused by a constraint leaves the counters as they were.
      await expectViolation(toolCalls.create({ sessionId: session.id, seq: 1, name: 'Bash', arguments: {}, agent: 'general' }, { actionsUsed: 9, extensionsUsed: 2 }), 'tool_calls_session_seq_key');
      await expect(sessions.findById(session.id)).resolves.toMatchObject({ actionsUsed: 7, extensionsUsed: 1 });
    });

    it('records output jsonb cannot hold (U+0000, lone surrogates) with the replacement character', async () => {
      const { toolCalls, events } = r();
      const { session } = await fixture();
      const call = await toolCalls.create({ sessionId: session.id, name: 'Bash', arguments: { command: 'printf "a\\0b"', note: 'x\u0000' }, agent: 'general' });
      await toolCalls.update(call.id, { result: { exit_code: 0, stdout: 'a\u0000b\uD800' } });
      await expect(toolCalls.findById(call.id)).resolves.toMatchObject({ arguments: { note: 'x\uFFFD' }, result: { stdout: 'a\uFFFDb\uFFFD' } });
      await expect(toolCalls.update(call.id, { result: null })).resolves.toMatchObject({ result: null });
      await expect(events.appendMany([{ sessionId: session.id, projectId: null, type: 'tool_output', payload: { chunk: '\u0000' } }])).resolves.toMatchObject([{ payload: { chunk: '\uFFFD' } }]);
    });

    it('answers an approval once; the second answer learns it lost', async () => {
      const { approvals, toolCalls } = r();
      const { session, user, project } = await fixture();
      const call = await toolCalls.create({ sessionId: session.id, name: 'Bash', arguments: { command: 'rm -rf build' }, agent: 'general' });
      const approval = await approvals.create({ sessionId: session.id, toolCallId: call.id, kind: 'command', payload: { command: 'rm -rf build' }, agent: 'general' });
      if (!approval) throw new Error('the session is running; the approval should have been created');
      expect(approval).toMatchObject({ state: 'pending', flags: {}, decidedBy: null, decidedAt: null });
      await expect(approvals.findById(approval.id)).resolves.toMatchObject({ id: approval.id, projectId: project.id });
      const [first, second] = await Promise.all([
        approvals.answer(approval.id, { state: 'approved', decidedBy: user.id }),
        approvals.answer(approval.id, { state: 'rejected', decidedBy: user.id, reason: 'no' }),
      ]);
      expect([first, second].filter((x) => x !== undefined)).toHaveLength(1);
      const stored = await approvals.findById(approval.id);
      expect(stored?.state).toBe((first ?? second)?.state);
      expect(stored?.decidedAt).toBeInstanceOf(Date);
    });

    it('closes every pending approval of a session and lists by state and project scope', async () => {
      const { approvals } = r();
      const { session, user, project } = await fixture();
      for (const kind of ['write', 'changes', 'third_party'] as const) {
        await approvals.create({ sessionId: session.id, kind, payload: { diff: '--- a\n+++ b\n' }, flags: { thirdParty: [{ path: 'package.json', class: 'manifest' }] }, agent: 'general' });
      }
      await expect(approvals.list({ projectIds: [project.id], state: 'pending' })).resolves.toHaveLength(3);
      await expect(approvals.list({ projectIds: [] })).resolves.toEqual([]);
      const closed = await approvals.closePendingForSession(session.id, { state: 'rejected', decidedBy: user.id, reason: 'session stopped' });
      expect(closed).toHaveLength(3);
      await expect(approvals.list({ sessionId: session.id, state: 'pending' })).resolves.toEqual([]);
      await expect(approvals.closePendingForSession(session.id, { state: 'rejected', decidedBy: null })).resolves.toEqual([]);
    });

    it('refuses an approval of an unknown kind, and an answered one without a time', async () => {
      const { approvals } = r();
      const { session } = await fixture();
      await expectViolation(approvals.create({ sessionId: session.id, kind: 'anything' as 'command', payload: {}, agent: 'general' }), 'approvals_kind_check');
      await expectViolation(approvals.create({ sessionId: session.id, kind: 'command', payload: {}, agent: 'general', state: 'approved' }), 'approvals_decision_consistent');
    });

    it('remembers approved commands exactly: text, directory and session, with the approval', async () => {
      const { approvedCommands, approvals } = r();
      const { session, user } = await fixture();
      const other = await fixture();
      const approval = await approvals.create({ sessionId: session.id, kind: 'command', payload: { command: 'npm test' }, agent: 'general' });
      if (!approval) throw new Error('the session is running; the approval should have been created');
      const entry = { command: 'npm test', workingDirectory: '/workspace', approvalId: approval.id };
      await approvedCommands.remember(session.id, entry, user.id);
      await approvedCommands.remember(session.id, entry, user.id);
      await expect(approvedCommands.has(session.id, 'npm test', '/workspace')).resolves.toBe(true);
      await expect(approvedCommands.has(session.id, 'npm test ', '/workspace')).resolves.toBe(false);
      await expect(approvedCommands.has(session.id, 'npm test', '/workspace/src')).resolves.toBe(false);
      await expect(approvedCommands.has(other.session.id, 'npm test', '/workspace')).resolves.toBe(false);
      await expect(approvedCommands.listForSession(session.id)).resolves.toMatchObject([{ command: 'npm test', workingDirectory: '/workspace', approvalId: approval.id, approvedBy: user.id }]);
    });
  });

  describe('events', () => {
    it('replays what a subscriber missed, only within its sessions and projects', async () => {
      const { events } = r();
      const a = (await events.appendMany([{ sessionId: 's-a', projectId: 'p-1', type: 'session.started', payload: { n: 1 } }]))[0]!;
      const b = (await events.appendMany([{ sessionId: 's-b', projectId: 'p-2', type: 'approval.requested', payload: { n: 2 } }]))[0]!;
      const c = (await events.appendMany([{ sessionId: 's-a', projectId: 'p-1', type: 'session.ended', payload: { n: 3 } }]))[0]!;
      expect(b.seq).toBeGreaterThan(a.seq);
      await expect(events.findBySeq(b.seq)).resolves.toEqual(b);
      expect((await events.listAfter(a.seq, { sessionIds: ['s-a'] })).map((e) => e.seq)).toEqual([c.seq]);
      expect((await events.listAfter(0, { projectIds: ['p-2'] })).map((e) => e.seq)).toEqual([b.seq]);
      expect((await events.listAfter(a.seq - 1, { sessionIds: ['s-b'], projectIds: ['p-1'] })).map((e) => e.seq)).toEqual([a.seq, b.seq, c.seq]);
      await expect(events.listAfter(0, {})).resolves.toEqual([]);
    });
  });

  describe('transactions', () => {
    it('writes several tables all or nothing', async () => {
      const { transactions, users, projects } = r();
      const email = `${unique('tx')}@example.test`;
      await expectViolation(
        transactions.run(async (tx) => {
          await users.withTx(tx).create({ email, displayName: 'T', role: 'developer' });
          await projects.withTx(tx).create({ name: '', repositorySource: '/x' });
        }),
        'projects_name_check',
      );
      await expect(users.findByEmail(email)).resolves.toBeUndefined();

      await transactions.run(async (tx) => {
        const user = await users.withTx(tx).create({ email, displayName: 'T', role: 'developer' });
        await expect(users.withTx(tx).findById(user.id)).resolves.toEqual(user);
      });
      await expect(users.findByEmail(email)).resolves.toMatchObject({ displayName: 'T' });
    });
  });
});
