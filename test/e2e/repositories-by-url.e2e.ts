import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeBareRepository, startHttpsGitServer, startSshGitServer, type HttpsGitServer, type SshGitServer } from '../support/git-servers';
import { startStack, type Stack } from './harness';

/**
 * AG1 and S9 for a project whose repository is a git URL (ADR 0012), through the real CLI, gateway
 * and exec-host against real git servers on this machine: the administrator sets the project's
 * repository access, the agents of the repository's default ref are listed, and a session runs one
 * of them (its frontmatter's action budget is what stops it) and delegates to another, over https
 * and over ssh; without the access the listing says why, and the session start is refused with the
 * sentence that names the cause.
 */
jest.setTimeout(300_000);

const PASSWORD = `tok-${randomBytes(10).toString('hex')}`;
const FILES = {
  'README.md': '# url project\n',
  '.lemniscate/agents/capped.md': '---\ndescription: Reads files with a budget of its own.\nsessionMaxActions: 4\n---\nYou read the files you are asked to read.\n',
  '.lemniscate/agents/helper.md': '---\ndescription: A helper the main agent delegates to.\nmode: subagent\nsessionMaxActions: 1\n---\nYou read one file and report.\n',
};

let stack: Stack;
let root: string;
let https: HttpsGitServer;
let ssh: SshGitServer;
const projects: Record<'https' | 'ssh', { id: string; name: string }> = {} as never;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'lemni-url-repos-'));
  await makeBareRepository(join(root, 'app.git'), FILES);
  https = await startHttpsGitServer({ root, username: 'ci-bot', password: PASSWORD });
  ssh = await startSshGitServer({ root });
  stack = await startStack();
  for (const [transport, source] of [
    ['https', https.url('app.git')],
    ['ssh', ssh.url('app.git')],
  ] as const) {
    const name = `by-${transport}`;
    const created = await stack.api(stack.tokens.admin, 'POST', '/projects', { name, repositorySource: source, defaultRef: 'main' });
    expect(created.status).toBe(201);
    projects[transport] = { id: created.json.id, name };
    const me = await stack.api(stack.tokens.developer, 'GET', '/auth/me');
    expect((await stack.api(stack.tokens.admin, 'POST', `/projects/${created.json.id}/members`, { userId: me.json.user.id })).status).toBe(201);
  }
}, 300_000);

afterAll(async () => {
  await stack?.stop();
  await https?.close();
  await ssh?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const access = (transport: 'https' | 'ssh') =>
  transport === 'https'
    ? { credential: { kind: 'https', username: 'ci-bot', password: PASSWORD }, caPem: https.caPem }
    : { credential: { kind: 'ssh', privateKey: ssh.clientKey }, knownHosts: ssh.knownHosts };

describe.each(['https', 'ssh'] as const)('a project whose repository is an %s URL', (transport) => {
  it('without access, the agents listing says why and a session start is refused with a sentence', async () => {
    const { id, name } = projects[transport];
    const agents = await stack.api(stack.tokens.developer, 'GET', `/projects/${id}/agents`);
    expect(agents.status).toBe(200);
    expect(agents.json.agents).toEqual([]);
    expect(agents.json.notices.map((n: { message: string }) => n.message).join(' ')).toMatch(transport === 'https' ? /TLS certificate|credential/ : /known host key/);
    const r = await stack.cli(['-p', 'read', '--output-format', 'json', '--no-apply', '--model', `scripted:${stack.script('noop', [{ text: 'nothing' }])}`], { env: { LEMNISCATE_PROJECT: name } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(transport === 'https' ? /TLS certificate is not trusted|refused the project's credential/ : /known host key/);
    expect(r.stderr).not.toContain(PASSWORD);
  });

  it("with the administrator's access, lists the repository's agents at the default ref and runs them", async () => {
    const { id, name } = projects[transport];
    const set = await stack.api(stack.tokens.admin, 'POST', `/projects/${id}/repository/access`, access(transport));
    expect(set.status).toBe(200);
    expect(JSON.stringify(set.json)).not.toContain(PASSWORD);

    const agents = await stack.api(stack.tokens.developer, 'GET', `/projects/${id}/agents`);
    expect(agents.status).toBe(200);
    expect(agents.json.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(agents.json.agents.map((a: { name: string; location: string }) => [a.name, a.location])).toEqual([
      ['capped', '.lemniscate/agents/capped.md'],
      ['helper', '.lemniscate/agents/helper.md'],
    ]);

    // The repository's agent runs: its own budget (4 actions) is what stops the session.
    const reads = stack.script(`reads-${transport}`, [{ repeat: 20, tool_calls: [{ name: 'Read', arguments: { path: 'missing-{{i}}.txt' } }] }, { text: 'Stopped at the limit.' }]);
    const r = await stack.cli(['-p', 'read', '--agent', 'capped', '--model', `scripted:${reads}`, '--output-format', 'json', '--no-apply'], { env: { LEMNISCATE_PROJECT: name } });
    expect(r.code).toBe(3);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(out).toMatchObject({ stop_reason: 'limit_actions', actions_used: 4, agent: 'capped', project: name });
    const audit = await stack.api(stack.tokens.admin, 'GET', `/audit?projectId=${id}&kind=session.configured`);
    const configured = audit.json.find((e: { sessionId: string }) => e.sessionId === out.session_id);
    expect(configured.payload).toMatchObject({ agent: 'capped', agentLocation: '.lemniscate/agents/capped.md' });

    // It reads the fetched working copy, and delegates to the repository's subagent (the project's
    // policy lets Task run without asking, so the headless session may delegate).
    expect((await stack.api(stack.tokens.admin, 'POST', `/projects/${id}/policy`, { document: { version: 1, tools: { sensitive: [] } } })).status).toBe(201);
    const delegate = stack.script(`delegate-${transport}`, [
      { tool_calls: [{ name: 'Read', arguments: { path: 'README.md' } }] },
      { tool_calls: [{ name: 'Search', arguments: { pattern: 'url project' } }] },
      { tool_calls: [{ name: 'Task', arguments: { agent: 'helper', instruction: 'read the readme' } }] },
      { text: 'Done.' },
    ]);
    const d = await stack.cli(['-p', 'look', '--model', `scripted:${delegate}`, '--output-format', 'stream-json', '--no-apply'], { env: { LEMNISCATE_PROJECT: name } });
    const events = d.stdout
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });
    const sessionId = events.find((e) => e.sessionId)?.sessionId as string;
    const calls = await stack.api(stack.tokens.developer, 'GET', `/sessions/${sessionId}/tool-calls`);
    const result = (tool: string) => calls.json.find((c: { name: string }) => c.name === tool)?.result;
    expect(result('Read')).toMatchObject({ ok: true, summary: 'Read README.md: lines 1–1 of 1.' });
    expect(result('Search')).toMatchObject({ ok: true, summary: expect.stringMatching(/^Search: 1 matches in \d+ files/) });
    expect(events.find((e) => e.type === 'subagent_started')).toMatchObject({ agent: 'helper' });
    expect(events.find((e) => e.type === 'subagent_finished')).toMatchObject({ report: 'finished' });
    expect(d.stdout).not.toContain(PASSWORD);
  });
});

it('the https server saw the credential on its requests, never in a URL', () => {
  expect(https.requests.some((r) => r.authorized)).toBe(true);
  expect(https.requests.every((r) => !r.path.includes(PASSWORD))).toBe(true);
});
