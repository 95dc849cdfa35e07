import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startMirrors, type Mirrors } from '../support/mirrors';
import { ROOT, startStack, type Stack } from './harness';

/**
 * Project environments end to end (issue 15): a Node project with several dozen dependencies from
 * its lock file and a Python project using pytest and six, each prepared from its devcontainer with
 * real package mirrors on this machine (Verdaccio forwarding to the npm registry, a simple index of
 * wheels), then `lemni -p` with the scripted model runs the project's own tests in the network-less
 * sandbox, and the patch holds only the agent's change.
 */
jest.setTimeout(900_000);

let stack: Stack;
let mirrors: Mirrors;
let image: string;
const projects: Record<string, { id: string; repo: string }> = {};

const git = (cwd: string, ...args: string[]) => {
  const r = spawnSync('git', ['-c', 'user.email=dev@example.test', '-c', 'user.name=Dev', ...args], { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};

/** Copies a fixture into a new repository with its placeholders replaced, and makes it a project the developer belongs to. */
async function project(name: string, fixture: string): Promise<{ id: string; repo: string }> {
  const repo = mkdtempSync(join(tmpdir(), `lemni-env-${name}-`));
  cpSync(join(ROOT, 'test/fixtures/environments', fixture), repo, { recursive: true });
  const replace = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const p = join(dir, entry);
      if (statSync(p).isDirectory()) replace(p);
      else
        writeFileSync(
          p,
          readFileSync(p, 'utf8')
            .replaceAll('__NPM_MIRROR__', mirrors.npm)
            .replaceAll('__PYPI_MIRROR__', mirrors.pypi)
            .replaceAll('__MIRROR_HOST__', mirrors.host)
            .replaceAll('__SANDBOX_IMAGE__', image),
        );
    }
  };
  replace(repo);
  git(repo, 'init', '-q', '-b', 'main');
  git(repo, 'add', '-A');
  git(repo, 'commit', '-q', '-m', 'initial');
  const created = await stack.api(stack.tokens.admin, 'POST', '/projects', { name, repositorySource: repo, defaultRef: 'main' });
  expect(created.status).toBe(201);
  const users = await stack.api(stack.tokens.admin, 'GET', '/users');
  const developer = (users.json as { id: string; email: string }[]).find((u) => u.email === 'developer@e2e.invalid')!;
  expect((await stack.api(stack.tokens.admin, 'POST', `/projects/${created.json.id}/members`, { userId: developer.id })).status).toBe(201);
  const policy = await stack.api(stack.tokens.admin, 'POST', `/projects/${created.json.id}/policy`, {
    document: { version: 1, commands: { free: ['npm test', '.venv/bin/pytest', 'node', 'python3', 'cat', 'ls'] }, environment: { mirrors: [mirrors.npm, mirrors.pypi] } },
    comment: 'environment mirrors',
  });
  expect(policy.status).toBe(201);
  return { id: created.json.id as string, repo };
}

const env = (name: string) => ({ env: { LEMNISCATE_PROJECT: name, LEMNISCATE_ENV_POLL_MS: '500' } });
const last = (out: string) => JSON.parse(out.trim().split('\n').at(-1)!);

/** A headless run whose one write is approved from elsewhere (as a person would in the console). */
async function runApproved(name: string, turns: unknown[]): Promise<{ code: unknown; out: any }> {
  const child = stack.spawnCli(['-p', 'run the tests and note it', '--model', `scripted:${stack.script(name, turns)}`, '--output-format', 'json', '--no-apply', '--wait-for-approvals'], env(name));
  child.stdin!.end();
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const closed = new Promise((r) => child.on('close', r));
  let done = false;
  void closed.then(() => (done = true));
  while (!done) {
    await new Promise((r) => setTimeout(r, 300));
    const pending = await stack.api(stack.tokens.developer, 'GET', '/approvals?state=pending');
    for (const a of pending.json ?? []) await stack.api(stack.tokens.developer, 'POST', `/approvals/${a.id}/approve`, {});
  }
  const code = await closed;
  if (code !== 0) throw new Error(`lemni -p exited ${String(code)}:\n${stderr}\n${stdout}`);
  return { code, out: last(stdout) };
}

