import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack } from './harness';

/**
 * Honest results, end to end (L4, X3): `--fail-on-refusal` turns a completed run whose only change
 * was refused or reverted into exit 3, the JSON result and the stream-json result line say which
 * changes, the session is recorded with the mode it was started in, and its tree fingerprint at the
 * end is the one a reviewer recomputes from the base commit and the patch.
 */
let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
  await stack.publishPolicy({ version: 1, commands: { free: ['npm test', 'node --test', 'cat', 'ls', 'echo', 'cp'] } });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
});

type Result = Record<string, any>;
const lastLine = (out: string): Result => JSON.parse(out.trim().split('\n').at(-1)!);

/** X3 as a reviewer recomputes it with git alone: the index of a checkout, the secret the sandbox never got left out. */
function reviewerFingerprint(checkout: string, excluded: string[]): string {
  const listed = spawnSync('git', ['ls-files', '-s', '-z'], { cwd: checkout, encoding: 'utf8' }).stdout;
  const hash = createHash('sha256');
  for (const entry of listed.split('\0').filter(Boolean)) if (!excluded.includes(entry.slice(entry.indexOf('\t') + 1))) hash.update(`${entry}\0`);
  return `sha256:${hash.digest('hex')}`;
}

async function storedSession(id: string): Promise<Result> {
  const shown = await stack.cli(['session', 'show', id, '--json']);
  expect(shown.code).toBe(0);
  return JSON.parse(shown.stdout).session as Result;
}

/** The refusals of a run without the ids that differ from one run to the next. */
const shapeOf = (r: Result) => ({
  refused: (r.refused_changes as Result[]).map((c) => ({ kind: c.kind, class: c.class, subject: c.subject, byApproval: c.approval_id !== null })),
  reverted: r.reverted_changes as Result[],
});

describe('--fail-on-refusal, headless, with the real stack', () => {
  // Each a run whose only proposed change is not kept, and how the result must describe it.
  const scenarios = [
    {
      name: 'a write the policy forbids (a CI file, P5)',
      turns: [{ tool_calls: [{ name: 'Write', arguments: { path: '.github/workflows/ci.yml', content: 'on: push\njobs: { deploy: {} }\n' } }] }, { text: 'Tried.' }],
      expect: (r: Result) => {
        expect(r.refused_changes).toEqual([expect.objectContaining({ approval_id: null, kind: 'diff', subject: '.github/workflows/ci.yml' })]);
        expect(typeof r.refused_changes[0].class).toBe('string');
        expect(r.reverted_changes).toEqual([]);
      },
    },
    {
      name: 'a write nobody can approve headless',
      turns: [{ tool_calls: [{ name: 'Write', arguments: { path: 'src/new.js', content: 'module.exports = 1;\n' } }] }, { text: 'Tried.' }],
      expect: (r: Result) => {
        expect(r.refused_changes).toEqual([expect.objectContaining({ kind: 'diff', class: 'approval_refused_headless' })]);
        expect(r.refused_changes[0].approval_id).toEqual(expect.any(String));
        expect(r.reverted_changes).toEqual([]);
      },
    },
    {
      name: 'a change left by a free command, reverted',
      turns: [{ tool_calls: [{ name: 'Bash', arguments: { command: 'cp src/calc.js src/copy.js' } }] }, { text: 'Tried.' }],
      expect: (r: Result) => {
        expect(r.reverted_changes).toEqual([{ paths: ['src/copy.js'], because: 'rejected' }]);
        expect(r.refused_changes).toEqual([expect.objectContaining({ kind: 'changes', class: 'approval_refused_headless' })]);
      },
    },
  ];
  const cells = scenarios.flatMap((scenario) => [false, true].flatMap((flag) => (['json', 'stream-json'] as const).map((format) => ({ scenario, flag, format }))));

  it(`exits 0 without the flag and 3 with it, and says which changes, for ${cells.length} runs (${scenarios.length} kinds of refusal × flag × output format)`, async () => {
    const shapes = new Map<string, ReturnType<typeof shapeOf>[]>();
    for (const { scenario, flag, format } of cells) {
      const label = `${scenario.name}, ${flag ? 'with' : 'without'} --fail-on-refusal, ${format}`;
      const script = stack.script('refusal', scenario.turns);
      const r = await stack.cli(['-p', 'change something', '--model', `scripted:${script}`, '--output-format', format, '--no-apply', ...(flag ? ['--fail-on-refusal'] : [])]);
      expect({ label, code: r.code }).toEqual({ label, code: flag ? 3 : 0 });
      const result = lastLine(r.stdout);
      if (format === 'stream-json') {
        const lines = r.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Result);
        // The terminal event says the session completed (exit 0); the result line carries the run's exit code.
        expect(lines.at(-2)).toMatchObject({ type: 'session_completed', exitCode: 0 });
        expect(result.type).toBe('result');
      }
      expect({ label, status: result.status, stop_reason: result.stop_reason, exit_code: result.exit_code }).toEqual({ label, status: 'completed', stop_reason: null, exit_code: flag ? 3 : 0 });
      scenario.expect(result);
      expect(result.patch).toBe('');
      // The same run described the same way whatever the flag and the format.
      shapes.set(scenario.name, [...(shapes.get(scenario.name) ?? []), shapeOf(result)]);
      const session = await storedSession(result.session_id);
      expect({ label, mode: session.mode, headless: session.headless }).toEqual({ label, mode: 'headless', headless: true });
      // X3: nothing was kept, so the tree at the end is the tree at the start.
      expect(session.fingerprintStart).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect({ label, end: session.fingerprintEnd }).toEqual({ label, end: session.fingerprintStart });
    }
    for (const [name, seen] of shapes) {
      expect({ name, runs: seen.length }).toEqual({ name, runs: 4 });
      for (const s of seen) expect({ name, s }).toEqual({ name, s: seen[0] });
    }
  }, 600_000);

  it('a run with no refused or reverted change exits 0 with the flag', async () => {
    const script = stack.script('clean', [
      { tool_calls: [{ name: 'Read', arguments: { path: 'src/calc.js' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'ls' } }] },
      { text: 'Read it.' },
    ]);
    for (const format of ['json', 'stream-json']) {
      const r = await stack.cli(['-p', 'read', '--model', `scripted:${script}`, '--output-format', format, '--no-apply', '--fail-on-refusal']);
      expect({ format, code: r.code }).toEqual({ format, code: 0 });
      expect(lastLine(r.stdout)).toMatchObject({ status: 'completed', exit_code: 0, refused_changes: [], reverted_changes: [] });
    }
  });
});

