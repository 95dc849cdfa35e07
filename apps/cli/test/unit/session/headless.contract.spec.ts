import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FakeGateway, GOOD_TOKEN } from '../../support/fake-gateway';
import { bashCall, completed, failed, result, started, stopped } from '../../support/events';
import { buildCli, gitIn, lemni, makeRepo } from '../../support/run-bin';

let gateway: FakeGateway;
const dirs: string[] = [];

beforeAll(() => buildCli(), 180_000);

beforeEach(async () => {
  gateway = await new FakeGateway().start();
});

afterEach(async () => {
  await gateway.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return { LEMNISCATE_GATEWAY: gateway.url, LEMNISCATE_TOKEN: GOOD_TOKEN, ...extra };
}

/** A checkout of the project's repository and the patch the session approved against it. */
function checkoutWithPatch(): { dir: string; patch: string; head: string } {
  const dir = makeRepo({ 'a.txt': 'hello\n', 'b.txt': 'keep\n' });
  dirs.push(dir);
  writeFileSync(path.join(dir, 'a.txt'), 'hello world\n');
  const patch = gitIn(dir, 'diff');
  gitIn(dir, 'checkout', '--', 'a.txt');
  gateway.projects[0] = { ...gateway.projects[0]!, repositorySource: dir };
  return { dir, patch, head: gitIn(dir, 'rev-parse', 'HEAD').trim() };
}

describe('lemni -p (headless, through the real bin)', () => {
  it('exits 0, prints the JSON result with the contract fields, and applies the approved patch', async () => {
    const { dir, patch, head } = checkoutWithPatch();
    gateway.scenario = { events: [started(head), ...bashCall('c1', 'npm test'), result('c1', 'x'.repeat(5000)), completed()], final: { finalPatch: patch, actionsUsed: 1 } };
    const r = await lemni(['-p', 'make the tests pass', '--project', 'demo', '--output-format', 'json'], { cwd: dir, env: env() });
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(out).toMatchObject({ session_id: 's1', status: 'completed', stop_reason: null, exit_code: 0, actions_used: 1, patch, summary: 'Done: tests pass.' });
    const calls = out.tool_calls as { name: string; arguments: unknown; decision: { effect: string }; result: { exit_code: number; stdout: string; stderr: string; truncated: boolean } }[];
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      name: 'Bash',
      arguments: { command: 'npm test' },
      decision: { effect: 'allow', rule: 'commands.free[0]' },
      result: { exit_code: 0, stderr: '', truncated: true },
    });
    expect(calls[0]!.result.stdout).toMatch(/…\[truncated: 1000 more characters\]$/);
    expect(readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('hello world\n');
    // Sent as headless with the checkout's commit, so the gateway refuses approvals itself.
    expect(gateway.hits('POST', '/sessions')[0]!.body).toMatchObject({ projectId: 'p1', instruction: 'make the tests pass', mode: 'headless', baseCommit: head, branch: 'main' });
  });

  it('prints only the summary on stdout in text mode, progress on stderr', async () => {
    gateway.scenario = { events: [started(), ...bashCall('c1', 'npm test'), result('c1', 'ok'), completed('All green.')], final: {} };
    const r = await lemni(['-p', 'go', '--project', 'demo'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('All green.\n');
    expect(r.stderr).toContain('Bash npm test');
    // The session's start is said once, by its session_started line (agent, model, base).
    expect(r.stderr.match(/^Session \S+ started/gm)).toHaveLength(1);
  });

  it('a failing command shows its failure, not the summary lines at its end', async () => {
    const output = ['FAIL test/average.test.js', '  ● average of [1, 2, 3]', '    Expected: 2', '    Received: 1.5', '', 'Tests: 1 failed, 3 passed', 'Time: 0.3 s'].join('\n');
    gateway.scenario = { events: [started(), ...bashCall('c1', 'npm test'), result('c1', output, 1), completed('Still red.')], final: {} };
    const r = await lemni(['-p', 'go', '--project', 'demo'], { env: env() });
    expect(r.stderr).toContain('exit 1');
    expect(r.stderr).toContain('    FAIL test/average.test.js\n      ● average of [1, 2, 3]\n        Expected: 2\n        Received: 1.5');
  });

  it.each([
    ['limit_actions', 'the action limit was reached'],
    ['loop', 'kept repeating'],
    ['revoked', 'revoked'],
  ])('exits 3 when a guardrail stops the session (%s)', async (reason, sentence) => {
    gateway.scenario = { events: [started(), stopped(reason, 'Done: a; in progress: b; remaining: c.')], final: { actionsUsed: 150 } };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--output-format', 'json'], { env: env() });
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'stopped', stop_reason: reason, exit_code: 3, actions_used: 150, classes: [reason] });
    expect(r.stderr).toContain(sentence);
  });

  it('exits 1 when the session crashes', async () => {
    gateway.scenario = { events: [started(), failed()], final: {} };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--output-format', 'json'], { env: env() });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'failed', stop_reason: 'crash', exit_code: 1, classes: ['sandbox_lost'] });
  });

  it('announces an approval it cannot give, never answers it, and follows the run to its end', async () => {
    gateway.scenario = {
      events: [
        started(),
        ...bashCall('c1', 'npm install left-pad', 'ask'),
        { type: 'approval_requested', approvalId: 'ap1', callId: 'c1', agent: 'general', kind: 'command', thirdParty: false, subject: 'npm install left-pad' },
        { type: 'approval_answered', approvalId: 'ap1', answer: 'rejected', by: { kind: 'process', description: 'headless run' }, class: 'approval_refused_headless' },
        completed('Could not install; done otherwise.'),
      ],
      final: {},
    };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--output-format', 'json'], { env: env() });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('Refused: general needs a person to approve `npm install left-pad`');
    // Said once: the gateway's answer that follows adds nothing to that sentence.
    expect(r.stderr.match(/nobody can approve in a headless run/g)).toHaveLength(1);
    const out = JSON.parse(r.stdout) as { refusals: unknown[]; classes: string[]; tool_calls: { approval: unknown }[] };
    expect(out.refusals).toEqual([{ approval_id: 'ap1', kind: 'command', subject: 'npm install left-pad', class: 'approval_refused_headless' }]);
    expect(out.classes).toContain('approval_refused_headless');
    expect(out.tool_calls[0]!.approval).toEqual({ id: 'ap1', answer: 'rejected', class: 'approval_refused_headless' });
    expect(gateway.requests.filter((q) => q.path.startsWith('/approvals'))).toEqual([]);
  });

  // L4: every combination of the flags that shape a headless run, each recorded with the mode it is.
  const flagCombinations = [false, true].flatMap((wait) => [false, true].flatMap((failOnRefusal) => (['text', 'json', 'stream-json'] as const).map((format) => ({ wait, failOnRefusal, format }))));
  it(`sends the session's mode, and only the mode, for each of the ${flagCombinations.length} combinations of -p flags`, async () => {
    for (const c of flagCombinations) {
      gateway.scenario = { events: [started(), completed()], final: {} };
      const args = ['-p', 'go', '--project', 'demo', '--output-format', c.format, ...(c.wait ? ['--wait-for-approvals'] : []), ...(c.failOnRefusal ? ['--fail-on-refusal'] : [])];
      const before = gateway.hits('POST', '/sessions').length;
      const r = await lemni(args, { env: env() });
      // The fake gateway validates the body with the shared CreateSessionRequest: a 400 would exit 1.
      expect({ args, code: r.code }).toEqual({ args, code: 0 });
      const body = gateway.hits('POST', '/sessions')[before]!.body as Record<string, unknown>;
      expect({ args, mode: body.mode, headless: body.headless, waitForApprovals: body.waitForApprovals }).toEqual({
        args,
        mode: c.wait ? 'headless_with_approvals' : 'headless',
        headless: undefined,
        waitForApprovals: undefined,
      });
    }
    expect(gateway.hits('POST', '/sessions')).toHaveLength(flagCombinations.length);
  }, 120_000);

  it('refuses --wait-for-approvals without -p before starting anything', async () => {
    const r = await lemni(['--project', 'demo', '--wait-for-approvals'], { env: env() });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('--wait-for-approvals goes with -p');
    expect(gateway.hits('POST', '/sessions')).toEqual([]);
  });

  it('--wait-for-approvals asks the gateway to keep approvals for a person and says where to answer', async () => {
    gateway.scenario = {
      events: [
        started(),
        { type: 'approval_requested', approvalId: 'ap7', callId: null, agent: 'general', kind: 'diff', thirdParty: false, subject: 'diff --git a/x b/x\n' },
        { type: 'approval_answered', approvalId: 'ap7', answer: 'approved', by: { kind: 'user', userId: 'u1' } },
        { type: 'approval_requested', approvalId: 'ap8', callId: null, agent: 'general', kind: 'question', thirdParty: false, subject: 'Keep the old API?', options: ['yes', 'no'] },
        { type: 'approval_answered', approvalId: 'ap8', answer: 'approved', by: { kind: 'user', userId: 'u1' }, response: 'yes' },
        completed(),
      ],
      final: {},
    };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--wait-for-approvals'], { env: env() });
    expect(r.code).toBe(0);
    expect(gateway.hits('POST', '/sessions')[0]!.body).toMatchObject({ mode: 'headless_with_approvals' });
    expect(r.stderr).toContain('Waiting for a person: general asks to apply a diff; approve or reject it in the console or with `lemni approvals approve|reject ap7`.');
    expect(r.stderr).toContain(
      'Waiting for a person: general asks "Keep the old API?" (yes / no); answer it in the console or with `lemni approvals approve ap8 --answer TEXT`, or decline it with `lemni approvals reject ap8`.',
    );
    expect(r.stderr).not.toContain('Refused');
  });

  it('stream-json prints each event on its own line while the session is still running', async () => {
    gateway.scenario = { events: [started(), ...bashCall('c1', 'npm test'), result('c1', 'ok'), completed()], gateAt: 3, final: {} };
    const lines: string[] = [];
    let sawFirstBeforeEnd = false;
    const run = lemni(['-p', 'go', '--project', 'demo', '--output-format', 'stream-json'], {
      env: env(),
      onLine: (line) => {
        lines.push(line);
        // The session cannot end before the gate is released, and we release it only from here.
        if (lines.length === 3) {
          sawFirstBeforeEnd = true;
          gateway.release();
        }
      },
    });
    const r = await run;
    expect(r.code).toBe(0);
    expect(sawFirstBeforeEnd).toBe(true);
    const events = lines.map((l) => JSON.parse(l) as { type: string; seq: number });
    expect(events.map((e) => e.type)).toEqual(['session_started', 'tool_call_proposed', 'decision', 'tool_result', 'session_completed', 'result']);
    expect(events.slice(0, 5).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    // L4: the last line carries the JSON result's fields, exit_code included.
    expect(events[5]).toMatchObject({ type: 'result', exit_code: 0, status: 'completed', refused_changes: [], reverted_changes: [], model: 'scripted:test.json', usage: null });
    expect(typeof (events[5] as unknown as { duration_ms: unknown }).duration_ms).toBe('number');
  });

  it.each([
    [[], 0],
    [['--fail-on-refusal'], 3],
  ])('a run whose only change was refused headlessly, with flags %j, exits %i (json and stream-json agree)', async (flags, code) => {
    const refusedWrite = [
      { type: 'tool_call_proposed', callId: 'c1', agent: 'general', name: 'Write', arguments: { path: 'a.txt', content: 'x' } },
      { type: 'decision', callId: 'c1', effect: 'ask', rule: 'files.default', reason: 'writes are approved as a diff', thirdParty: false },
      { type: 'approval_requested', approvalId: 'a1', callId: 'c1', agent: 'general', kind: 'diff', thirdParty: false, subject: '+x' },
      { type: 'approval_answered', approvalId: 'a1', answer: 'rejected', by: { kind: 'process', description: 'headless session' }, class: 'approval_refused_headless' },
    ];
    const outputs: Record<string, unknown>[] = [];
    for (const format of ['json', 'stream-json']) {
      gateway.scenario = { events: [started(), ...refusedWrite, completed()], final: {} };
      const r = await lemni(['-p', 'go', '--project', 'demo', '--output-format', format, ...flags], { env: env() });
      expect(r.code).toBe(code);
      const last = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
      expect(last).toMatchObject({ status: 'completed', exit_code: code, refused_changes: [{ approval_id: 'a1', kind: 'diff', class: 'approval_refused_headless' }], reverted_changes: [] });
      const { type, duration_ms, session_id, ...rest } = last;
      expect(typeof duration_ms).toBe('number');
      expect([type, typeof session_id]).toEqual([format === 'json' ? undefined : 'result', 'string']);
      outputs.push(rest);
    }
    expect(outputs[1]).toEqual(outputs[0]);
  });

  it('Ctrl-C stops the session through the gateway and exits 3', async () => {
    gateway.scenario = { events: [started(), ...bashCall('c1', 'sleep 1000'), completed()], gateAt: 3, final: {} };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--output-format', 'json'], {
      env: env(),
      onStderr: (text, child) => {
        if (text.includes('Bash sleep 1000')) child.kill('SIGINT');
      },
    });
    expect(r.code).toBe(3);
    expect(gateway.hits('POST', '/sessions/s1/stop')).toHaveLength(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'stopped', stop_reason: 'stopped' });
    gateway.release();
  });

  it('a conflicting patch leaves the repository exactly as it was, says so and exits 1', async () => {
    const { dir, patch, head } = checkoutWithPatch();
    writeFileSync(path.join(dir, 'a.txt'), 'hello there\n');
    gitIn(dir, 'commit', '-q', '-am', 'diverge');
    writeFileSync(path.join(dir, 'b.txt'), 'local edit\n');
    const before = gitIn(dir, 'status', '--porcelain');
    gateway.scenario = { events: [started(head), completed()], final: { finalPatch: patch } };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--output-format', 'json'], { cwd: dir, env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('conflicts with your working tree in a.txt; the repository is unchanged');
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'completed', applied: { applied: false, conflicts: ['a.txt'] }, classes: ['apply_conflict'] });
    expect(readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('hello there\n');
    expect(readFileSync(path.join(dir, 'b.txt'), 'utf8')).toBe('local edit\n');
    expect(gitIn(dir, 'status', '--porcelain')).toBe(before);
  });

  it('--no-apply leaves the checkout alone', async () => {
    const { dir, patch, head } = checkoutWithPatch();
    gateway.scenario = { events: [started(head), completed()], final: { finalPatch: patch } };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--no-apply'], { cwd: dir, env: env() });
    expect(r.code).toBe(0);
    expect(readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('hello\n');
  });

  it('inside a checkout of another repository, the patch is left alone and that is said', async () => {
    const { patch, head } = checkoutWithPatch();
    const other = makeRepo({ 'a.txt': 'hello\n' });
    dirs.push(other);
    gateway.scenario = { events: [started(head), completed()], final: { finalPatch: patch } };
    const r = await lemni(['-p', 'go', '--project', 'demo'], { cwd: other, env: env() });
    expect(r.code).toBe(0);
    expect(readFileSync(path.join(other, 'a.txt'), 'utf8')).toBe('hello\n');
    expect(r.stderr).toContain(`The approved patch was not applied: ${other} is not a checkout of demo's repository`);
  });

  it('--include-uncommitted uploads tracked and untracked changes but no secrets, and records it', async () => {
    const { dir, head } = checkoutWithPatch();
    writeFileSync(path.join(dir, 'b.txt'), 'changed\n');
    writeFileSync(path.join(dir, 'new.txt'), 'untracked\n');
    writeFileSync(path.join(dir, '.env'), 'API_KEY=secret\n');
    gitIn(dir, 'add', 'b.txt');
    const indexBefore = gitIn(dir, 'diff', '--cached', '--name-only');
    gateway.scenario = { events: [started(head), completed()], final: {} };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--include-uncommitted', '--no-apply'], { cwd: dir, env: env() });
    expect(r.code).toBe(0);
    const body = gateway.hits('POST', '/sessions')[0]!.body as { startingPatch: string; includedUncommitted: boolean; baseCommit: string };
    expect(body.includedUncommitted).toBe(true);
    expect(body.baseCommit).toBe(head);
    expect(body.startingPatch).toContain('+changed');
    expect(body.startingPatch).toContain('+untracked');
    expect(body.startingPatch).not.toContain('API_KEY');
    expect(r.stderr).toContain('Not uploaded (they look like secrets): .env.');
    expect(gitIn(dir, 'diff', '--cached', '--name-only')).toBe(indexBefore);
  });
});

