import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { approvalView, FakeGateway, GOOD_TOKEN } from '../../support/fake-gateway';
import { bashCall, completed, result, started } from '../../support/events';
import { buildCli, repo } from '../../support/run-bin';

/**
 * Interactive mode in a real terminal: tmux runs the real bin, keys are sent with send-keys and the
 * screen is read with capture-pane, against the loopback gateway.
 */
const socket = `lemni-test-${process.pid}`;
const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
const screen = () => tmux('capture-pane', '-p', '-t', 'cli', '-S', '-200');

/** Waits for something another process does; there is no event to await across a terminal. */
async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}. Screen:\n${hasTmux ? screen() : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let gateway: FakeGateway;
let home: string;

beforeAll(() => buildCli(), 180_000);
beforeEach(async () => {
  gateway = await new FakeGateway().start();
  home = mkdtempSync(path.join(os.tmpdir(), 'lemni-tty-'));
});
afterEach(async () => {
  if (hasTmux) spawnSync('tmux', ['-L', socket, 'kill-server']);
  await gateway.close();
  rmSync(home, { recursive: true, force: true });
});

(hasTmux ? it : it.skip)(
  'answers an approval, shows the run, and Ctrl-C stops the next session',
  async () => {
    gateway.approvals = [approvalView('a1')];
    gateway.scenario = {
      events: [
        started(),
        ...bashCall('c1', 'npm install left-pad', 'ask'),
        { type: 'approval_requested', approvalId: 'a1', callId: 'c1', agent: 'general', kind: 'command', thirdParty: false, subject: 'npm install left-pad' },
        { type: 'approval_answered', approvalId: 'a1', answer: 'approved', by: { kind: 'user', userId: 'u1' } },
        result('c1', 'added 1 package'),
        completed('Installed left-pad.'),
      ],
      gateAt: 4,
      final: {},
    };
    const env = [`HOME=${home}`, `LEMNISCATE_GATEWAY=${gateway.url}`, `LEMNISCATE_TOKEN=${GOOD_TOKEN}`, `PATH=${process.env.PATH ?? ''}`, 'TERM=xterm-256color'];
    tmux('new-session', '-d', '-s', 'cli', '-x', '160', '-y', '50', 'env', '-i', ...env, process.execPath, path.join(repo, 'apps/cli/bin/lemni.js'), '--project', 'demo');
    await until('the instruction prompt', () => screen().includes('lemni ›'));
    tmux('send-keys', '-t', 'cli', 'install left-pad', 'Enter');
    await until('the approval prompt', () => screen().includes('Approval a1'));
    expect(screen()).toContain('$ npm install left-pad');
    tmux('send-keys', '-t', 'cli', 'y', 'Enter');
    await until('the approval answer', () => gateway.hits('POST', '/approvals/a1/approve').length === 1);
    gateway.release();
    await until('the summary', () => screen().includes('Installed left-pad.'));

    gateway.scenario = { events: [started(), ...bashCall('c2', 'sleep 600')], final: {} };
    await until('the prompt again', () => screen().split('lemni ›').length > 2);
    tmux('send-keys', '-t', 'cli', 'wait forever', 'Enter');
    await until('the long command', () => screen().includes('Bash sleep 600'));
    // @ while the session runs: a background subagent of it.
    tmux('send-keys', '-t', 'cli', '@');
    await until('the mention prompt', () => /\? @/.test(screen()));
    tmux('send-keys', '-t', 'cli', 'explore where is the parser?', 'Enter');
    await until('the subagent request', () => gateway.hits('POST', '/sessions/s2/subagents').length === 1);
    expect(gateway.hits('POST', '/sessions/s2/subagents')[0]!.body).toEqual({ agent: 'explore', instruction: 'where is the parser?' });
    await until('the subagent notice', () => screen().includes('Background explore session s3 started; its work is shown here marked [explore].'));
    tmux('send-keys', '-t', 'cli', 'C-c');
    await until('the stop request', () => gateway.hits('POST', '/sessions/s2/stop').length === 1);
    await until('the stop message', () => screen().includes('Session stopped: it was stopped.'));
  },
  60_000,
);

(hasTmux ? it : it.skip)(
  "answers the agent's question by picking an option, in its own words, and declines one with Esc",
  async () => {
    const question = (id: string, subject: string, options: string[]) => ({
      type: 'approval_requested',
      approvalId: id,
      callId: null,
      agent: 'general',
      kind: 'question',
      thirdParty: false,
      subject,
      options,
    });
    gateway.approvals = ['q1', 'q2', 'q3'].map((id) => approvalView(id, { kind: 'question', payload: { question: 'which?', options: [] } }));
    gateway.scenario = {
      events: [
        started(),
        question('q1', 'Keep the old API or break it?', ['keep it', 'break it']),
        question('q2', 'What should the new flag be called?', []),
        question('q3', 'Run the slow tests too?', ['yes', 'no']),
        completed('Done asking.'),
      ],
      gateAt: 4,
      final: {},
    };
    const env = [`HOME=${home}`, `LEMNISCATE_GATEWAY=${gateway.url}`, `LEMNISCATE_TOKEN=${GOOD_TOKEN}`, `PATH=${process.env.PATH ?? ''}`, 'TERM=xterm-256color'];
    tmux('new-session', '-d', '-s', 'cli', '-x', '160', '-y', '50', 'env', '-i', ...env, process.execPath, path.join(repo, 'apps/cli/bin/lemni.js'), '--project', 'demo');
    await until('the instruction prompt', () => screen().includes('lemni ›'));
    tmux('send-keys', '-t', 'cli', 'refactor the API', 'Enter');
    await until('the first question', () => screen().includes('Question q1'));
    expect(screen()).toContain('general asks: Keep the old API or break it?');
    expect(screen()).toContain('Answer in my own words');
    tmux('send-keys', '-t', 'cli', 'Down', 'Enter');
    await until('the first answer', () => gateway.hits('POST', '/approvals/q1/approve').length === 1);
    expect(gateway.hits('POST', '/approvals/q1/approve')[0]!.body).toEqual({ rememberCommand: false, response: 'break it' });
    // No options: the answer is typed.
    await until('the second question', () => screen().includes('What should the new flag be called?') && screen().includes('Your answer'));
    tmux('send-keys', '-t', 'cli', '  --fast-path ', 'Enter');
    await until('the second answer', () => gateway.hits('POST', '/approvals/q2/approve').length === 1);
    expect(gateway.hits('POST', '/approvals/q2/approve')[0]!.body).toEqual({ rememberCommand: false, response: '--fast-path' });
    await until('the third question', () => screen().includes('Question q3'));
    tmux('send-keys', '-t', 'cli', 'Escape');
    await until('the decline', () => gateway.hits('POST', '/approvals/q3/reject').length === 1);
    expect(gateway.hits('POST', '/approvals/q3/approve')).toEqual([]);
    await until('the declined note', () => screen().includes('(declined)'));
    gateway.release();
    await until('the summary', () => screen().includes('Done asking.'));
  },
  60_000,
);

(hasTmux ? it : it.skip)(
  'P3: key a approves identical commands too, offered only when the gateway says the policy allows it',
  async () => {
    gateway.approvals = [
      approvalView('a1', { payload: { command: 'npm test', workingDirectory: '/workspace' }, flags: { thirdParty: [], reapprovalExempt: true } }),
      approvalView('a2', { payload: { command: 'git commit -am wip' } }),
    ];
    const request = (id: string, subject: string, offered: boolean) => ({
      type: 'approval_requested',
      approvalId: id,
      callId: id === 'a1' ? 'c1' : 'c2',
      agent: 'general',
      kind: 'command',
      thirdParty: false,
      subject,
      ...(offered ? { reapprovalExempt: true } : {}),
    });
    const events = [started(), ...bashCall('c1', 'npm test', 'ask'), request('a1', 'npm test', true), ...bashCall('c2', 'git commit -am wip', 'ask'), request('a2', 'git commit -am wip', false)];
    gateway.scenario = {
      events: [
        ...events,
        { type: 'approval_answered', approvalId: 'a1', answer: 'approved', by: { kind: 'user', userId: 'u1' } },
        { type: 'approval_answered', approvalId: 'a2', answer: 'approved', by: { kind: 'user', userId: 'u1' } },
        completed('Tests ran.'),
      ],
      gateAt: events.length,
      final: {},
    };
    const env = [`HOME=${home}`, `LEMNISCATE_GATEWAY=${gateway.url}`, `LEMNISCATE_TOKEN=${GOOD_TOKEN}`, `PATH=${process.env.PATH ?? ''}`, 'TERM=xterm-256color'];
    tmux('new-session', '-d', '-s', 'cli', '-x', '160', '-y', '50', 'env', '-i', ...env, process.execPath, path.join(repo, 'apps/cli/bin/lemni.js'), '--project', 'demo');
    await until('the instruction prompt', () => screen().includes('lemni ›'));
    tmux('send-keys', '-t', 'cli', 'run the tests', 'Enter');
    await until('the first approval', () => screen().includes('Approval a1'));
    await until('its keys', () => screen().includes('a) Approve, and identical commands too'));
    tmux('send-keys', '-t', 'cli', 'a', 'Enter');
    await until('the first answer', () => gateway.hits('POST', '/approvals/a1/approve').length === 1);
    expect(gateway.hits('POST', '/approvals/a1/approve')[0]!.body).toEqual({ rememberCommand: true });

    // Not offered: no key a, and typing it approves nothing.
    await until('the second approval', () => screen().includes('Approval a2'));
    const second = () => screen().slice(screen().lastIndexOf('Approval a2'));
    await until('its keys', () => second().includes('s) Stop the session'));
    expect(second()).not.toContain('identical');
    tmux('send-keys', '-t', 'cli', 'a', 'Enter');
    await until('the refusal of the key', () => second().includes("isn't an available option"));
    expect(gateway.hits('POST', '/approvals/a2/approve')).toEqual([]);
    tmux('send-keys', '-t', 'cli', 'BSpace', 'y', 'Enter');
    await until('the second answer', () => gateway.hits('POST', '/approvals/a2/approve').length === 1);
    expect(gateway.hits('POST', '/approvals/a2/approve')[0]!.body).toEqual({ rememberCommand: false });
    gateway.release();
    await until('the summary', () => screen().includes('Tests ran.'));
  },
  60_000,
);
