import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, containersOf, startStack, type Stack } from './harness';

function commit(repository: string, files: Record<string, string>, message: string): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(repository, path, '..'), { recursive: true });
    writeFileSync(join(repository, path), content);
  }
  for (const args of [
    ['add', '-A', '-f'],
    ['commit', '-q', '-m', message],
  ]) {
    const r = spawnSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.invalid', ...args], { cwd: repository, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  }
}

/**
 * Issue 6 acceptance for interactive mode, in a real terminal: `lemni` runs inside tmux against the
 * real stack; the test types into it with send-keys and reads the screen with capture-pane, as a
 * person would.
 */
let stack: Stack;
const socket = `lemni-e2e-${process.pid}-${randomBytes(4).toString('hex')}`;

function tmux(...args: string[]): string {
  const r = spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tmux ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** The visible screen and its scrollback; with `escapes`, colours included. */
function screen(name: string, escapes = false): string {
  return tmux('capture-pane', '-p', '-J', '-S', '-200', ...(escapes ? ['-e'] : []), '-t', name);
}

/** A terminal shows no event to await, so the screen is read every 100 ms until `pattern` appears. */
async function waitForScreen(name: string, pattern: RegExp, timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = screen(name);
    if (pattern.test(text)) return text;
    if (Date.now() > deadline) throw new Error(`the terminal never showed ${pattern} within ${timeoutMs / 1000} s; it shows:\n${text}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits for lemni in the pane to end and returns its exit status (the launcher writes it to a file). */
async function waitForExit(name: string, timeoutMs = 10_000): Promise<number> {
  const file = join(stack.dir, `${name}.exit`);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (existsSync(file)) return Number(readFileSync(file, 'utf8').trim());
    if (Date.now() > deadline) throw new Error(`lemni did not exit within ${timeoutMs / 1000} s; the terminal shows:\n${screen(name)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Opens `lemni --model scripted:…` in a new tmux session of 160×50 with the stack's environment. */
function openLemni(name: string, script: string): void {
  const launcher = join(stack.dir, `${name}.sh`);
  const env: Record<string, string> = {
    HOME: join(stack.dir, 'home'),
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    TERM: 'xterm-256color',
    LEMNISCATE_GATEWAY: stack.gatewayUrl,
    LEMNISCATE_TOKEN: stack.tokens.developer,
    LEMNISCATE_PROJECT: 'demo',
  };
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  writeFileSync(
    launcher,
    `#!/bin/sh\ncd ${quote(stack.dir)}\nenv -i ${Object.entries(env)
      .map(([k, v]) => `${k}=${quote(v)}`)
      .join(' ')} ${quote(process.execPath)} ${quote(join(ROOT, 'apps/cli/bin/lemni.js'))} --model ${quote(`scripted:${script}`)} --no-apply\necho $? > ${quote(join(stack.dir, `${name}.exit`))}\n`,
    { mode: 0o700 },
  );
  chmodSync(launcher, 0o700);
  tmux('new-session', '-d', '-s', name, '-x', '160', '-y', '50', launcher);
  tmux('set-option', '-t', name, 'remain-on-exit', 'on');
}

async function sessionWithInstruction(instruction: string): Promise<{ id: string; status: string; stopReason: string | null; finalPatch: string | null }> {
  const r = await stack.api(stack.tokens.developer, 'GET', '/sessions');
  expect(r.status).toBe(200);
  const found = r.json.find((s: { instruction: string }) => s.instruction === instruction);
  expect(found).toBeDefined();
  return found;
}

beforeAll(async () => {
  const version = spawnSync('tmux', ['-V'], { encoding: 'utf8' });
  if (version.status !== 0) throw new Error('These tests need tmux (apt-get install -y tmux); `npm test` installs it when it is missing.');
  stack = await startStack();
  await stack.publishPolicy({ version: 1, commands: { free: ['sleep'] } });
}, 180_000);

afterAll(async () => {
  spawnSync('tmux', ['-L', socket, 'kill-server']);
  await stack?.stop();
});

describe('lemni (interactive) in a real terminal', () => {
  it('asks for an instruction, shows the exact command and a coloured diff, and applies what the person approves', async () => {
    const script = stack.script('interactive', [
      { tool_calls: [{ name: 'Bash', arguments: { command: 'echo hello-from-the-sandbox' } }] },
      { tool_calls: [{ name: 'Edit', arguments: { path: 'src/calc.js', old_string: '(v.length - 1)', new_string: 'v.length' } }] },
      { text: 'Fixed the average.' },
    ]);
    openLemni('approve', script);
    await waitForScreen('approve', /lemni ›/);
    const instruction = 'fix the average in calc';
    tmux('send-keys', '-t', 'approve', '-l', instruction);
    tmux('send-keys', '-t', 'approve', 'Enter');

    // The command approval shows the exact command and one key per answer (y approves).
    const asked = await waitForScreen('approve', /asks to run this command:[\s\S]*\$ echo hello-from-the-sandbox[\s\S]*y\) Approve/);
    expect(asked).toMatch(/n\) Reject/);
    tmux('send-keys', '-t', 'approve', 'y', 'Enter');

    // The diff approval: the removed line in red, the added one in green.
    await waitForScreen('approve', /asks to write this change:[\s\S]*\+\s+return v\.reduce[\s\S]*y\) Approve/);
    const coloured = screen('approve', true);
    expect(coloured).toMatch(/\x1b\[(?:[0-9;]*;)?31m-\s+return v\.reduce\(\(a, b\) => a \+ b, 0\) \/ \(v\.length - 1\);/);
    expect(coloured).toMatch(/\x1b\[(?:[0-9;]*;)?32m\+\s+return v\.reduce\(\(a, b\) => a \+ b, 0\) \/ v\.length;/);
    tmux('send-keys', '-t', 'approve', 'y', 'Enter');

    const done = await waitForScreen('approve', /Fixed the average\.[\s\S]*lemni ›/);
    expect(done).toContain('hello-from-the-sandbox');
    const session = await sessionWithInstruction(instruction);
    expect(session.status).toBe('completed');
    expect(session.finalPatch).toContain('+  return v.reduce((a, b) => a + b, 0) / v.length;');
    const calls = await stack.api(stack.tokens.developer, 'GET', `/sessions/${session.id}/tool-calls`);
    expect(calls.json.map((c: { name: string; decision: { effect: string } }) => [c.name, c.decision.effect])).toEqual([
      ['Bash', 'ask'],
      ['Edit', 'ask'],
    ]);
    const approvals = await stack.api(stack.tokens.developer, 'GET', `/approvals?sessionId=${session.id}`);
    expect(approvals.json.map((a: { state: string }) => a.state)).toEqual(['approved', 'approved']);
    expect(containersOf(session.id)).toEqual([]);

    // An empty line leaves.
    tmux('send-keys', '-t', 'approve', 'Enter');
    expect(await waitForExit('approve')).toBe(0);
  });

  it('a rejected command does not run', async () => {
    const script = stack.script('reject', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'echo must-not-run > proof.txt' } }] }, { text: 'It was rejected.' }]);
    openLemni('reject', script);
    await waitForScreen('reject', /lemni ›/);
    const instruction = 'write the proof file';
    tmux('send-keys', '-t', 'reject', '-l', instruction);
    tmux('send-keys', '-t', 'reject', 'Enter');
    await waitForScreen('reject', /asks to run this command:[\s\S]*echo must-not-run > proof\.txt[\s\S]*n\) Reject/);
    tmux('send-keys', '-t', 'reject', 'n', 'Enter');
    // Rejecting asks what to tell the agent, while the terminal is still the approval's.
    await waitForScreen('reject', /Reason for the agent \(Enter for none\)/);
    tmux('send-keys', '-t', 'reject', '-l', 'no proof files in this repository');
    tmux('send-keys', '-t', 'reject', 'Enter');
    await waitForScreen('reject', /It was rejected\.[\s\S]*lemni ›/);
    const session = await sessionWithInstruction(instruction);
    expect(session.status).toBe('completed');
    expect(session.finalPatch ?? '').toBe('');
    const approvals = await stack.api(stack.tokens.developer, 'GET', `/approvals?sessionId=${session.id}`);
    expect(approvals.json.map((a: { state: string }) => a.state)).toEqual(['rejected']);
    expect(approvals.json[0].reason).toBe('no proof files in this repository');
    const calls = await stack.api(stack.tokens.developer, 'GET', `/sessions/${session.id}/tool-calls`);
    expect(calls.json[0].result.ok).toBe(false);
    expect(JSON.stringify(calls.json[0].result)).toContain('no proof files in this repository');
  });

  it("the agent's question is asked at the approval point: one answered with an option, one declined with Esc", async () => {
    const script = stack.script('question', [
      { tool_calls: [{ name: 'Question', arguments: { question: 'Keep the old average API or break it?', options: ['keep it', 'break it'] } }] },
      { tool_calls: [{ name: 'Question', arguments: { question: 'Also update the changelog?' } }] },
      { text: 'Asked twice; going with the answers.' },
    ]);
    openLemni('question', script);
    await waitForScreen('question', /lemni ›/);
    const instruction = 'change the average API';
    tmux('send-keys', '-t', 'question', '-l', instruction);
    tmux('send-keys', '-t', 'question', 'Enter');

    await waitForScreen('question', /general asks: Keep the old average API or break it\?[\s\S]*keep it[\s\S]*break it[\s\S]*Answer in my own words/);
    tmux('send-keys', '-t', 'question', 'Down');
    await waitForScreen('question', /❯ break it|> break it/);
    tmux('send-keys', '-t', 'question', 'Enter');
    await waitForScreen('question', /Answered: Keep the old average API or break it\? → break it/);

    // No options: a free-form answer is asked for; Esc declines it.
    await waitForScreen('question', /general asks: Also update the changelog\?[\s\S]*Your answer/);
    tmux('send-keys', '-t', 'question', 'Escape');
    await waitForScreen('question', /Question declined: Also update the changelog\? → the agent states its assumption and continues\./);
    await waitForScreen('question', /Asked twice; going with the answers\.[\s\S]*lemni ›/);

    const session = await sessionWithInstruction(instruction);
    expect(session.status).toBe('completed');
    const approvals = await stack.api(stack.tokens.developer, 'GET', `/approvals?sessionId=${session.id}`);
    const byQuestion = Object.fromEntries(
      approvals.json.map((a: { payload: { question: string }; kind: string; state: string; response: string | null }) => [a.payload.question, [a.kind, a.state, a.response]]),
    );
    expect(byQuestion).toEqual({
      'Keep the old average API or break it?': ['question', 'approved', 'break it'],
      'Also update the changelog?': ['question', 'rejected', null],
    });
    const audit = await stack.api(stack.tokens.security, 'GET', `/audit?sessionId=${session.id}&kind=question.answered,approval.answer&order=asc`);
    expect(audit.json.items ?? audit.json).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'approval.answer', payload: expect.objectContaining({ kind: 'question', answer: 'approved', response: 'break it' }) }),
        expect.objectContaining({ kind: 'question.answered', actor: 'agent:general', payload: expect.objectContaining({ response: 'break it' }) }),
        expect.objectContaining({ kind: 'approval.answer', payload: expect.objectContaining({ kind: 'question', answer: 'rejected' }) }),
      ]),
    );
    const calls = await stack.api(stack.tokens.developer, 'GET', `/sessions/${session.id}/tool-calls`);
    expect(calls.json.map((c: { name: string; result: { summary: string } }) => [c.name, c.result.summary])).toEqual([
      ['Question', 'The developer answered your question.'],
      ['Question', 'The developer declined to answer: state your assumption and continue.'],
    ]);
    tmux('send-keys', '-t', 'question', 'Enter');
    expect(await waitForExit('question')).toBe(0);
  });

  it('Ctrl-C while a long command runs stops the session at once and its sandbox is gone', async () => {
    const script = stack.script('interrupt', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 60' } }] }, { text: 'never' }]);
    openLemni('interrupt', script);
    await waitForScreen('interrupt', /lemni ›/);
    const instruction = 'wait a minute';
    tmux('send-keys', '-t', 'interrupt', '-l', instruction);
    tmux('send-keys', '-t', 'interrupt', 'Enter');
    await waitForScreen('interrupt', /sleep 60/);
    const running = await sessionWithInstruction(instruction);
    expect(running.status).toBe('running');
    // The command has reached the sandbox once its container exists and the spinner shows it.
    await new Promise((r) => setTimeout(r, 500));
    expect(containersOf(running.id)).not.toEqual([]);

    const pressed = Date.now();
    tmux('send-keys', '-t', 'interrupt', 'C-c');
    await waitForScreen('interrupt', /Stopping the session/, 5_000);
    // Both the recorded ending and the sandbox's removal are read until they happen (bounded at 5 s).
    let session = await sessionWithInstruction(instruction);
    let stoppedAfter = Infinity;
    let goneAfter = Infinity;
    while ((stoppedAfter === Infinity || goneAfter === Infinity) && Date.now() - pressed < 5_000) {
      if (stoppedAfter === Infinity && session.status !== 'running') stoppedAfter = Date.now() - pressed;
      if (goneAfter === Infinity && containersOf(session.id).length === 0) goneAfter = Date.now() - pressed;
      await new Promise((r) => setTimeout(r, 50));
      session = await sessionWithInstruction(instruction);
    }
    expect(session).toMatchObject({ status: 'stopped', stopReason: 'stopped' });
    expect({ stoppedAfter: stoppedAfter < 1_000, goneAfter: goneAfter < 1_000, ms: { stoppedAfter, goneAfter } }).toMatchObject({ stoppedAfter: true, goneAfter: true });
    // The terminal is back at the prompt, ready for the next instruction.
    await waitForScreen('interrupt', /Stopping the session[\s\S]*lemni ›/, 5_000);
  });

  it('P3: key a approves a command with its identical repeats; the repeat runs unasked, a changed one asks again', async () => {
    await stack.publishPolicy({ version: 1, commands: { free: ['sleep'], reapproval: 'exempt' } });
    try {
      const same = 'echo approved-once';
      const changed = 'echo approved-once; echo smuggled';
      const script = stack.script('identical', [
        { tool_calls: [{ name: 'Bash', arguments: { command: same } }] },
        { tool_calls: [{ name: 'Bash', arguments: { command: same } }] },
        { tool_calls: [{ name: 'Bash', arguments: { command: changed } }] },
        { text: 'Ran it twice.' },
      ]);
      openLemni('identical', script);
      await waitForScreen('identical', /lemni ›/);
      const instruction = 'run the echo twice';
      tmux('send-keys', '-t', 'identical', '-l', instruction);
      tmux('send-keys', '-t', 'identical', 'Enter');
      await waitForScreen('identical', /\$ echo approved-once[\s\S]*a\) Approve, and identical commands too/);
      tmux('send-keys', '-t', 'identical', 'a', 'Enter');
      // The identical repeat runs without a prompt; the changed command is a new question (offered
      // the same choice, as it too is ordinary), rejected here.
      await waitForScreen('identical', /\$ echo approved-once; echo smuggled[\s\S]*n\) Reject/);
      tmux('send-keys', '-t', 'identical', 'n', 'Enter');
      // No reason given (Enter): the agent is told only that it was rejected.
      await waitForScreen('identical', /Reason for the agent \(Enter for none\)/);
      tmux('send-keys', '-t', 'identical', 'Enter');
      await waitForScreen('identical', /Ran it twice\.[\s\S]*lemni ›/);

      const session = await sessionWithInstruction(instruction);
      const listed = await stack.api(stack.tokens.developer, 'GET', `/approvals?sessionId=${session.id}`);
      const approvals = { json: [...listed.json].sort((a: { createdAt: string }, b: { createdAt: string }) => a.createdAt.localeCompare(b.createdAt)) };
      const asked = approvals.json.map((a: { payload: { command: string }; state: string; flags: { reapprovalExempt?: boolean } }) => [a.payload.command, a.state, a.flags.reapprovalExempt === true]);
      expect(asked).toEqual([
        [same, 'approved', true],
        [changed, 'rejected', true],
      ]);
      expect(approvals.json.map((a: { reason: string | null }) => a.reason)).toEqual([null, null]);
      const calls = await stack.api(stack.tokens.developer, 'GET', `/sessions/${session.id}/tool-calls`);
      const first = approvals.json[0].id as string;
      expect(
        calls.json.map((c: { arguments: { command: string }; decision: { effect: string; rule: string; approvalId?: string }; result: { exitCode?: number } }) => [
          c.arguments.command,
          c.decision.effect,
          c.decision.rule,
          c.decision.approvalId ?? null,
          c.result.exitCode ?? null,
        ]),
      ).toEqual([
        [same, 'ask', 'commands.default', null, 0],
        [same, 'allow', 'commands.reapproval', first, 0],
        [changed, 'ask', 'commands.default', null, null],
      ]);
      tmux('send-keys', '-t', 'identical', 'Enter');
      expect(await waitForExit('identical')).toBe(0);
    } finally {
      await stack.publishPolicy({ version: 1, commands: { free: ['sleep'] } });
    }
  });
});

