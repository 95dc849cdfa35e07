import { ExecHostHealth } from '@lemniscate/contracts';
import { endRuns, startRun } from '../faults/run';
import { startStack, type Stack } from './harness';

/**
 * The warm pool on the real path: CLI → gateway → exec-host. Under a policy that sets no sandbox
 * resources, the first session of a fresh exec-host already finds a warm sandbox (the exec-host keeps
 * that profile warm from start-up), and the next session of the same repository one checked out ahead;
 * each session's work is its own.
 */
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ execHostEnv: { LEMNISCATE_EXEC_HOST_WARM_POOL: '1', LEMNISCATE_EXEC_HOST_WARM_RUNTIMES: 'runc' } });
}, 180_000);

afterAll(async () => {
  endRuns();
  await stack?.stop();
});

async function warmPool() {
  const res = await fetch(`${stack.execHostUrl}/v1/health`, { headers: { authorization: `Bearer ${stack.execHostToken}` } });
  const warm = ExecHostHealth.parse(await res.json()).warmPool;
  if (!warm) throw new Error('the exec-host reports no warm pool');
  return warm;
}

async function poolFull(): Promise<void> {
  const deadline = Date.now() + 60_000;
  // The pool announces nothing when a sandbox is ready; ask its health document.
  for (let warm = await warmPool(); warm.ready < warm.target; warm = await warmPool()) {
    if (Date.now() > deadline) throw new Error(`the warm pool is not full after a minute: ${JSON.stringify(warm)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One headless session of one Bash command; a write it asks for is approved, as a reviewer would. */
async function session(name: string, command: string) {
  const script = stack.script(name, [{ tool_calls: [{ name: 'Bash', arguments: { command } }] }, { text: 'Done.' }]);
  const run = startRun(stack, ['-p', name, '--model', `scripted:${script}`], { answer: () => 'approve' });
  const code = await run.exited;
  const result = run.events.find((e) => e.type === 'result') as { tool_calls?: { result?: { stdout: string; stderr: string } | null }[] } | undefined;
  return { code, output: (result?.tool_calls ?? []).map((c) => `${c.result?.stdout ?? ''}${c.result?.stderr ?? ''}`).join('\n') };
}

describe('sessions start from warm sandboxes', () => {
  it('the first session under default resources is warm, the next one too, and neither sees the other', async () => {
    await stack.publishPolicy({ version: 1, commands: { free: ['echo', 'cat', 'ls'] } });
    await poolFull();
    const before = await warmPool();
    expect(before).toMatchObject({ hits: 0, misses: 0 });

    const first = await session('warm-first', 'echo first-session-was-here > /tmp/mark; ls /tmp');
    expect(first.code).toBe(0);
    expect(first.output).toContain('mark');
    expect(await warmPool()).toMatchObject({ hits: 1, misses: 0 });

    await poolFull();
    const second = await session('warm-second', 'ls -a /tmp; cat /tmp/mark');
    expect(second.code).toBe(0);
    expect(second.output).not.toContain('first-session-was-here');
    expect(second.output).toContain('No such file');
    expect(await warmPool()).toMatchObject({ hits: 2, misses: 0 });
  }, 180_000);
});