beforeAll(async () => {
  mirrors = await startMirrors();
  stack = await startStack();
  image = spawnSync('docker', ['image', 'inspect', '--format', '{{.Id}}', 'lemniscate/sandbox:current'], { encoding: 'utf8' }).stdout.trim();
  projects.node = await project('node-env', 'node-project');
  projects.python = await project('py-env', 'python-project');
}, 600_000);

afterAll(async () => {
  await stack?.stop();
  await mirrors?.close();
  spawnSync('sh', ['-c', 'docker images -q --filter label=lemniscate.environment | xargs -r docker rmi -f >/dev/null 2>&1 || true']);
});

describe('a Node project with real dependencies', () => {
  let firstJob: string;

  it('a session before preparation is refused with a sentence, and starts the preparation', async () => {
    const r = await stack.cli(['-p', 'run the tests', '--model', `scripted:${stack.script('early', [{ text: 'x' }])}`, '--output-format', 'json', '--no-apply'], env('node-env'));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/environment/i);
    expect(r.stderr).toMatch(/lemni env logs --project node-env/);
  });

  it('is prepared from its devcontainer through the npm mirror: `lemni env prepare --wait` exits 0', async () => {
    const r = await stack.cli(['env', 'prepare', '--project', 'node-env', '--wait'], env('node-env'));
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(r.stdout).toMatch(/npm ci/);
    expect(r.stdout).toMatch(/is ready/);
    const status = await stack.api(stack.tokens.developer, 'GET', `/projects/${projects.node!.id}/environment`);
    expect(status.json).toMatchObject({ state: 'ready', devcontainer: { warnings: [expect.stringContaining('"forwardPorts" is not supported')] } });
    firstJob = status.json.job.jobId;
    expect(mirrors.requests.npm.some((u) => u.includes('express'))).toBe(true);
  });

  it("runs the project's own tests in the sandbox, and the patch holds only the agent's change", async () => {
    const { out } = await runApproved('node-env', [
      { tool_calls: [{ name: 'Bash', arguments: { command: 'npm test' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'ls node_modules | wc -l' } }] },
      {
        tool_calls: [
          {
            name: 'Bash',
            arguments: {
              command: `node -e "const s=require('net').connect({host:'${mirrors.host}',port:${new URL(mirrors.npm).port}});s.setTimeout(2000,()=>{console.log('timeout');process.exit(0)});s.on('connect',()=>console.log('connected'));s.on('error',e=>console.log(e.code))"`,
            },
          },
        ],
      },
      { tool_calls: [{ name: 'Write', arguments: { path: 'NOTES.md', content: 'The tests pass.\n' } }] },
      { text: 'The tests pass.' },
    ]);
    const [test, count, probe] = out.tool_calls.map((c: { result: { exit_code: number; stdout: string } }) => c.result);
    expect({ exit: test.exit_code, out: test.stdout }).toEqual({ exit: 0, out: expect.stringMatching(/# pass 1/) });
    expect(Number(count.stdout.trim())).toBeGreaterThan(50);
    // The agent's sandbox cannot reach the mirror.
    expect(probe.stdout.trim()).toMatch(/^(ENETUNREACH|EHOSTUNREACH|timeout)$/);
    expect(out.patch).toContain('+++ b/NOTES.md');
    expect(out.patch).not.toMatch(/node_modules|package-lock/);
    expect(out.patch.match(/^diff --git/gm)).toHaveLength(1);
  });

  it('a second session on the unchanged project starts at once, without preparing again', async () => {
    const before = mirrors.requests.npm.length;
    const r = await stack.cli(
      ['-p', 'test', '--model', `scripted:${stack.script('again', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'npm test' } }] }, { text: 'ok' }])}`, '--output-format', 'json', '--no-apply'],
      env('node-env'),
    );
    expect(r.code).toBe(0);
    expect(last(r.stdout).tool_calls[0].result.exit_code).toBe(0);
    const status = await stack.api(stack.tokens.developer, 'GET', `/projects/${projects.node!.id}/environment`);
    expect(status.json).toMatchObject({ state: 'ready', job: { jobId: firstJob } });
    expect(mirrors.requests.npm.length).toBe(before);
  });

  it('a changed lock file prepares again, once', async () => {
    const lock = join(projects.node!.repo, 'package-lock.json');
    writeFileSync(lock, `${readFileSync(lock, 'utf8').trimEnd()}\n\n`);
    git(projects.node!.repo, 'commit', '-q', '-am', 'lock file touched');
    const status = await stack.api(stack.tokens.developer, 'GET', `/projects/${projects.node!.id}/environment`);
    expect(status.json.state).toBe('not_prepared');
    const [a, b] = await Promise.all([
      stack.cli(['env', 'prepare', '--project', 'node-env', '--wait'], env('node-env')),
      stack.cli(['env', 'prepare', '--project', 'node-env', '--wait'], env('node-env')),
    ]);
    expect([a.code, b.code]).toEqual([0, 0]);
    const after = await stack.api(stack.tokens.developer, 'GET', `/projects/${projects.node!.id}/environment`);
    expect(after.json.state).toBe('ready');
    expect(after.json.job.jobId).not.toBe(firstJob);
    const audit = await stack.api(stack.tokens.admin, 'GET', `/audit?projectId=${projects.node!.id}&kind=environment.prepared`);
    expect(audit.json).toHaveLength(2);
  });

  it('a broken set-up fails the preparation with its log; a session gets a sentence, not a crash', async () => {
    const file = join(projects.node!.repo, '.devcontainer/devcontainer.json');
    writeFileSync(file, readFileSync(file, 'utf8').replace('npm ci --no-audit --no-fund', 'npm ci --no-audit --no-fund && npm install left-pad-does-not-exist-anywhere'));
    git(projects.node!.repo, 'commit', '-q', '-am', 'broken set-up');
    const prep = await stack.cli(['env', 'prepare', '--project', 'node-env', '--wait'], env('node-env'));
    expect(prep.code).toBe(1);
    expect(`${prep.stdout}${prep.stderr}`).toMatch(/failed with exit code/);
    const logs = await stack.cli(['env', 'logs', '--project', 'node-env'], env('node-env'));
    expect(logs.stdout).toMatch(/left-pad-does-not-exist-anywhere/);
    const r = await stack.cli(['-p', 'x', '--model', `scripted:${stack.script('broken', [{ text: 'x' }])}`, '--output-format', 'json', '--no-apply'], env('node-env'));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/failed/);
    expect(r.stderr).not.toMatch(/at .*\.(ts|js):\d+/);
  });
});

describe('a Python project using pytest and six', () => {
  it('is prepared through the Python index, and pytest passes in the sandbox with only the change in the patch', async () => {
    const prep = await stack.cli(['env', 'prepare', '--project', 'py-env', '--wait'], env('py-env'));
    expect({ code: prep.code, out: prep.code === 0 ? '' : prep.stdout + prep.stderr }).toEqual({ code: 0, out: '' });
    expect(mirrors.requests.pypi.some((p) => p.includes('pytest'))).toBe(true);
    const { out } = await runApproved('py-env', [
      { tool_calls: [{ name: 'Bash', arguments: { command: '.venv/bin/pytest -q' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: 'python3 -c "import urllib.request as u; u.urlopen(\'' + mirrors.pypi + '\', timeout=3)" 2>&1 | tail -1' } }] },
      { tool_calls: [{ name: 'Write', arguments: { path: 'calc/NOTES.md', content: 'pytest passes.\n' } }] },
      { text: 'pytest passes.' },
    ]);
    const [pytest, probe] = out.tool_calls.map((c: { result: { exit_code: number; stdout: string } }) => c.result);
    expect({ exit: pytest.exit_code, out: pytest.stdout }).toEqual({ exit: 0, out: expect.stringMatching(/2 passed/) });
    expect(probe.stdout).toMatch(/URLError|unreachable|timed out/i);
    expect(out.patch.match(/^diff --git/gm)).toHaveLength(1);
    expect(out.patch).toContain('+++ b/calc/NOTES.md');
    expect(out.patch).not.toMatch(/\.venv|__pycache__|pytest_cache/);
  });
});
