import { startStack, type Stack } from '../e2e/harness';
import { leftovers, NOTHING_LEFT } from './leftovers';
import { auditIntact, auditOf, endRuns, sessionOf, startRun, terminal, untilRunning } from './run';

/**
 * The exec-host killed with SIGKILL while a command runs, before the command printed anything and
 * after it did. The session ends `failed` with class `sandbox_lost` (exit 1 headless), audited, with
 * the approved change kept in its patch; what the dead exec-host left (container, loop device,
 * mount, working directory) is all on the machine until it starts again, and all gone once it has.
 */
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
  await stack.publishPolicy({
    version: 1,
    commands: { free: ['echo', 'sleep'] },
  });
}, 180_000);

afterAll(async () => {
  endRuns();
  await stack?.stop();
});

describe.each([
  {
    when: 'before the command printed anything',
    command: 'sleep 61 && echo late',
    running: /sleep 61/,
  },
  {
    when: 'after the command printed',
    command: 'echo printed-before-the-kill && sleep 62',
    running: /sleep 62/,
  },
])('the exec-host killed $when', ({ command, running }) => {
  it('ends the session sandbox_lost with exit 1, audited, patch kept; its restart leaves nothing behind', async () => {
    const script = stack.script('kill', [
      {
        tool_calls: [
          {
            name: 'Write',
            arguments: {
              path: 'notes/kept.txt',
              content: 'approved before the crash\n',
            },
          },
        ],
      },
      { tool_calls: [{ name: 'Bash', arguments: { command } }] },
      { text: 'never reached' },
    ]);
    const run = startRun(stack, ['-p', 'write, then run a long command', '--model', `scripted:${script}`], { answer: () => 'approve' });
    await run.until((e) => e.type === 'tool_call_proposed' && e.name === 'Bash', 'the command');
    await untilRunning(run.sessionId, running);
    const before = leftovers(stack);

    await stack.stopExecHost('SIGKILL');
    const code = await run.exited;

    // What the killed exec-host had set up is still there: only its restart can clear it.
    for (const kind of ['containers', 'loopDevices', 'mounts', 'directories'] as const) expect(before[kind]).toHaveLength(1);
    expect(leftovers(stack)).toEqual(before);

    expect(code).toBe(1);
    expect(terminal(run)).toMatchObject({
      type: 'session_failed',
      status: 'failed',
      class: 'sandbox_lost',
      exitCode: 1,
    });
    expect(run.events.at(-1)).toMatchObject({
      type: 'result',
      status: 'failed',
      exit_code: 1,
    });
    const bash = run.events.find((e) => e.type === 'tool_call_proposed' && e.name === 'Bash')!;
    const session = await sessionOf(stack, run.sessionId);
    expect(session).toMatchObject({
      status: 'failed',
      stopReason: 'crash',
      actionsUsed: 2,
    });
    expect(session.finalPatch).toContain('+++ b/notes/kept.txt');
    expect(session.finalPatch).toContain('+approved before the crash');

    const audit = await auditOf(stack, run.sessionId);
    const kinds = audit.map((a) => a.kind);
    expect(kinds.filter((k) => k === 'tool_call.proposed')).toHaveLength(2);
    expect(audit.filter((a) => a.kind === 'policy.decision').map((a) => a.payload.callId)).toContain(bash.callId);
    expect(audit.find((a) => a.kind === 'approval.answer')?.payload).toMatchObject({ answer: 'approved' });
    // The command's outcome is in the log as the platform's failure, not as a result of the command.
    const results = audit.filter((a) => a.kind === 'tool.result' && a.payload.callId === bash.callId);
    expect(results).toHaveLength(1);
    expect(results[0]!.payload).toMatchObject({
      exitCode: null,
      class: 'sandbox_lost',
    });
    expect(results[0]!.payload.message).toMatch(/^The platform failed, not the command: /);
    // The sandbox could not be destroyed (its exec-host was dead): said so, not hidden.
    expect(kinds).toContain('sandbox.destroy_failed');
    const ended = audit.filter((a) => a.kind === 'session.ended');
    expect(ended).toHaveLength(1);
    expect(ended[0]!.payload).toMatchObject({
      status: 'failed',
      stopReason: 'crash',
    });
    expect(ended[0]!.payload.message).toMatch(/sandbox/i);
    expect(kinds.at(-1)).toBe('session.ended');
    expect(await auditIntact(stack)).toBe(true);

    // The exec-host's first reaper pass runs before it answers: nothing is left once it does.
    await stack.startExecHost();
    expect(leftovers(stack)).toEqual(NOTHING_LEFT);
  });
});

describe('after the restart', () => {
  it('the restarted exec-host runs sessions again', async () => {
    const script = stack.script('after', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'echo back' } }] }, { text: 'done' }]);
    const run = startRun(stack, ['-p', 'echo', '--model', `scripted:${script}`]);
    expect(await run.exited).toBe(0);
    expect(terminal(run)).toMatchObject({ type: 'session_completed' });
    expect(run.events.find((e) => e.type === 'tool_result')).toMatchObject({
      exitCode: 0,
      stdout: 'back\n',
    });
    expect(leftovers(stack)).toEqual(NOTHING_LEFT);
  });
});