describe("lemni -p sends what only the developer's machine knows", () => {
  it('LEMNISCATE_SESSION_* variables, the execution settings and the personal agents', async () => {
    const home = mkdtempSync(path.join(os.tmpdir(), 'lemni-devctx-'));
    dirs.push(home);
    mkdirSync(path.join(home, '.lemniscate', 'agents'), { recursive: true });
    writeFileSync(path.join(home, '.lemniscate', 'config.yaml'), 'profiles: {}\nexecution:\n  sessionMaxActions: 40\n', { mode: 0o600 });
    writeFileSync(path.join(home, '.lemniscate', 'agents', 'reviewer.md'), '---\ndescription: Reviews\n---\nReview.\n');
    writeFileSync(path.join(home, '.lemniscate', 'agents', 'bad name.md'), 'x');
    gateway.scenario = { events: [started(), completed()], final: {} };
    const r = await lemni(['-p', 'go', '--project', 'demo', '--model', 'scripted:/tmp/s.json'], { env: env({ HOME: home, LEMNISCATE_SESSION_MAX_MINUTES: '5', LEMNISCATE_OTHER: 'x' }) });
    expect(r.code).toBe(0);
    expect(gateway.hits('POST', '/sessions')[0]!.body).toMatchObject({
      model: 'scripted:/tmp/s.json',
      environment: { LEMNISCATE_SESSION_MAX_MINUTES: '5' },
      userConfig: { execution: { sessionMaxActions: 40 } },
      userAgents: [{ fileName: 'reviewer.md', text: '---\ndescription: Reviews\n---\nReview.\n' }],
    });
    expect((gateway.hits('POST', '/sessions')[0]!.body as { environment: object }).environment).toEqual({ LEMNISCATE_SESSION_MAX_MINUTES: '5' });
    expect(r.stderr).toContain('bad name.md: an agent file name is letters');
  });
});

describe('lemni -p refuses unusable invocations with one sentence and exit 1', () => {
  it('gateway unreachable', async () => {
    const url = gateway.url;
    await gateway.close();
    gateway = await new FakeGateway().start();
    const r = await lemni(['-p', 'go', '--project', 'demo', '--gateway', url, '--token', GOOD_TOKEN]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`Cannot reach the gateway at ${url}: is it running? (\`npm start\`)\n`);
  });

  it('bad token', async () => {
    const r = await lemni(['-p', 'go', '--project', 'demo'], { env: env({ LEMNISCATE_TOKEN: 'lmn_revoked' }) });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`The gateway at ${gateway.url} refused the API token (unknown, expired or revoked): run \`lemni login\` or pass a valid --token.\n`);
  });

  it('unknown project; with no session there is no result, so stdout stays empty even in JSON mode', async () => {
    const r = await lemni(['-p', 'go', '--project', 'nope', '--output-format', 'json'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('Unknown project "nope": the projects you can use are demo (`lemni projects` lists them).\n');
    expect(r.stdout).toBe('');
  });

  it('no project at all', async () => {
    const r = await lemni(['-p', 'go'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Name a project with --project NAME');
  });
});
