import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack } from '../e2e/harness';
import { leftovers, leftoversAfter, NOTHING_LEFT } from './leftovers';
import { auditIntact, auditOf, endRuns, sessionOf, startRun, terminal, untilRunning } from './run';
import { EngineProxy } from './socket-proxy';

/**
 * The Docker engine made unreachable while a command runs. The exec-host reaches the engine only
 * through a relay this test owns (DOCKER_HOST), which it cuts: the machine's engine is never touched.
 * The session must end failed (sandbox_lost or crash), exit 1, never completed; the approved change
 * stays in its patch; the failed destroy still unmounts the working copy and removes its directory,
 * and once the engine answers again the reaper (every second here) removes the container.
 */
let stack: Stack;
let proxy: EngineProxy;
let socketDir: string;

beforeAll(async () => {
  socketDir = mkdtempSync(join(tmpdir(), 'lemniscate-engine-'));
  proxy = new EngineProxy(join(socketDir, 'docker.sock'));
  await proxy.open();
  stack = await startStack({ execHostEnv: { DOCKER_HOST: proxy.dockerHost, LEMNISCATE_EXEC_HOST_REAPER_SECONDS: '1' } });
  await stack.publishPolicy({ version: 1, commands: { free: ['echo', 'sleep'] } });
}, 180_000);

afterAll(async () => {
  endRuns();
  // The exec-host's own shutdown removes its sandboxes through the engine: give it the engine back.
  if (proxy) await proxy.open().catch(() => undefined);
  await stack?.stop();
  await proxy?.close();
  rmSync(socketDir, { recursive: true, force: true });
});

describe('the engine unreachable mid-command', () => {
  it('ends the session failed with exit 1, never completed; the patch is kept; the reaper clears everything once the engine is back', async () => {
    const script = stack.script('engine', [
      { tool_calls: [{ name: 'Write', arguments: { path: 'notes/kept.txt', content: 'approved before the engine went away\n' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'echo before-the-cut && sleep 63' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'echo never' } }] },
      { text: 'never reached' },
    ]);
    const run = startRun(stack, ['-p', 'write, then run a long command', '--model', `scripted:${script}`], { answer: () => 'approve' });
    await run.until((e) => e.type === 'tool_call_proposed' && e.name === 'Bash', 'the command');
    await untilRunning(run.sessionId, /sleep 63/);

    await proxy.cut();
    expect(proxy.cutConnections).toBeGreaterThan(0);
    const code = await run.exited;

    expect(code).toBe(1);
    const end = terminal(run)!;
    expect(end).toMatchObject({ type: 'session_failed', status: 'failed', exitCode: 1 });
    expect(['sandbox_lost', 'platform_error']).toContain(end.class);
    expect(run.events.some((e) => e.type === 'session_completed')).toBe(false);
    expect(run.events.at(-1)).toMatchObject({ type: 'result', status: 'failed', exit_code: 1 });
    // The second command was never proposed: the session ended with the first.
    expect(run.events.filter((e) => e.type === 'tool_call_proposed').map((e) => e.name)).toEqual(['Write', 'Bash']);
    const bash = run.events.find((e) => e.type === 'tool_call_proposed' && e.name === 'Bash')!;

    const session = await sessionOf(stack, run.sessionId);
    expect(session).toMatchObject({ status: 'failed', stopReason: 'crash' });
    expect(session.finalPatch).toContain('+approved before the engine went away');

    const audit = await auditOf(stack, run.sessionId);
    const results = audit.filter((a) => a.kind === 'tool.result' && a.payload.callId === bash.callId);
    expect(results).toHaveLength(1);
    expect(['sandbox_lost', 'platform_error']).toContain(results[0]!.payload.class);
    expect(results[0]!.payload.exitCode).toBeNull();
    expect(audit.filter((a) => a.kind === 'session.ended').map((a) => a.payload.status)).toEqual(['failed']);
    expect(audit.at(-1)!.kind).toBe('session.ended');
    expect(await auditIntact(stack)).toBe(true);

    // While the engine is away its container cannot be removed; the exec-host removes what it can
    // without the engine (the working copy's mount on the host and its directory), and the reaper
    // removes the container once the engine answers again.
    await new Promise((r) => setTimeout(r, 2_500));
    const stuck = leftovers(stack);
    expect(stuck.containers).toHaveLength(1);
    expect(stuck.mounts).toEqual([]);
    expect(stuck.directories).toEqual([]);

    await proxy.open();
    expect(await leftoversAfter(stack, 20_000)).toEqual(NOTHING_LEFT);
  });

  it('with the engine back, the same exec-host runs a session to the end', async () => {
    const script = stack.script('back', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'echo back' } }] }, { text: 'done' }]);
    const run = startRun(stack, ['-p', 'echo', '--model', `scripted:${script}`]);
    expect(await run.exited).toBe(0);
    expect(terminal(run)).toMatchObject({ type: 'session_completed' });
    expect(run.events.find((e) => e.type === 'tool_result')).toMatchObject({ exitCode: 0, stdout: 'back\n' });
    expect(await leftoversAfter(stack)).toEqual(NOTHING_LEFT);
  });
});
