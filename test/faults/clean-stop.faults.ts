import { startStack, type Stack } from '../e2e/harness';
import { leftoversAfter, NOTHING_LEFT, untilSandboxPresent } from './leftovers';
import { approvalsOf, auditIntact, auditOf, endRuns, sessionOf, startRun, terminal, untilRunning, type Run } from './run';

/**
 * A clean gateway stop (SIGTERM, SIGINT) while a session waits for a person or runs a command. The
 * gateway exits 0 after ending its loops: the session ends `stopped` (reason `stopped`), never left
 * `running` nor called `completed`; a pending approval is closed as expired and audited; the sandbox
 * is destroyed; the CLI, following through the restart, exits with the code of the ending it got.
 */
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
  await stack.publishPolicy({ version: 1, commands: { free: ['echo', 'sleep'] } });
}, 180_000);

afterAll(async () => {
  endRuns();
  await stack?.stop();
});

async function stopCleanly(signal: NodeJS.Signals, run: Run): Promise<number | null> {
  const exit = await stack.stopGateway(signal);
  await stack.startGateway();
  // Nest ends its shutdown hooks by raising the signal again: an exit by that signal, or 0, is clean.
  expect([0, signal]).toContain(exit.code ?? exit.signal);
  return run.exited;
}

async function expectStoppedTruthfully(run: Run, code: number | null) {
  expect(code).toBe(3);
  expect(terminal(run)).toMatchObject({ type: 'session_stopped', status: 'stopped', stopReason: 'stopped', exitCode: 3 });
  expect(run.events.at(-1)).toMatchObject({ type: 'result', status: 'stopped', stop_reason: 'stopped', exit_code: 3 });
  expect(run.events.filter((e) => ['session_completed', 'session_failed', 'session_stopped'].includes(e.type))).toHaveLength(1);
  const session = await sessionOf(stack, run.sessionId);
  expect(session).toMatchObject({ status: 'stopped', stopReason: 'stopped' });
  expect(session.endedAt).not.toBeNull();
  const audit = await auditOf(stack, run.sessionId);
  const ended = audit.filter((a) => a.kind === 'session.ended');
  expect(ended.map((a) => a.payload)).toEqual([expect.objectContaining({ status: 'stopped', stopReason: 'stopped' })]);
  // Ended by its own gateway, not swept as an orphan by the next one.
  expect(audit.map((a) => a.kind)).not.toContain('session.orphaned');
  expect(await auditIntact(stack)).toBe(true);
  expect(await leftoversAfter(stack)).toEqual(NOTHING_LEFT);
  return audit;
}

// One signal per situation: both go through the same shutdown hooks, and each restart costs seconds.
describe('a clean gateway stop', () => {
  it.each(['SIGTERM'] as const)('%s during a pending approval: stopped, the approval expired and audited, nothing left', async (signal) => {
    const script = stack.script('clean-approval', [{ tool_calls: [{ name: 'Write', arguments: { path: 'notes/waiting.txt', content: 'waiting\n' } }] }, { text: 'never reached' }]);
    const run = startRun(stack, ['-p', 'a write nobody answers', '--model', `scripted:${script}`], { env: { LEMNISCATE_FOLLOW_RECONNECT_SECONDS: '60' }, waitForApprovals: true });
    const asked = await run.until((e) => e.type === 'approval_requested', 'the approval request');
    await untilSandboxPresent(stack);

    const code = await stopCleanly(signal, run);
    const audit = await expectStoppedTruthfully(run, code);
    expect((await approvalsOf(stack, run.sessionId)).map((a) => a.state)).toEqual(['expired']);
    expect(audit.filter((a) => a.kind === 'approval.expired').map((a) => a.payload.approvalId)).toEqual([asked.approvalId]);
    const late = await stack.api(stack.tokens.developer, 'POST', `/approvals/${asked.approvalId}/approve`, {});
    expect(late.status).toBeGreaterThanOrEqual(400);
    expect(late.status).toBeLessThan(500);
    expect((await sessionOf(stack, run.sessionId)).finalPatch ?? '').not.toContain('waiting');
  });

  it.each(['SIGINT'] as const)('%s during a command: stopped, the command ended with the sandbox, nothing left', async (signal) => {
    const script = stack.script('clean-command', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'echo started && sleep 64' } }] }, { text: 'never reached' }]);
    const run = startRun(stack, ['-p', 'a long command', '--model', `scripted:${script}`], { env: { LEMNISCATE_FOLLOW_RECONNECT_SECONDS: '60' } });
    await run.until((e) => e.type === 'tool_call_proposed', 'the command');
    await untilRunning(run.sessionId, /sleep 64/);
    const started = Date.now();

    const code = await stopCleanly(signal, run);
    // The stop did not wait for the command to finish on its own.
    expect(Date.now() - started).toBeLessThan(40_000);
    await expectStoppedTruthfully(run, code);
  });
});
