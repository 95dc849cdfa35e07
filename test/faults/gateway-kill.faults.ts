import { startStack, type Stack } from '../e2e/harness';
import { leftoversAfter, NOTHING_LEFT, untilSandboxPresent } from './leftovers';
import { approvalsOf, auditIntact, auditOf, endRuns, sessionOf, startRun, terminal } from './run';

/**
 * The gateway killed with SIGKILL while an approval waits. The CLI goes on following through the
 * reconnect window; the restarted gateway ends the dead process's session as a crash: the CLI gets
 * `session_failed` and exits 1, the approval is expired (no longer answerable) and audited, the change
 * approved before the crash stays in the patch, and the sandbox is destroyed.
 */
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
  await stack.publishPolicy({ version: 1, commands: { free: ['echo'] } });
}, 180_000);

afterAll(async () => {
  endRuns();
  await stack?.stop();
});

it('SIGKILL during a pending approval: the CLI follows through the restart, gets session_failed, exit 1; approval expired; patch kept; nothing left', async () => {
  const script = stack.script('gateway-kill', [
    { tool_calls: [{ name: 'Write', arguments: { path: 'notes/first.txt', content: 'approved before the crash\n' } }] },
    { tool_calls: [{ name: 'Write', arguments: { path: 'notes/second.txt', content: 'still waiting\n' } }] },
    { text: 'never reached' },
  ]);
  let asked = 0;
  const run = startRun(stack, ['-p', 'two writes', '--model', `scripted:${script}`], {
    env: { LEMNISCATE_FOLLOW_RECONNECT_SECONDS: '60' },
    // The first change is approved; the second is left waiting when the gateway dies.
    answer: () => (++asked === 1 ? 'approve' : undefined),
  });
  const pending = await run.until((e) => e.type === 'approval_requested' && e.subject.includes('notes/second.txt'), 'the second approval request');
  await untilSandboxPresent(stack);

  expect(await stack.stopGateway('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
  // The CLI is still following while no gateway answers.
  await new Promise((r) => setTimeout(r, 3_000));
  expect(run.child.exitCode).toBeNull();
  await stack.startGateway();
  const code = await run.exited;

  expect(code).toBe(1);
  expect(terminal(run)).toMatchObject({ type: 'session_failed', stopReason: 'crash', class: 'crash', exitCode: 1 });
  expect(terminal(run)!.message).toMatch(/^The gateway running this session stopped/);
  expect(run.events.at(-1)).toMatchObject({ type: 'result', status: 'failed', exit_code: 1 });
  // The follower is told the approval closed, and why, as for any other expiry.
  expect(run.events.filter((e) => e.type === 'approval_answered' && e.approvalId === pending.approvalId)).toEqual([
    expect.objectContaining({ answer: 'rejected', class: 'approval_expired', by: expect.objectContaining({ kind: 'process' }) }),
  ]);

  const session = await sessionOf(stack, run.sessionId);
  expect(session).toMatchObject({ status: 'failed', stopReason: 'crash' });
  expect(session.finalPatch).toContain('+approved before the crash');
  expect(session.finalPatch).not.toContain('still waiting');

  const approvals = await approvalsOf(stack, run.sessionId);
  expect(approvals).toHaveLength(2);
  expect(approvals.find((a) => a.id === pending.approvalId)?.state).toBe('expired');
  expect(approvals.find((a) => a.id !== pending.approvalId)?.state).toBe('approved');
  // Closed: nobody can answer it any more.
  const late = await stack.api(stack.tokens.developer, 'POST', `/approvals/${pending.approvalId}/approve`, {});
  expect(late.status).toBeGreaterThanOrEqual(400);
  expect(late.status).toBeLessThan(500);
  expect(typeof late.json.message).toBe('string');

  const audit = await auditOf(stack, run.sessionId);
  const kinds = audit.map((a) => a.kind);
  expect(kinds.filter((k) => k === 'approval.request')).toHaveLength(2);
  // The restarted gateway's sweep: one entry naming the approval it expired and the sandbox it destroyed.
  const orphaned = audit.filter((a) => a.kind === 'session.orphaned');
  expect(orphaned).toHaveLength(1);
  expect(orphaned[0]!.payload).toMatchObject({ approvalsExpired: [pending.approvalId], sandboxDestroyed: true });
  expect(orphaned[0]!.actor).toBe('system');
  expect(kinds.filter((k) => k === 'approval.answer')).toHaveLength(1);
  expect(await auditIntact(stack)).toBe(true);

  expect(await leftoversAfter(stack)).toEqual(NOTHING_LEFT);
});
