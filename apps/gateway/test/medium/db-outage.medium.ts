import { initPolicyEngine, recommendedPolicy } from '@lemniscate/policy';
import { EXECUTION_DEFAULTS } from '@lemniscate/session';
import { AuditService } from '../../src/audit/audit.service';
import { openDatabase, type Database } from '../../src/db/database';
import { ApprovedCommandsRepository } from '../../src/db/repositories/approved-commands.repository';
import { ApprovalsRepository } from '../../src/db/repositories/approvals.repository';
import { AuditLogRepository } from '../../src/db/repositories/audit-log.repository';
import { EventsRepository } from '../../src/db/repositories/events.repository';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { ToolCallsRepository } from '../../src/db/repositories/tool-calls.repository';
import { freshDatabase, startPgProxy, type PgProxy, type TestDatabase } from '../support/db';
import { EventsService } from '../../src/events/events.service';
import { ScriptedProvider, parseModelScript } from '../../src/model';
import { DbSessionRecorder } from '../../src/runtime/db-recorder';
import { SessionRunner } from '../../src/runtime/session-runner';
import { InMemoryExecHost } from '../support/runtime-fakes';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(120_000);

// A PostgreSQL restart as the gateway sees it: every connection reset and new ones refused for a
// fraction of a second. A proxy between the gateway and the shared server does it (the server itself
// is not restarted). The exec-host is the in-memory one: the fault here is the database.

/** What a person must never be shown: the SQL of a failed statement or its parameters. */
const SQL = /Failed query|insert into|update "|select "|params:|\$1/i;

/** Cut lengths spread over 0.2–0.6 s, generated so that each run of the file covers the range. */
const cuts = (n: number) => Array.from({ length: n }, (_, i) => Math.round(200 + (400 * i) / Math.max(1, n - 1)));

