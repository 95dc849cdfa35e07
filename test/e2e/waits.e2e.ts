import { containersOf, startStack, type Stack } from './harness';

/**
 * L1, X4: nothing waits forever, end to end (real CLI, gateway, exec-host, Docker, scripted model).
 * The project's approval timeout is a few seconds, so an unanswered approval ends the run quickly.
 */
const TIMEOUT_SECONDS = 3;
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
  await stack.publishPolicy({ version: 1, commands: { free: ['npm test', 'echo', 'sleep'] }, tools: { sensitive: [] }, approvals: { timeoutSeconds: TIMEOUT_SECONDS } });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
});

describe('lemni -p --wait-for-approvals, bounded by approvals.timeoutSeconds', () => {
  it('an approval nobody answers: exit 3 within the timeout, stop reason named, approval expired and audited, no container left', async () => {
    const script = stack.script('unanswered', [
      { tool_calls: [{ name: 'Bash', arguments: { command: 'make deploy' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'echo after' } }] },
      { text: 'Summary: deploy not run.' },
    ]);
    const child = stack.spawnCli(['-p', 'deploy it', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply', '--wait-for-approvals']);
    child.stdin!.end();
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const closed = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    // While it waits, the session's sandbox is alive: the wait is legitimate and nothing reaps it.
    let sessionId = '';
    for (let i = 0; i < 100 && !sessionId; i++) {
      await new Promise((r) => setTimeout(r, 100));
      sessionId = /Session (\S+) started/.exec(stderr)?.[1] ?? '';
    }
    let waiting = false;
    for (let i = 0; i < 100 && !waiting; i++) {
      await new Promise((r) => setTimeout(r, 50));
      waiting = /Waiting for a person/.test(stderr);
    }
    const waitStarted = Date.now();
    expect(waiting).toBe(true);
    expect(containersOf(sessionId)).toHaveLength(1);
    const code = await closed;
    expect(Date.now() - waitStarted).toBeLessThan(TIMEOUT_SECONDS * 1000 + 15_000);
    expect(code).toBe(3);
    // The CLI said the wait is bounded, and by what.
    expect(stderr).toMatch(/expires unanswered at \S+ \(the project policy's approvals\.timeoutSeconds/);
    const out = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(out).toMatchObject({ session_id: sessionId, status: 'stopped', stop_reason: 'limit_minutes', exit_code: 3 });
    expect(out.classes).toContain('approval_expired');
    expect(out.summary).toContain(`approvals.timeoutSeconds: ${TIMEOUT_SECONDS}`);
    // Nothing after the expired approval ran.
    expect(out.tool_calls.map((c: { name: string }) => c.name)).toEqual(['Bash']);
    const approvals = await stack.api(stack.tokens.developer, 'GET', `/approvals?sessionId=${sessionId}`);
    expect(approvals.json.map((a: { state: string }) => a.state)).toEqual(['expired']);
    const audit = await stack.api(stack.tokens.admin, 'GET', `/audit?sessionId=${sessionId}&limit=200`);
    const kinds = (audit.json.items ?? audit.json).map((e: { kind: string }) => e.kind);
    expect(kinds).toEqual(expect.arrayContaining(['approval.request', 'approval.expired', 'session.ended']));
    expect(containersOf(sessionId)).toEqual([]);
  }, 90_000);
});

describe('AG6: interrupting a parent stops its synchronous child', () => {
  it('Ctrl-C while the child runs a command: exit 3, parent and child stopped, no container left', async () => {
    const script = stack.script('sync-child', [
      { tool_calls: [{ name: 'Task', arguments: { agent: 'general', instruction: 'wait a long time' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 120' } }] },
      { text: 'never' },
    ]);
    const child = stack.spawnCli(['-p', 'delegate', '--model', `scripted:${script}`, '--output-format', 'stream-json', '--no-apply']);
    child.stdin!.end();
    const closed = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    let out = '';
    const running = new Promise<{ root: string; sub: string }>((resolve) =>
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const root = /"sessionId":"([^"]+)"/.exec(out)?.[1];
        const sub = /"type":"subagent_started"[^\n]*"childSessionId":"([^"]+)"/.exec(out)?.[1] ?? /"childSessionId":"([^"]+)"[^\n]*"type":"subagent_started"/.exec(out)?.[1];
        if (root && sub && /"type":"tool_call_proposed"[^\n]*sleep 120/.test(out)) resolve({ root, sub });
      }),
    );
    const ids = await running;
    await new Promise((r) => setTimeout(r, 500));
    expect(containersOf(ids.root)).toHaveLength(1);
    child.kill('SIGINT');
    const code = await closed;
    expect(code).toBe(3);
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.at(-1)).toMatchObject({ type: 'result', status: 'stopped', exit_code: 3 });
    expect(lines.at(-2)).toMatchObject({ type: 'session_stopped', stopReason: 'stopped' });
    let sub: { status?: string } = {};
    for (let i = 0; i < 50 && sub.status !== 'stopped'; i++) {
      sub = (await stack.api(stack.tokens.developer, 'GET', `/sessions/${ids.sub}`)).json;
      if (sub.status !== 'stopped') await new Promise((r) => setTimeout(r, 100));
    }
    expect(sub).toMatchObject({ status: 'stopped' });
    expect(containersOf(ids.root)).toEqual([]);
  }, 90_000);
});

describe('AG6: a background child that outlives its completed parent', () => {
  it('keeps the shared sandbox until it ends: its command runs after the parent is done, then the container goes', async () => {
    // --wait-for-approvals lets a background task stay in the background (a plain -p runs it synchronously).
    const script = stack.script('background-child', [
      { tool_calls: [{ name: 'Task', arguments: { agent: 'general', instruction: 'work after the parent', background: true } }] },
      { text: 'parent done' },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 3' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'echo still-here' } }] },
      { text: 'child done' },
    ]);
    const r = await stack.cli(['-p', 'delegate in the background', '--model', `scripted:${script}`, '--output-format', 'stream-json', '--no-apply', '--wait-for-approvals']);
    const events = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; payload?: Record<string, unknown> } & Record<string, unknown>);
    const field = (e: Record<string, unknown>, k: string) => (e[k] ?? (e.payload as Record<string, unknown> | undefined)?.[k]) as string | undefined;
    const sub = field(
      events.find((e) => e.type === 'subagent_started')!,
      'childSessionId',
    )!;
    const rootText = events.findIndex((e) => e.type === 'model_text' && field(e, 'text') === 'parent done' && !field(e, 'subSessionId'));
    const childEcho = events.findIndex((e) => e.type === 'tool_result' && field(e, 'subSessionId') === sub && JSON.stringify(e).includes('still-here'));
    // The parent was done first; the child's later command still ran in the live sandbox.
    expect(rootText).toBeGreaterThanOrEqual(0);
    expect(childEcho).toBeGreaterThan(rootText);
    expect(r.code).toBe(0);
    const calls = (await stack.api(stack.tokens.developer, 'GET', `/sessions/${sub}/tool-calls`)).json as { result: { exitCode?: number } }[];
    expect(calls.map((c) => c.result?.exitCode)).toEqual([0, 0]);
    expect((await stack.api(stack.tokens.developer, 'GET', `/sessions/${sub}`)).json).toMatchObject({ status: 'completed' });
    expect(containersOf(field(events[0]!, 'sessionId')!)).toEqual([]);
  }, 90_000);
});
