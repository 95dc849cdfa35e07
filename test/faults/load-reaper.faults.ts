import { startStack, type Stack } from '../e2e/harness';
import { leftoversAfter, NOTHING_LEFT } from './leftovers';
import { auditIntact, auditOf, endRuns, startRun, terminal, type Run } from './run';

/**
 * 40 headless sessions at once against one exec-host whose reaper runs every second. The reaper
 * must never take a live sandbox (being created, running a command, being destroyed): every session
 * completes with exit 0, none is lost, each call is in the audit log once with its result, and nothing
 * is left on the machine afterwards.
 */
const SESSIONS = 40;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ execHostEnv: { LEMNISCATE_EXEC_HOST_REAPER_SECONDS: '1' } });
  await stack.publishPolicy({ version: 1, commands: { free: ['echo', 'sleep', 'cat'] } });
}, 180_000);

afterAll(async () => {
  endRuns();
  await stack?.stop();
});

it(`${SESSIONS} concurrent headless sessions with the reaper every second: all complete with exit 0, every call audited, nothing left`, async () => {
  const runs: Run[] = [];
  for (let n = 0; n < SESSIONS; n++) {
    // Commands long enough that reaper passes fall inside them, and a read between the two.
    const script = stack.script(`load-${n}`, [
      { tool_calls: [{ name: 'Bash', arguments: { command: `echo session-${n} && sleep 1` } }] },
      { tool_calls: [{ name: 'Read', arguments: { path: 'src/calc.js' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: `cat package.json && echo done-${n}` } }] },
      { text: `finished ${n}` },
    ]);
    runs.push(startRun(stack, ['-p', `load ${n}`, '--model', `scripted:${script}`], { env: { LEMNISCATE_FOLLOW_RECONNECT_SECONDS: '120' } }));
  }
  const codes = await Promise.all(runs.map((r) => r.exited));

  const failures = runs.map((r, n) => ({ n, code: codes[n], end: terminal(r), stderr: r.stderr })).filter((f) => f.code !== 0);
  expect(failures).toEqual([]);
  for (const [n, run] of runs.entries()) {
    expect(terminal(run)).toMatchObject({ type: 'session_completed', status: 'completed' });
    expect(run.events.some((e) => e.class === 'sandbox_lost')).toBe(false);
    const results = run.events.filter((e) => e.type === 'tool_result');
    expect(results.map((e) => e.exitCode)).toEqual([0, 0]);
    expect(results[0]!.stdout).toBe(`session-${n}\n`);
    expect(results[1]!.stdout).toContain(`done-${n}`);
  }

  const sessionIds = new Set(runs.map((r) => r.sessionId));
  expect(sessionIds.size).toBe(SESSIONS);
  for (const run of runs) {
    const audit = await auditOf(stack, run.sessionId);
    const proposed = audit.filter((a) => a.kind === 'tool_call.proposed');
    expect(proposed.map((a) => a.payload.name)).toEqual(['Bash', 'Read', 'Bash']);
    const callIds = run.events.filter((e) => e.type === 'tool_call_proposed').map((e) => e.callId);
    expect(proposed.map((a) => a.payload.callId)).toEqual(callIds);
    expect(audit.filter((a) => a.kind === 'policy.decision').map((a) => a.payload.callId)).toEqual(callIds);
    // One result per command, each the command's own (exit 0), none the platform's.
    const results = audit.filter((a) => a.kind === 'tool.result');
    expect(results.map((a) => [a.payload.callId, a.payload.exitCode, a.payload.class])).toEqual([
      [callIds[0], 0, null],
      [callIds[2], 0, null],
    ]);
    expect(audit.filter((a) => a.kind === 'session.ended').map((a) => a.payload.status)).toEqual(['completed']);
    expect(audit.map((a) => a.kind)).not.toContain('sandbox.destroy_failed');
  }
  expect(await auditIntact(stack)).toBe(true);
  expect(await leftoversAfter(stack)).toEqual(NOTHING_LEFT);
  // The reaper logs what it removes: during the load anything it removed was a live sandbox's.
  expect(stack.logs()).not.toMatch(/Removing orphan/);
}, 300_000);