describe('the gateway across a PostgreSQL outage of 0.2–0.6 s', () => {
  let direct: TestDatabase;
  let proxy: PgProxy;
  let database: Database;
  let gw: Gateway;
  let project: string;
  let dev: { token: string; userId: string };

  beforeAll(async () => {
    await initPolicyEngine();
    direct = await freshDatabase('postgres');
    if (direct.driver.kind !== 'postgres') throw new Error('expected PostgreSQL');
    proxy = await startPgProxy(direct.driver.url);
    database = await openDatabase({ url: proxy.url });
    gw = await startGateway(database);
    const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'outage');
    dev = await createUser(gw, admin, 'outage-dev@example.test', 'developer', [project]);
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
    await proxy?.close();
    await direct?.close();
  });

  async function auditOf(kind: string) {
    return gw.app.get(AuditService).list({ kinds: [kind] }, { order: 'asc', limit: 1000 });
  }

  it.each(cuts(3).map((ms) => [ms]))('audit appends made during a %i ms cut all land, once each, in order, on a chain that verifies', async (ms) => {
    const audit = gw.app.get(AuditService);
    const kind = `test.cut_${ms}`;
    const resetBefore = proxy.stats.reset;
    const appends: Promise<unknown>[] = [];
    let cut: Promise<void> | undefined;
    for (let i = 0; i < 120; i++) {
      appends.push(audit.append({ actor: 'system', kind, payload: { i } }));
      if (i === 30) cut = proxy.cut(ms);
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 10));
    }
    const settled = await Promise.allSettled(appends);
    await cut;
    expect(settled.filter((s) => s.status === 'rejected').map((s) => String((s as PromiseRejectedResult).reason))).toEqual([]);
    expect(proxy.stats.reset).toBeGreaterThan(resetBefore);
    const stored = await auditOf(kind);
    expect(stored.map((e) => (e.payload as { i: number }).i)).toEqual(Array.from({ length: 120 }, (_, i) => i));
    expect(await audit.verify()).toMatchObject({ ok: true });
  });

  it('an audit batch whose COMMIT landed but whose reply was lost is not written a second time', async () => {
    const audit = gw.app.get(AuditService);
    // A full round (a transaction ending in COMMIT), not the one statement at the head last left.
    (gw.app.get(AuditLogRepository) as unknown as { knownHead: unknown }).knownHead = undefined;
    const lostBefore = proxy.stats.commitRepliesLost;
    proxy.loseNextCommitReply();
    const entries = await Promise.all([0, 1, 2, 3].map((i) => audit.append({ actor: 'system', kind: 'test.lost_reply', payload: { i } })));
    expect(proxy.stats.commitRepliesLost).toBe(lostBefore + 1);
    expect((await auditOf('test.lost_reply')).map((e) => e.payload)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
    // What the callers were told is what is stored.
    expect(entries.map((e) => e.hash)).toEqual((await auditOf('test.lost_reply')).map((e) => e.hash));
    expect(await audit.verify()).toMatchObject({ ok: true });
  });

  it('an audit round at the head last left, whose statement committed but whose reply was lost, is not written a second time', async () => {
    const audit = gw.app.get(AuditService);
    await audit.append({ actor: 'system', kind: 'test.lost_reply_known', payload: { i: -1 } });
    expect((gw.app.get(AuditLogRepository) as unknown as { knownHead: unknown }).knownHead).toBeDefined();
    const lostBefore = proxy.stats.commitRepliesLost;
    proxy.loseNextReplyTo(/lemniscate_audit_known_head_round/);
    const entries = await Promise.all([0, 1, 2, 3].map((i) => audit.append({ actor: 'system', kind: 'test.lost_reply_known', payload: { i } })));
    expect(proxy.stats.commitRepliesLost).toBe(lostBefore + 1);
    const stored = (await auditOf('test.lost_reply_known')).filter((e) => (e.payload as { i: number }).i >= 0);
    expect(stored.map((e) => e.payload)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
    expect(entries.map((e) => e.hash)).toEqual(stored.map((e) => e.hash));
    expect(await audit.verify()).toMatchObject({ ok: true });
  });

  async function newSession(mode: 'headless' | 'interactive' = 'headless'): Promise<string> {
    const row = await gw.app.get(SessionsRepository).create({
      projectId: project,
      userId: dev.userId,
      parentSessionId: null,
      depth: 0,
      agent: 'general',
      instruction: 'run forty test shards',
      policyVersionId: null,
      mode,
      headless: mode === 'headless',
      baseCommit: null,
      branch: null,
      includedUncommitted: false,
    });
    return row.id;
  }

  function recorderFor(sessionId: string): DbSessionRecorder {
    const app = gw.app;
    return new DbSessionRecorder(
      {
        sessions: app.get(SessionsRepository),
        toolCalls: app.get(ToolCallsRepository),
        approvals: app.get(ApprovalsRepository),
        approvalsService: app.get(ApprovalsService),
        approvedCommands: app.get(ApprovedCommandsRepository),
        audit: app.get(AuditService),
        events: app.get(EventsService),
      },
      { id: sessionId, projectId: project, rootId: sessionId, agent: 'general' },
    );
  }

  it('a tool call whose INSERT landed but whose reply was lost is recorded once', async () => {
    const sessionId = await newSession();
    proxy.loseNextReplyTo(/insert into "tool_calls"/);
    const lostBefore = proxy.stats.commitRepliesLost;
    const callId = await recorderFor(sessionId).proposeToolCall({ name: 'Read', arguments: { path: 'README.md' }, agent: 'general' });
    expect(proxy.stats.commitRepliesLost).toBe(lostBefore + 1);
    const rows = await gw.app.get(ToolCallsRepository).listForSession(sessionId);
    expect(rows.map((r) => r.id)).toEqual([callId]);
    expect((await auditOf('tool_call.proposed')).filter((e) => e.sessionId === sessionId)).toHaveLength(1);
  });

  it('an approval request whose INSERT landed but whose reply was lost is one pending approval, announced and audited once', async () => {
    const sessionId = await newSession('interactive');
    const approvals = gw.app.get(ApprovalsService);
    proxy.loseNextReplyTo(/insert into "approvals"/);
    const lostBefore = proxy.stats.commitRepliesLost;
    const view = await approvals.request({ sessionId, toolCallId: null, kind: 'command', payload: { command: 'npm test', workingDirectory: '/workspace' }, agent: 'general' });
    expect(proxy.stats.commitRepliesLost).toBe(lostBefore + 1);
    const rows = await gw.app.get(ApprovalsRepository).list({ sessionId });
    expect(rows.map((r) => ({ id: r.id, state: r.state }))).toEqual([{ id: view.id, state: 'pending' }]);
    expect((await auditOf('approval.request')).filter((e) => e.sessionId === sessionId).map((e) => (e.payload as { approvalId: string }).approvalId)).toEqual([view.id]);

    // Its expiry, whose UPDATE landed but whose reply was lost: expired once, audited once.
    proxy.loseNextReplyTo(/update "approvals"/);
    await expect(approvals.expire(view.id, 'nobody answered within 1 second')).resolves.toBe(true);
    expect(proxy.stats.commitRepliesLost).toBe(lostBefore + 2);
    expect((await gw.app.get(ApprovalsRepository).findById(view.id))?.state).toBe('expired');
    expect((await auditOf('approval.expired')).filter((e) => e.sessionId === sessionId)).toHaveLength(1);
  });

  it('a headless session cut three times (0.2–0.6 s) completes: right status, no SQL shown, one audit entry per call shown, chain intact', async () => {
    const sessionId = await newSession();
    const calls = 40;
    const cutAt = new Map(cuts(3).map((ms, i) => [`npm test -- --shard=${8 + i * 12}`, ms]));
    const execHost = new InMemoryExecHost({ 'README.md': 'hello\n' });
    const pending: Promise<void>[] = [];
    // The cut starts while the command runs and is not awaited: the loop's next writes meet it.
    execHost.onExec = async (command) => {
      const ms = cutAt.get(command);
      if (ms !== undefined) pending.push(proxy.cut(ms));
    };
    // Live delivery during a cut can miss events (the listening connection is cut too, and clients are
    // told to replay); what a person is shown is the session's stream as stored and replayed.
    const live: string[] = [];
    const unsubscribe = gw.app.get(EventsService).subscribe((e) => {
      if (e.sessionId === sessionId) live.push(e.type);
    });
    const resetBefore = proxy.stats.reset;
    const controller = new AbortController();
    const runner = new SessionRunner(
      {
        sessionId,
        project: 'outage',
        repository: { source: '/repo' },
        instruction: 'run forty test shards',
        headless: true,
        role: 'main',
        depth: 0,
        parentSessionId: null,
        agent: { name: 'general', prompt: null },
        execution: { ...EXECUTION_DEFAULTS, toolLoopThreshold: 1000 },
      },
      {
        model: new ScriptedProvider(
          parseModelScript({ turns: [{ repeat: calls, tool_calls: [{ name: 'Bash', arguments: { command: 'npm test -- --shard={{i}}' } }] }, { text: 'Ran forty shards.' }] }, 'outage.json'),
          'outage.json',
        ),
        execHost,
        recorder: recorderFor(sessionId),
        policy: async () => recommendedPolicy,
        signal: controller.signal,
        abortReason: () => 'stopped',
      },
    );
    let result;
    try {
      result = await runner.run();
      await Promise.all(pending);
      await gw.app.get(AuditService).drain();
    } finally {
      unsubscribe();
    }
    const shown = (await gw.app.get(EventsRepository).listAfter(0, { sessionIds: [sessionId] }, 1000)).map((e) => ({ type: e.type, payload: (e.payload ?? {}) as Record<string, unknown> }));
    expect(live.length).toBeGreaterThan(0);
    expect(proxy.stats.reset).toBeGreaterThan(resetBefore);
    expect(execHost.commands).toHaveLength(calls);
    expect(result.outcome).toEqual({ status: 'completed', stopReason: null });
    expect(result.exitCode).toBe(0);

    const session = await gw.app.get(SessionsRepository).findById(sessionId);
    expect(session).toMatchObject({ status: 'completed', stopReason: null, summary: 'Ran forty shards.', actionsUsed: calls });
    const rows = await gw.app.get(ToolCallsRepository).listForSession(sessionId);
    expect(rows).toHaveLength(calls);
    for (const row of rows) {
      expect(row.decision).toMatchObject({ effect: 'allow' });
      expect(row.result).toMatchObject({ ok: true });
    }
    // Everything a person sees of the session, with no SQL in it.
    const visible = JSON.stringify({ summary: session?.summary, results: rows.map((r) => r.result), shown });
    expect(visible).not.toMatch(SQL);

    // An entry shown is an entry audited: the calls the stream showed are the calls the audit holds.
    const shownCalls = shown.filter((e) => e.type === 'tool_call_proposed').map((e) => e.payload.callId);
    const audited = (await auditOf('tool_call.proposed')).filter((e) => e.sessionId === sessionId).map((e) => (e.payload as { callId: string }).callId);
    expect(new Set(shownCalls).size).toBe(calls);
    expect(audited).toEqual(rows.map((r) => r.id));
    expect([...new Set(shownCalls)].sort()).toEqual([...audited].sort());
    expect((await auditOf('session.ended')).filter((e) => e.sessionId === sessionId).map((e) => e.payload)).toEqual([expect.objectContaining({ status: 'completed' })]);
    expect(shown.filter((e) => e.type === 'session_completed')).toHaveLength(1);
    expect(await gw.app.get(AuditService).verify()).toMatchObject({ ok: true });
  });

  it('an API request while the database is away answers 503 with a sentence, and the next one after it is back succeeds', async () => {
    await proxy.down();
    let during;
    try {
      during = await gw.http().get('/api/v1/sessions').set(bearer(dev.token));
    } finally {
      await proxy.restore();
    }
    expect(during.status).toBe(503);
    expect(during.body).toMatchObject({ code: 'database_unavailable', message: "The gateway's database is not reachable right now; try again in a few seconds." });
    expect(during.headers['retry-after']).toBe('5');
    expect(JSON.stringify(during.body)).not.toMatch(SQL);
    const after = await gw.http().get('/api/v1/sessions').set(bearer(dev.token));
    expect(after.status).toBe(200);
  });
});
