import { randomUUID } from 'node:crypto';
import { AuditService } from '../../src/audit/audit.service';
import { withTestDatabases } from '../support/db';
import { ApprovedCommandsRepository } from '../../src/db/repositories/approved-commands.repository';
import { ToolCallsRepository } from '../../src/db/repositories/tool-calls.repository';
import { DbSessionRecorder } from '../../src/runtime/db-recorder';
import { ApprovalsRepository } from '../../src/db/repositories/approvals.repository';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { Transactions } from '../../src/db/repositories/transactions';
import { EventsService } from '../../src/events/events.service';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { SessionRunRegistry } from '../../src/sessions/session-run.registry';
import { SessionsService } from '../../src/sessions/sessions.service';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, createUser, login, PASSWORD, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(60_000);

withTestDatabases((db) => {
  let gw: Gateway;
  let execHost: ExecHostDouble;
  let admin: string;
  let project: string;
  let dev: { token: string; userId: string };

  beforeAll(async () => {
    execHost = await startExecHostDouble();
    gw = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: execHost.url, LEMNISCATE_EXEC_HOST_TOKEN: execHost.token });
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    project = await createProject(gw, admin, 'approvals');
    dev = await createUser(gw, admin, 'dev@example.test', 'developer', [project]);
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
  });

  async function newSession(token = dev.token, extra: Record<string, unknown> = {}): Promise<string> {
    const res = await gw
      .http()
      .post('/api/v1/sessions')
      .set(bearer(token))
      .send({ projectId: project, instruction: 'make the build green', ...extra });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }
  const ask = (sessionId: string, command = 'npm install left-pad') => gw.app.get(ApprovalsService).request({ sessionId, kind: 'command', payload: { command }, agent: 'general' });

  it('records the instruction with the policy version in force, audited', async () => {
    const id = await newSession();
    const res = await gw.http().get(`/api/v1/sessions/${id}`).set(bearer(dev.token));
    expect(res.body).toMatchObject({ status: 'running', instruction: 'make the build green', projectId: project, userId: dev.userId, depth: 0 });
    // No policy published yet: the built-in default applies and the session records no version.
    expect(res.body.policyVersionId).toBeNull();
    expect((await auditKinds(gw, ['session.instruction'])).at(-1)).toMatchObject({ sessionId: id, payload: { instruction: 'make the build green', policyVersion: null } });
  });

  it('records tool calls with their decision and result, audits a digest of the output, and lists them in order', async () => {
    const id = await newSession();
    const sessions = gw.app.get(SessionsService);
    const decision = { effect: 'ask' as const, rule: 'commands.default', reason: 'No rule names this command; the default is to ask.' };
    const call = await sessions.recordToolCall(id, { name: 'Bash', arguments: { command: 'npm test' }, decision, agent: 'general' });
    await sessions.recordToolCall(id, { name: 'Read', arguments: { path: 'README.md' }, decision: { effect: 'allow', rule: 'tools.read', reason: 'Reading is free.' }, agent: 'general' });
    await sessions.recordToolResult(call.id, { exitCode: 1, stdout: 'FAIL average.test.js\n', stderr: '', truncated: false, durationMs: 812, idleMs: 0 });
    const res = await gw.http().get(`/api/v1/sessions/${id}/tool-calls`).set(bearer(dev.token));
    expect(res.body.map((c: { seq: number; name: string }) => [c.seq, c.name])).toEqual([
      [1, 'Bash'],
      [2, 'Read'],
    ]);
    expect(res.body[0]).toMatchObject({ decision, result: { exitCode: 1, stdout: 'FAIL average.test.js\n' } });
    const audited = (await auditKinds(gw, ['tool_call.proposed', 'policy.decision', 'tool_call.result'])).filter((e) => e.sessionId === id);
    expect(audited.map((e) => e.kind)).toEqual(['tool_call.proposed', 'policy.decision', 'tool_call.proposed', 'policy.decision', 'tool_call.result']);
    expect(JSON.stringify(audited.at(-1)?.payload)).not.toContain('FAIL average');
    await expect(sessions.recordToolResult('missing', { exitCode: 0, stdout: '', stderr: '', truncated: false, durationMs: 0, idleMs: 0 })).rejects.toThrow('There is no tool call missing.');
  });

  it("every view of a request carries its session's instruction and the flags the runner set (the policy's reason, files reverted)", async () => {
    const sessionId = await newSession();
    const flags = {
      thirdParty: [],
      policy: { rule: 'commands.default', reason: 'No rule names this command; the default is to ask.' },
      reverted: [{ path: '.git/hooks/pre-push', reason: 'Git hooks may not be changed.' }],
    };
    const approval = await gw.app.get(ApprovalsService).request({ sessionId, kind: 'command', payload: { command: 'npm ci' }, agent: 'general', flags });
    expect(approval).toMatchObject({ instruction: 'make the build green', flags });
    const listed = await gw.http().get(`/api/v1/approvals?sessionId=${sessionId}`).set(bearer(dev.token));
    expect(listed.body).toEqual([expect.objectContaining({ id: approval.id, instruction: 'make the build green', flags })]);
    const one = await gw.http().get(`/api/v1/approvals/${approval.id}`).set(bearer(dev.token));
    expect(one.body).toMatchObject({ instruction: 'make the build green', flags });
    const answered = await gw.http().post(`/api/v1/approvals/${approval.id}/reject`).set(bearer(dev.token)).send({ reason: 'not now' });
    expect(answered.body).toMatchObject({ state: 'rejected', instruction: 'make the build green', flags });
  });

  it("is answered by the session's developer once; a second answer is a 409 with a sentence", async () => {
    const approval = await ask(await newSession());
    const ok = await gw.http().post(`/api/v1/approvals/${approval.id}/approve`).set(bearer(dev.token)).send({});
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ state: 'approved', decidedBy: dev.userId });
    const again = await gw.http().post(`/api/v1/approvals/${approval.id}/reject`).set(bearer(dev.token)).send({});
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('approval_already_answered');
    expect(again.body.message).toMatch(/^This approval was already answered: it is approved at /);
    expect((await auditKinds(gw, ['approval.answer'])).at(-1)).toMatchObject({ actor: `user:${dev.userId}`, payload: { approvalId: approval.id, answer: 'approved' } });
  });

  it('lets exactly one of two simultaneous answers win', async () => {
    const approval = await ask(await newSession());
    const [a, b] = await Promise.all([
      gw.http().post(`/api/v1/approvals/${approval.id}/approve`).set(bearer(dev.token)).send({}),
      gw.http().post(`/api/v1/approvals/${approval.id}/reject`).set(bearer(admin)).send({}),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 409]);
  });

  it('remembers an identical command only when the policy says reapproval: exempt', async () => {
    const sessionId = await newSession();
    const first = await gw.app
      .get(ApprovalsService)
      .request({ sessionId, kind: 'command', payload: { command: 'make lint', workingDirectory: '/workspace' }, flags: { thirdParty: [], reapprovalExempt: true }, agent: 'general' });
    const refused = await gw.http().post(`/api/v1/approvals/${first.id}/approve`).set(bearer(dev.token)).send({ rememberCommand: true });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toBe("This project's policy requires approving every command again (commands.reapproval: always).");
    expect((await gw.http().get(`/api/v1/approvals/${first.id}`).set(bearer(dev.token))).body.state).toBe('pending');

    const published = await gw
      .http()
      .post(`/api/v1/projects/${project}/policy`)
      .set(bearer(admin))
      .send({ document: { version: 1, commands: { reapproval: 'exempt' } } });
    expect(published.status).toBe(201);
    const ok = await gw.http().post(`/api/v1/approvals/${first.id}/approve`).set(bearer(dev.token)).send({ rememberCommand: true });
    expect(ok.status).toBe(200);
    const approvals = gw.app.get(ApprovalsService);
    await expect(approvals.isCommandApproved(sessionId, 'make lint', '/workspace')).resolves.toBe(true);
    await expect(approvals.isCommandApproved(sessionId, 'make lint ', '/workspace')).resolves.toBe(false);
    await expect(approvals.isCommandApproved(sessionId, 'make lint', '/workspace/src')).resolves.toBe(false);

    const write = await approvals.request({ sessionId, kind: 'write', payload: { diff: '--- a/x\n+++ b/x\n' }, agent: 'general' });
    const notCommand = await gw.http().post(`/api/v1/approvals/${write.id}/approve`).set(bearer(dev.token)).send({ rememberCommand: true });
    expect(notCommand.status).toBe(400);
  });

  describe('L1/X4: an approval nobody answers expires', () => {
    const recorderFor = (sessionId: string) =>
      new DbSessionRecorder(
        {
          sessions: gw.app.get(SessionsRepository),
          toolCalls: gw.app.get(ToolCallsRepository),
          approvals: gw.app.get(ApprovalsRepository),
          approvalsService: gw.app.get(ApprovalsService),
          approvedCommands: gw.app.get(ApprovedCommandsRepository),
          audit: gw.app.get(AuditService),
          events: gw.app.get(EventsService),
        },
        { id: sessionId, projectId: project, rootId: sessionId, agent: 'general' },
      );
    const auditOf = (sessionId: string, kind: string) => gw.app.get(AuditService).list({ sessionId, kinds: [kind] }, { order: 'asc', limit: 100 });
    const draft = { kind: 'command' as const, payload: { command: 'make deploy' }, flags: { thirdParty: [] }, agent: 'general', toolCallId: null };

    it('at its deadline: stored expired by the process, audited, announced with approval_expired; a late answer is a 409', async () => {
      const id = await newSession();
      const published: { type: string; payload: Record<string, unknown> }[] = [];
      const unsubscribe = gw.app.get(EventsService).subscribe((e) => void published.push(e as never));
      const started = Date.now();
      const outcome = await recorderFor(id).requestApproval(draft, new AbortController().signal, 300);
      expect(Date.now() - started).toBeLessThan(5_000);
      // Events may arrive through the database's notifications, a moment after the row changed.
      for (let i = 0; i < 100 && !published.some((e) => e.type === 'approval_answered'); i++) await new Promise((r) => setTimeout(r, 20));
      unsubscribe();
      expect(outcome).toMatchObject({ state: 'expired', decidedBy: null });
      const row = await gw.app.get(ApprovalsRepository).findById(outcome.approvalId);
      expect(row).toMatchObject({ state: 'expired', decidedBy: null, reason: expect.stringContaining('nobody answered within') });
      const requested = (await auditOf(id, 'approval.request')).find((e) => (e.payload as { approvalId: string }).approvalId === outcome.approvalId);
      expect(requested?.payload).toMatchObject({ state: 'pending', expiresAt: expect.any(String) });
      expect((await auditOf(id, 'approval.expired')).find((e) => (e.payload as { approvalId: string }).approvalId === outcome.approvalId)).toMatchObject({
        actor: 'system',
        sessionId: id,
        payload: { kind: 'command' },
      });
      expect(published.find((e) => e.type === 'approval_requested')?.payload).toMatchObject({ approvalId: outcome.approvalId, expiresAt: expect.any(String) });
      expect(published.find((e) => e.type === 'approval_answered')?.payload).toMatchObject({ approvalId: outcome.approvalId, answer: 'rejected', class: 'approval_expired', by: { kind: 'process' } });
      const late = await gw.http().post(`/api/v1/approvals/${outcome.approvalId}/approve`).set(bearer(dev.token)).send({});
      expect(late.status).toBe(409);
      expect(late.body.message).toMatch(/^This approval was already answered: it is expired at /);
    });

    it('a wait cancelled without an answer (a clean gateway stop) closes the approval, audited; nothing stays pending', async () => {
      const id = await newSession();
      const controller = new AbortController();
      const waiting = recorderFor(id).requestApproval(draft, controller.signal, 60_000);
      let pending;
      for (let i = 0; i < 100 && !pending; i++) {
        pending = (await gw.app.get(ApprovalsRepository).list({ sessionId: id, state: 'pending' }))[0];
        if (!pending) await new Promise((r) => setTimeout(r, 20));
      }
      expect(pending).toBeDefined();
      controller.abort(new Error('the gateway is shutting down'));
      await expect(waiting).rejects.toThrow('the gateway is shutting down');
      expect(await gw.app.get(ApprovalsRepository).findById(pending!.id)).toMatchObject({ state: 'expired', reason: 'the session ended before anyone answered' });
      expect(await gw.app.get(ApprovalsRepository).list({ sessionId: id, state: 'pending' })).toEqual([]);
      expect((await auditOf(id, 'approval.expired')).map((e) => (e.payload as { approvalId: string }).approvalId)).toEqual([pending!.id]);
      const late = await gw.http().post(`/api/v1/approvals/${pending!.id}/approve`).set(bearer(dev.token)).send({});
      expect(late.status).toBe(409);
    });

    it("a rejection through the API carries the person's reason to the waiting session", async () => {
      const id = await newSession();
      const waiting = recorderFor(id).requestApproval(draft, new AbortController().signal, 10_000);
      let pending;
      for (let i = 0; i < 100 && !pending; i++) {
        pending = (await gw.app.get(ApprovalsRepository).list({ sessionId: id, state: 'pending' }))[0];
        if (!pending) await new Promise((r) => setTimeout(r, 20));
      }
      const no = await gw.http().post(`/api/v1/approvals/${pending!.id}/reject`).set(bearer(dev.token)).send({ reason: 'deploys go through the release train' });
      expect(no.status).toBe(200);
      expect(no.body).toMatchObject({ state: 'rejected', reason: 'deploys go through the release train' });
      await expect(waiting).resolves.toMatchObject({ state: 'rejected', decidedBy: dev.userId, reason: 'deploys go through the release train' });
      // Whoever reads the approval later sees why it was refused.
      const read = await gw.http().get(`/api/v1/approvals/${pending!.id}`).set(bearer(dev.token));
      expect(read.body).toMatchObject({ state: 'rejected', reason: 'deploys go through the release train' });
    });

    it('a person who answers before the deadline wins; nothing is expired nor audited as such', async () => {
      const id = await newSession();
      const waiting = recorderFor(id).requestApproval(draft, new AbortController().signal, 2_000);
      let pending;
      for (let i = 0; i < 100 && !pending; i++) {
        pending = (await gw.app.get(ApprovalsRepository).list({ sessionId: id, state: 'pending' }))[0];
        if (!pending) await new Promise((r) => setTimeout(r, 20));
      }
      expect(pending).toBeDefined();
      const ok = await gw.http().post(`/api/v1/approvals/${pending!.id}/approve`).set(bearer(dev.token)).send({});
      expect(ok.status).toBe(200);
      await expect(waiting).resolves.toMatchObject({ state: 'approved', decidedBy: dev.userId });
      await new Promise((r) => setTimeout(r, 2_200));
      expect(await gw.app.get(ApprovalsRepository).findById(pending!.id)).toMatchObject({ state: 'approved' });
      expect(await auditOf(id, 'approval.expired')).toEqual([]);
    });
  });

  it('refuses approval requests of a headless session at once, attributed to the process', async () => {
    const approval = await ask(await newSession(dev.token, { headless: true }));
    expect(approval.state).toBe('refused_headless');
    const answer = await gw.http().post(`/api/v1/approvals/${approval.id}/approve`).set(bearer(dev.token)).send({});
    expect(answer.status).toBe(409);
  });

  describe('questions (AG5): asked at the approval point, answered in words or declined', () => {
    const question = (sessionId: string) =>
      gw.app.get(ApprovalsService).request({ sessionId, kind: 'question', payload: { question: 'Keep the old API or break it?', options: ['keep it', 'break it'] }, agent: 'general' });

    it('is answered with text: the view, the audit entry and the event carry the answer', async () => {
      const sessionId = await newSession();
      const events = gw.app.get(EventsService);
      const seen: { type: string; payload: Record<string, unknown> }[] = [];
      const unsubscribe = events.subscribe((e) => void (e.sessionId === sessionId && seen.push(e)));
      try {
        const asked = await question(sessionId);
        expect(asked).toMatchObject({ kind: 'question', state: 'pending', response: null, payload: { question: 'Keep the old API or break it?', options: ['keep it', 'break it'] } });
        const ok = await gw.http().post(`/api/v1/approvals/${asked.id}/approve`).set(bearer(dev.token)).send({ response: '  keep it, and deprecate  ' });
        expect(ok.status).toBe(200);
        expect(ok.body).toMatchObject({ state: 'approved', response: 'keep it, and deprecate', decidedBy: dev.userId });
        expect((await gw.http().get(`/api/v1/approvals/${asked.id}`).set(bearer(dev.token))).body.response).toBe('keep it, and deprecate');
        expect((await auditKinds(gw, ['approval.answer'])).at(-1)).toMatchObject({ payload: { approvalId: asked.id, kind: 'question', answer: 'approved', response: 'keep it, and deprecate' } });
        const requested = seen.find((e) => e.type === 'approval_requested');
        expect(requested?.payload).toMatchObject({ kind: 'question', subject: 'Keep the old API or break it?', options: ['keep it', 'break it'] });
        expect(seen.find((e) => e.type === 'approval_answered')?.payload).toMatchObject({ approvalId: asked.id, answer: 'approved', response: 'keep it, and deprecate' });
      } finally {
        unsubscribe();
      }
    });

    it('is declined by rejecting it; the answer stays empty', async () => {
      const asked = await question(await newSession());
      const res = await gw.http().post(`/api/v1/approvals/${asked.id}/reject`).set(bearer(dev.token)).send({});
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ state: 'rejected', response: null });
    });

    it.each([
      ['approving a question without an answer', 'question', 'approve', {}, /response: a question is answered with text/],
      ['an empty answer', 'question', 'approve', { response: '   ' }, /An answer cannot be empty; reject the question to decline it\./],
      ['declining a question with an answer', 'question', 'reject', { response: 'keep it' }, /response: rejecting a question declines it and takes no answer/],
      ['an answer to a command', 'command', 'approve', { response: 'yes' }, /response: only a question takes an answer in words; this approval is a command/],
    ])('refuses %s with a sentence and leaves it pending', async (_what, kind, verdict, body, message) => {
      const sessionId = await newSession();
      const asked = kind === 'question' ? await question(sessionId) : await ask(sessionId);
      const res = await gw.http().post(`/api/v1/approvals/${asked.id}/${verdict}`).set(bearer(dev.token)).send(body);
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toMatch(message);
      expect((await gw.http().get(`/api/v1/approvals/${asked.id}`).set(bearer(dev.token))).body).toMatchObject({ state: 'pending', response: null });
    });

    it('the database itself refuses an answer in words on anything but an approved question', async () => {
      const command = await ask(await newSession());
      const repository = gw.app.get(ApprovalsRepository);
      const refusal = (p: Promise<unknown>) =>
        p.then(
          () => 'accepted',
          (e: { cause?: { message?: string } }) => e.cause?.message ?? String(e),
        );
      await expect(refusal(repository.answer(command.id, { state: 'approved', decidedBy: dev.userId, response: 'sneaked in' }))).resolves.toMatch(
        /violates check constraint "approvals_response_answers_a_question"/,
      );
      const asked = await question(await newSession());
      await expect(refusal(repository.answer(asked.id, { state: 'rejected', decidedBy: dev.userId, response: 'sneaked in' }))).resolves.toMatch(
        /violates check constraint "approvals_response_answers_a_question"/,
      );
      await expect(refusal(repository.answer(asked.id, { state: 'approved', decidedBy: dev.userId, response: 'keep it' }))).resolves.toBe('accepted');
    });
  });

  it('stop: within a second the loop is cancelled, pending approvals rejected, the sandbox destroyed, all audited', async () => {
    const sessionId = await newSession();
    await gw.app.get(SessionsRepository).update(sessionId, { sandboxId: `sbx-${sessionId}` });
    const run = gw.app.get(SessionRunRegistry).register(sessionId);
    const aborted = new Promise((resolve) => run.signal.addEventListener('abort', () => resolve(run.signal.reason)));
    const [a1, a2] = [await ask(sessionId, 'rm -rf build'), await ask(sessionId, 'make')];

    const started = Date.now();
    const res = await gw.http().post(`/api/v1/sessions/${sessionId}/stop`).set(bearer(dev.token)).send({ reason: 'wrong direction' });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ session: { status: 'stopped', stopReason: 'stopped' }, approvalsRejected: 2, sandboxDestroyed: true, sandboxNote: null });
    await expect(aborted).resolves.toBe('stopped');
    expect(execHost.destroyed).toContain(`sbx-${sessionId}`);
    for (const a of [a1, a2]) expect((await gw.http().get(`/api/v1/approvals/${a.id}`).set(bearer(dev.token))).body.state).toBe('rejected');
    expect((await auditKinds(gw, ['session.stop'])).at(-1)).toMatchObject({ sessionId, actor: `user:${dev.userId}`, payload: { reason: 'wrong direction', sandboxDestroyed: true } });

    const late = await gw.http().post(`/api/v1/approvals/${a1.id}/approve`).set(bearer(dev.token)).send({});
    expect(late.status).toBe(409);
    const twice = await gw.http().post(`/api/v1/sessions/${sessionId}/stop`).set(bearer(dev.token)).send({});
    expect(twice.status).toBe(409);
    expect(twice.body).toMatchObject({ code: 'session_ended', message: `Session ${sessionId} has already ended (stopped, stopped).` });
  });

  it('an answer to an approval of an ended session is a 409 saying so', async () => {
    const sessionId = await newSession();
    const approval = await ask(sessionId);
    await gw.app.get(SessionsRepository).end(sessionId, { status: 'completed' });
    const res = await gw.http().post(`/api/v1/approvals/${approval.id}/approve`).set(bearer(dev.token)).send({});
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'session_ended', message: `Session ${sessionId} has ended (completed); its approvals can no longer be answered.` });
  });

  it('a request of a session that ended after the loop read it as running is refused, and leaves no approval pending', async () => {
    const sessionId = await newSession();
    const sessions = gw.app.get(SessionsRepository);
    const running = await sessions.findById(sessionId);
    // Stopped (or revoked, or swept as an orphan) between the request's read and its insert.
    await sessions.end(sessionId, { status: 'stopped', stopReason: 'stopped' });
    const stale = jest.spyOn(sessions, 'findById').mockResolvedValueOnce(running);
    try {
      await expect(ask(sessionId)).rejects.toMatchObject({ code: 'session_ended', message: `Session ${sessionId} has ended; it cannot ask for approvals.` });
    } finally {
      stale.mockRestore();
    }
    expect(await gw.app.get(ApprovalsRepository).list({ sessionId })).toEqual([]);
  });

  it('a request racing the transaction that ends its session waits for it, then is refused', async () => {
    const sessionId = await newSession();
    const sessions = gw.app.get(SessionsRepository);
    const approvals = gw.app.get(ApprovalsRepository);
    const row = (id: string) => ({ id, sessionId, toolCallId: null, kind: 'command' as const, payload: { command: 'make' }, flags: { thirdParty: [] }, agent: 'general', state: 'pending' as const });
    let insert: Promise<unknown> | undefined;
    let settled = false;
    let settledWhileHeld: boolean | undefined;
    await gw.app.get(Transactions).run(async (tx) => {
      await sessions.withTx(tx).end(sessionId, { status: 'stopped', stopReason: 'revoked' });
      insert = approvals.create(row(randomUUID())).finally(() => (settled = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Held back by this transaction's row lock (on PGlite, by its single connection) until it commits.
      settledWhileHeld = settled;
    });
    expect(settledWhileHeld).toBe(false);
    await expect(insert).resolves.toBeUndefined();
    expect(await approvals.list({ sessionId })).toEqual([]);
    // While the session runs, the same insert lands.
    const other = await newSession();
    await expect(approvals.create({ ...row(randomUUID()), sessionId: other })).resolves.toMatchObject({ sessionId: other, state: 'pending' });
  });

  it('an administrator revokes a session: stop reason revoked', async () => {
    const sessionId = await newSession();
    const res = await gw.http().post(`/api/v1/sessions/${sessionId}/revoke`).set(bearer(admin)).send({});
    expect(res.status).toBe(200);
    expect(res.body.session).toMatchObject({ status: 'stopped', stopReason: 'revoked' });
    expect((await auditKinds(gw, ['session.revoke'])).at(-1)).toMatchObject({ sessionId });
  });

  it('revoking a user ends their tokens, console sessions and running sessions within a second', async () => {
    const victim = await createUser(gw, admin, 'leaver@example.test', 'developer', [project]);
    const cookie = await login(gw, 'leaver@example.test', PASSWORD);
    const s1 = await newSession(victim.token);
    const s2 = await newSession(victim.token);
    const pending = await ask(s1);
    const run = gw.app.get(SessionRunRegistry).register(s2);

    const started = Date.now();
    const res = await gw.http().post(`/api/v1/users/${victim.userId}/revoke`).set(bearer(admin)).send({});
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ userId: victim.userId, tokensRevoked: 1, webSessionsRevoked: 2 });
    expect([...res.body.sessionsRevoked].sort()).toEqual([s1, s2].sort());
    expect(run.signal.aborted).toBe(true);

    // Each way back in is refused with the reason, not only "sign in again".
    const tokenAfter = await gw.http().get('/api/v1/auth/me').set(bearer(victim.token));
    expect(tokenAfter.status).toBe(401);
    expect(tokenAfter.body.message).toBe('This API token was revoked with its account: an administrator revoked the account.');
    const cookieAfter = await gw.http().get('/api/v1/auth/me').set('cookie', cookie.cookie);
    expect(cookieAfter.status).toBe(401);
    expect(cookieAfter.body.message).toBe('This account has been revoked by an administrator; ask one of them if you think it should not have been.');
    const relogin = await gw.http().post('/api/v1/auth/login').send({ email: 'leaver@example.test', password: PASSWORD });
    expect(relogin.status).toBe(401);
    expect(relogin.body.message).toBe('This account has been revoked by an administrator; ask one of them if you think it should not have been.');
    expect((await gw.http().get(`/api/v1/approvals/${pending.id}`).set(bearer(admin))).body.state).toBe('rejected');
    expect((await gw.http().get(`/api/v1/sessions/${s1}`).set(bearer(admin))).body.stopReason).toBe('revoked');
    expect((await auditKinds(gw, ['user.revoke'])).at(-1)).toMatchObject({ payload: { userId: victim.userId, tokensRevoked: 1 } });

    const again = await gw.http().post(`/api/v1/users/${victim.userId}/revoke`).set(bearer(admin)).send({});
    expect(again.status).toBe(409);
    const self = await gw
      .http()
      .post(`/api/v1/users/${(await gw.http().get('/api/v1/auth/me').set(bearer(admin))).body.user.id}/revoke`)
      .set(bearer(admin))
      .send({});
    expect(self.status).toBe(409);
    expect(self.body.message).toBe('You cannot revoke your own account; ask another administrator.');
  });

  it('readyz reports the database and the exec-host', async () => {
    const res = await gw.http().get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { database: { ok: true }, execHost: { ok: true } } });
    const metrics = await gw.http().get('/metrics');
    expect(metrics.text).toContain('lemniscate_sessions_ended_total{reason="stopped"}');
  });
});

describe('when the exec-host is gone', () => {
  withTestDatabases(
    (db) => {
      let gw: Gateway;
      beforeAll(async () => {
        gw = await startGateway(db(), { LEMNISCATE_EXEC_HOST_URL: 'http://127.0.0.1:9' });
      });
      afterAll(async () => {
        await gw?.close();
      });

      it('a stop still ends the session and says the sandbox is left to the reaper; readyz says not ready', async () => {
        const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
        const project = await createProject(gw, admin, 'offline');
        const created = await gw.http().post('/api/v1/sessions').set(bearer(admin)).send({ projectId: project, instruction: 'x' });
        await gw.app.get(SessionsRepository).update(created.body.id, { sandboxId: 'sbx-lost' });
        const res = await gw.http().post(`/api/v1/sessions/${created.body.id}/stop`).set(bearer(admin)).send({});
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ session: { status: 'stopped' }, sandboxDestroyed: false });
        expect(res.body.sandboxNote).toMatch(/could not be reached\. The exec-host's reaper removes it by its session label\.$/);
        const ready = await gw.http().get('/readyz');
        expect(ready.status).toBe(503);
        expect(ready.body.checks.execHost.ok).toBe(false);
      });
    },
    ['pglite'],
  );
});
