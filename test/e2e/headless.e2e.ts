import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { containersOf, startStack, type Stack } from './harness';

/**
 * Issues 5 and 6 acceptance, end to end: the real CLI against the real gateway, exec-host and Docker,
 * with the scripted model of DESIGN.md.
 */
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
  await stack.publishPolicy({ version: 1, commands: { free: ['npm test', 'node --test', 'cat', 'ls', 'sleep', 'echo'] } });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
});

const json = (out: string) => JSON.parse(out.trim().split('\n').at(-1)!);

describe('lemni -p (headless)', () => {
  it('completes with exit 0; an approval needed headless is refused, recorded, and the run goes on', async () => {
    const script = stack.script('ok', [
      { tool_calls: [{ name: 'Bash', arguments: { command: 'npm test' } }] },
      { tool_calls: [{ name: 'Write', arguments: { path: 'src/new.js', content: 'module.exports = 1;\n' } }] },
      { tool_calls: [{ name: 'Read', arguments: { path: 'src/calc.js' } }] },
      { text: 'Looked at it.' },
    ]);
    const r = await stack.cli(['-p', 'look at the failing test', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply']);
    expect(r.stderr).toMatch(/refused|headless/i);
    expect(r.code).toBe(0);
    const out = json(r.stdout);
    expect(out).toMatchObject({ status: 'completed', stop_reason: null, exit_code: 0, actions_used: 3, summary: 'Looked at it.' });
    expect(out.tool_calls.map((c: { name: string }) => c.name)).toEqual(['Bash', 'Write', 'Read']);
    expect(out.tool_calls[0].result.exit_code).not.toBe(0);
    expect(out.tool_calls[0].result.stdout).toContain('average');
    expect(out.patch).toBe('');
    const approvals = await stack.api(stack.tokens.developer, 'GET', `/approvals?sessionId=${out.session_id}`);
    expect(approvals.json.map((a: { state: string }) => a.state)).toEqual(['refused_headless']);
    expect(containersOf(out.session_id)).toEqual([]);
  });

  it('200 distinct commands stop after 150 actions with a summary and exit 3 (limit)', async () => {
    const script = stack.script('limit', [{ repeat: 200, tool_calls: [{ name: 'Bash', arguments: { command: 'echo {{i}}' } }] }, { text: 'Done: 150 echoes. Remaining: 50.' }]);
    const r = await stack.cli(['-p', 'echo a lot', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply']);
    expect(r.code).toBe(3);
    const out = json(r.stdout);
    expect(out).toMatchObject({ status: 'stopped', stop_reason: 'limit_actions', exit_code: 3, actions_used: 150 });
    expect(out.summary).toContain('Remaining: 50');
  }, 300_000);

  it('the same call four times in a row: the fourth never runs, exit 3 (loop)', async () => {
    const call = { name: 'Bash', arguments: { command: 'ls' } };
    const script = stack.script('loop', [{ tool_calls: [call] }, { tool_calls: [call] }, { tool_calls: [call] }, { tool_calls: [call] }, { text: 'summary' }]);
    const r = await stack.cli(['-p', 'list', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply']);
    expect(r.code).toBe(3);
    const out = json(r.stdout);
    expect(out.stop_reason).toBe('loop');
    expect(out.tool_calls.filter((c: { result: unknown }) => c.result && (c.result as { exit_code?: number }).exit_code === 0)).toHaveLength(3);
  });

  it('stream-json lines parse one by one and arrive while the session runs', async () => {
    const script = stack.script('stream', [
      { tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 2' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'echo after' } }] },
      { text: 'done' },
    ]);
    const child = stack.spawnCli(['-p', 'sleep', '--model', `scripted:${script}`, '--output-format', 'stream-json', '--no-apply']);
    const arrivals: { at: number; event: { type: string } }[] = [];
    let buffered = '';
    child.stdout!.on('data', (d: Buffer) => {
      buffered += d.toString();
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.trim()) arrivals.push({ at: Date.now(), event: JSON.parse(line) });
      }
    });
    child.stdin!.end();
    const code = await new Promise((r) => child.on('close', r));
    expect(code).toBe(0);
    const first = arrivals.find((a) => a.event.type === 'tool_call_proposed')!;
    // The terminal event, then one final result line carrying the json output's fields (L4).
    expect(arrivals.at(-1)!.event).toMatchObject({ type: 'result', status: 'completed', exit_code: 0 });
    const last = arrivals.at(-2)!;
    expect(last.event.type).toBe('session_completed');
    // The first proposal was printed while the 2-second command still had to run.
    expect(last.at - first.at).toBeGreaterThan(1500);
  });

  it('revoked from another shell while running: exit 3 within a second, stop_reason revoked, sandbox gone', async () => {
    const script = stack.script('revoke', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 120' } }] }, { text: 'never' }]);
    const child = stack.spawnCli(['-p', 'wait', '--model', `scripted:${script}`, '--output-format', 'stream-json', '--no-apply']);
    child.stdin!.end();
    // Listen for the end now: the CLI may well exit before the revoking command returns.
    const closed = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    let closedAt = 0;
    void closed.then(() => (closedAt = Date.now()));
    let out = '';
    let sessionId = '';
    const started = new Promise<void>((resolve) =>
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /"type":"tool_call_proposed".*?/.test(out) && /"sessionId":"([^"]+)"/.exec(out);
        if (m && !sessionId) {
          sessionId = m[1]!;
          resolve();
        }
      }),
    );
    await started;
    await new Promise((r) => setTimeout(r, 500));
    const admin = await stack.cli(['sessions', 'revoke', sessionId], { token: stack.tokens.admin });
    // The revocation took effect when the administrator's command returned; the run ends within a second of it.
    const revokedAt = Date.now();
    expect(admin.stdout).toContain('revoked');
    expect(admin.code).toBe(0);
    const code = await closed;
    expect(closedAt - revokedAt).toBeLessThan(1000);
    expect(code).toBe(3);
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.at(-1)).toMatchObject({ type: 'result', status: 'stopped', stop_reason: 'revoked', exit_code: 3 });
    expect(lines.at(-2)).toMatchObject({ type: 'session_stopped', stopReason: 'revoked' });
    expect(containersOf(sessionId)).toEqual([]);
  });

  it('a gateway that does not answer: exit 1 with a sentence', async () => {
    const r = await stack.cli(['-p', 'x', '--gateway', 'http://127.0.0.1:9', '--output-format', 'json']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/gateway/i);
    expect(r.stdout).toBe('');
  });

  it('success with an approved write: exit 0 and the patch applies to a real clone', async () => {
    const script = stack.script('write', [
      { tool_calls: [{ name: 'Edit', arguments: { path: 'src/calc.js', old_string: '(v.length - 1)', new_string: 'v.length' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'npm test' } }] },
      { text: 'Fixed.' },
    ]);
    const child = stack.spawnCli(['-p', 'fix the average', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply', '--wait-for-approvals']);
    child.stdin!.end();
    let stdout = '';
    child.stdout!.on('data', (d) => (stdout += d));
    // A person approves the diff from another place (the console or `lemni approvals approve`).
    let approved = false;
    for (let i = 0; i < 100 && !approved; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const pending = await stack.api(stack.tokens.developer, 'GET', '/approvals?state=pending');
      for (const a of pending.json ?? []) {
        expect(a.payload.diff).toContain('-  return v.reduce((a, b) => a + b, 0) / (v.length - 1);');
        const r = await stack.api(stack.tokens.developer, 'POST', `/approvals/${a.id}/approve`, {});
        expect(r.status).toBe(200);
        approved = true;
      }
    }
    const code = await new Promise((r) => child.on('close', r));
    expect(code).toBe(0);
    const out = json(stdout);
    expect(out.tool_calls[1].result.exit_code).toBe(0);
    const clone = mkdtempSync(join(tmpdir(), 'lemniscate-clone-'));
    spawnSync('git', ['clone', '-q', stack.repository, clone]);
    const apply = spawnSync('git', ['apply', '-'], { cwd: clone, input: out.patch, encoding: 'utf8' });
    expect(apply.stderr).toBe('');
    expect(apply.status).toBe(0);
    expect(readFileSync(join(clone, 'src/calc.js'), 'utf8')).toContain('/ v.length;');
  });
});
