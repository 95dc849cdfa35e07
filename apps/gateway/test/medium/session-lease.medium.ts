import { withTestDatabases } from '../support/db';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { EventsService } from '../../src/events/events.service';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { SessionLeaseService } from '../../src/sessions/session-lease.service';
import { SessionRunRegistry } from '../../src/sessions/session-run.registry';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(60_000);

/**
 * A session whose gateway process died (killed, out of memory, cut off from the database) is an
 * orphan: its loop is gone with the process. Any gateway ends it as a crash once its lease is over.
 */
withTestDatabases((db) => {
  let gw: Gateway;
  let execHost: ExecHostDouble;
  let admin: string;
  let project: string;
  let dev: { token: string; userId: string };
  const LEASE = 2;

  beforeAll(async () => {
    execHost = await startExecHostDouble();
    gw = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: execHost.url, LEMNISCATE_EXEC_HOST_TOKEN: execHost.token, LEMNISCATE_LOOP_LEASE_SECONDS: String(LEASE) });
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'orphans');
    dev = await createUser(gw, admin, 'orphan-dev@example.test', 'developer', [project]);
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
  });

  async function newSession(): Promise<string> {
    const res = await gw.http().post('/api/v1/sessions').set(bearer(dev.token)).send({ projectId: project, instruction: 'outlive my gateway' });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  /** A session as a gateway that has since died left it: a runner that stopped reporting, a sandbox, a child, approvals pending. */
  async function leftByADeadGateway(lastSeen: Date) {
    const sessions = gw.app.get(SessionsRepository);
    const id = await newSession();
    await sessions.update(id, { sandboxId: `sbx-${id}`, finalPatch: 'diff --git a/x b/x\n' });
    const child = await sessions.create({
      projectId: project,
      userId: dev.userId,
      parentSessionId: id,
      depth: 1,
      agent: 'explore',
      instruction: 'look around',
      policyVersionId: null,
      mode: 'interactive',
      headless: false,
      baseCommit: null,
      branch: null,
      includedUncommitted: false,
    });
    const approvals = gw.app.get(ApprovalsService);
    const own = await approvals.request({ sessionId: id, kind: 'command', payload: { command: 'make' }, agent: 'general' });
    const childs = await approvals.request({ sessionId: child.id, kind: 'question', payload: { question: 'which one?', options: [] }, agent: 'explore' });
    // Last: from here on, this gateway's own sweep timer may end the session at any moment.
    await sessions.markRunner([id, child.id], 'gateway:dead', lastSeen);
    return { id, child: child.id, approvals: [own.id, childs.id] };
  }

  it('ends an orphan as a crash: approvals expired, subagents ended, sandbox destroyed, patch kept, audited, announced', async () => {
    const events = gw.app.get(EventsService);
    const seen: { type: string; sessionId?: string | null; payload: Record<string, unknown> }[] = [];
    const unsubscribe = events.subscribe((e) => void seen.push(e));
    try {
      const left = await leftByADeadGateway(new Date(Date.now() - 60_000));
      // The gateway's own timer may get there first; either way the sweep has run once this returns.
      await gw.app.get(SessionLeaseService).sweep();
      const root = (await gw.http().get(`/api/v1/sessions/${left.id}`).set(bearer(dev.token))).body;
      expect(root).toMatchObject({ status: 'failed', stopReason: 'crash', finalPatch: 'diff --git a/x b/x\n' });
      expect(root.summary).toMatch(
        /^The gateway running this session stopped \(its loop last reported at .+\); the session cannot continue and has ended\. The changes approved so far are kept in its patch\.$/,
      );
      expect((await gw.http().get(`/api/v1/sessions/${left.child}`).set(bearer(dev.token))).body).toMatchObject({ status: 'failed', stopReason: 'crash' });
      for (const approvalId of left.approvals) {
        expect((await gw.http().get(`/api/v1/approvals/${approvalId}`).set(bearer(dev.token))).body).toMatchObject({ state: 'expired' });
      }
      const late = await gw.http().post(`/api/v1/approvals/${left.approvals[0]}/approve`).set(bearer(dev.token)).send({});
      expect(late.status).toBe(409);
      expect(execHost.destroyed).toContain(`sbx-${left.id}`);
      expect((await auditKinds(gw, ['session.orphaned'])).at(-1)).toMatchObject({
        actor: 'system',
        sessionId: left.id,
        payload: { runner: 'gateway:dead', subagentsEnded: [left.child], approvalsExpired: left.approvals, sandboxDestroyed: true },
      });
      const mine = seen.filter((e) => e.sessionId === left.id);
      expect(mine.filter((e) => e.type === 'approval_answered').map((e) => e.payload)).toEqual([
        expect.objectContaining({ approvalId: left.approvals[0], answer: 'rejected', by: { kind: 'process', description: 'the gateway running the session stopped' }, class: 'approval_expired' }),
        expect.objectContaining({ approvalId: left.approvals[1], subSessionId: left.child, class: 'approval_expired' }),
      ]);
      expect(mine.at(-1)).toMatchObject({ type: 'session_failed', payload: { status: 'failed', stopReason: 'crash', class: 'crash', exitCode: 1 } });
      // A second sweep finds nothing more to do.
      expect(await gw.app.get(SessionLeaseService).sweep()).not.toContain(left.id);
    } finally {
      unsubscribe();
    }
  });

  it('leaves alone a session whose gateway reported within the lease, and one recorded without a loop', async () => {
    const recent = await leftByADeadGateway(new Date());
    const withoutLoop = await newSession();
    const ended = await gw.app.get(SessionLeaseService).sweep();
    expect(ended).not.toContain(recent.id);
    expect(ended).not.toContain(withoutLoop);
    expect((await gw.app.get(SessionsRepository).findById(recent.id))?.status).toBe('running');
    expect((await gw.app.get(SessionsRepository).findById(withoutLoop))?.status).toBe('running');
  });

  it("keeps this gateway's own loops alive with a heartbeat, however long they run", async () => {
    const lease = gw.app.get(SessionLeaseService);
    const id = await newSession();
    await lease.hold(id);
    try {
      // Longer than the lease: the heartbeat (a third of it) keeps it fresh.
      await new Promise((resolve) => setTimeout(resolve, (LEASE + 1) * 1000));
      const row = await gw.app.get(SessionsRepository).findById(id);
      expect(row).toMatchObject({ status: 'running', runner: lease.runner });
      expect(Date.now() - row!.runnerSeenAt!.getTime()).toBeLessThan(LEASE * 1000);
      expect(await lease.sweep(new Date(Date.now() + 10 * LEASE * 1000))).not.toContain(id);
    } finally {
      lease.release(id);
    }
  });

  it('another gateway ending one of our sessions as an orphan stops our loop for it', async () => {
    const lease = gw.app.get(SessionLeaseService);
    const registry = gw.app.get(SessionRunRegistry);
    const id = await newSession();
    await lease.hold(id);
    const run = registry.register(id);
    try {
      await gw.app
        .get(EventsService)
        .publish({ type: 'session_failed', sessionId: id, projectId: project, payload: { status: 'failed', stopReason: 'crash', class: 'crash', message: 'ended elsewhere', exitCode: 1 } });
      // The event reaches the listener once stored; a few polls at most.
      for (let i = 0; i < 100 && !run.signal.aborted; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(run.signal.aborted).toBe(true);
    } finally {
      run.done();
      lease.release(id);
    }
  });

  it('a lease the environment cannot read stops the start with its name', async () => {
    await expect(startGateway(db(), { LEMNISCATE_LOOP_LEASE_SECONDS: 'soon' })).rejects.toThrow('LEMNISCATE_LOOP_LEASE_SECONDS: must be a number of seconds');
    await expect(startGateway(db(), { LEMNISCATE_LOOP_LEASE_SECONDS: '1' })).rejects.toThrow(/LEMNISCATE_LOOP_LEASE_SECONDS/);
  });
});