describe('an @mention of a project agent in a running interactive session', () => {
  it('starts the subagent through the gateway, which accepts the request; it runs and its report reaches the parent session', async () => {
    commit(
      stack.repository,
      { '.lemniscate/agents/finder.md': '---\ndescription: Finds where things are.\nmode: subagent\n---\nYou find where code lives and say so in one sentence.\n' },
      'a project agent',
    );
    // One script, read in the order the model is asked: the parent sleeps, the mentioned finder asks
    // twice while it sleeps, then the parent ends.
    const script = stack.script('mention', [
      { tool_calls: [{ name: 'Bash', arguments: { command: 'sleep 15' } }] },
      { tool_calls: [{ name: 'Read', arguments: { path: 'src/calc.js' } }] },
      { text: 'The average is computed in src/calc.js.' },
      { text: 'Parent done.' },
    ]);
    openLemni('mention', script);
    await waitForScreen('mention', /lemni ›/);
    const instruction = 'wait while I ask the finder';
    tmux('send-keys', '-t', 'mention', '-l', instruction);
    tmux('send-keys', '-t', 'mention', 'Enter');
    await waitForScreen('mention', /sleep 15/);
    tmux('send-keys', '-t', 'mention', '@');
    await waitForScreen('mention', /\? @/);
    tmux('send-keys', '-t', 'mention', '-l', 'finder where is the average computed?');
    tmux('send-keys', '-t', 'mention', 'Enter');

    const started = await waitForScreen('mention', /Background finder session (\S+) started; its work is shown here marked \[finder\]\./);
    const childId = /Background finder session (\S+) started/.exec(started)![1]!;
    const done = await waitForScreen('mention', /Parent done\.[\s\S]*lemni ›/, 60_000);
    // Nothing was refused for its shape: the request the CLI built is the one the gateway validates.
    expect(done).not.toMatch(/request is invalid|unknown field|validation/i);
    expect(done).toMatch(new RegExp(`Subagent finder finished \\(${childId}\\)`));

    const parent = await sessionWithInstruction(instruction);
    expect(parent.status).toBe('completed');
    const child = (await stack.api(stack.tokens.developer, 'GET', `/sessions/${childId}`)).json;
    expect(child).toMatchObject({ parentSessionId: parent.id, agent: 'finder', instruction: 'where is the average computed?', status: 'completed', depth: 1 });
    const calls = (await stack.api(stack.tokens.developer, 'GET', `/sessions/${childId}/tool-calls`)).json as { name: string; arguments: { path?: string }; decision: { effect: string } }[];
    expect(calls.map((c) => [c.name, c.arguments.path, c.decision.effect])).toEqual([['Read', 'src/calc.js', 'allow']]);
    // The report is the parent's: recorded on the parent session's audit trail with the child's id.
    const audit = await stack.api(stack.tokens.security, 'GET', `/audit?sessionId=${parent.id}&kind=subagent.started,subagent.finished&order=asc`);
    expect(audit.json).toEqual([
      expect.objectContaining({ kind: 'subagent.started', payload: expect.objectContaining({ childSessionId: childId, agent: 'finder', background: true }) }),
      expect.objectContaining({ kind: 'subagent.finished', payload: expect.objectContaining({ childSessionId: childId, agent: 'finder', report: 'finished' }) }),
    ]);
    const refused = await stack.api(stack.tokens.security, 'GET', `/audit?sessionId=${parent.id}&kind=subagent.refused`);
    expect(refused.json).toEqual([]);
    expect(containersOf(parent.id)).toEqual([]);
    tmux('send-keys', '-t', 'mention', 'Enter');
    expect(await waitForExit('mention')).toBe(0);
  }, 120_000);
});