describe('--wait-for-approvals, recorded as such, and the tree it kept (L4, X3)', () => {
  it('is stored as headless_with_approvals; the end fingerprint differs from the start and is the tree the patch gives', async () => {
    const script = stack.script('waited', [
      { tool_calls: [{ name: 'Edit', arguments: { path: 'src/calc.js', old_string: '(v.length - 1)', new_string: 'v.length' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'npm test' } }] },
      { text: 'Fixed.' },
    ]);
    const child = stack.spawnCli(['-p', 'fix the average', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply', '--wait-for-approvals']);
    child.stdin!.end();
    let stdout = '';
    child.stdout!.on('data', (d) => (stdout += d));
    const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
    let sessionId: string | null = null;
    // While it runs, the session already says how it was started; a person approves from elsewhere.
    for (let i = 0; i < 150 && !sessionId; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const pending = await stack.api(stack.tokens.developer, 'GET', '/approvals?state=pending');
      for (const a of pending.json ?? []) {
        const running = await storedSession(a.sessionId);
        expect(running).toMatchObject({ status: 'running', mode: 'headless_with_approvals', headless: false });
        expect((await stack.api(stack.tokens.developer, 'POST', `/approvals/${a.id}/approve`, {})).status).toBe(200);
        sessionId = a.sessionId as string;
      }
    }
    expect(await closed).toBe(0);
    const out = lastLine(stdout);
    expect(out.session_id).toBe(sessionId);
    const session = await storedSession(out.session_id);
    expect(session).toMatchObject({ status: 'completed', mode: 'headless_with_approvals', headless: false });
    expect(session.fingerprintStart).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(session.fingerprintEnd).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(session.fingerprintEnd).not.toBe(session.fingerprintStart);
    // A reviewer's check: the base commit gives the start, the base commit plus the patch gives the end.
    const clone = mkdtempSync(join(tmpdir(), 'lemniscate-x3-'));
    try {
      spawnSync('git', ['clone', '-q', stack.repository, clone]);
      spawnSync('git', ['checkout', '-q', session.baseCommit], { cwd: clone });
      expect(reviewerFingerprint(clone, ['.env'])).toBe(session.fingerprintStart);
      const apply = spawnSync('git', ['apply', '--index', '-'], { cwd: clone, input: session.finalPatch, encoding: 'utf8' });
      expect(apply.stderr).toBe('');
      expect(reviewerFingerprint(clone, ['.env'])).toBe(session.fingerprintEnd);
    } finally {
      rmSync(clone, { recursive: true, force: true });
    }
    // `lemni sessions` lists it with its mode.
    const listed = await stack.cli(['sessions']);
    expect(listed.stdout).toMatch(new RegExp(`^${session.id}\\s+completed\\s+headless_with_approvals\\s`, 'm'));
  });
});
