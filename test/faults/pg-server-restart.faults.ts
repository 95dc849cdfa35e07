import { spawn, spawnSync } from 'node:child_process';
import { containersOf, startStack, type Stack } from '../e2e/harness';
import { endRuns, nthProposal, startRun } from './run';

/**
 * The real thing: the PostgreSQL server the gateway uses is restarted (`pg_ctlcluster … restart`,
 * a fast shutdown that ends every connection, then a start) in the middle of a real session — the
 * real CLI, the gateway on PostgreSQL with no proxy, the exec-host and Docker. The fault tier runs
 * alone (no other suite shares the server then), so the machine's own cluster is restarted.
 * The session must finish as if nothing happened.
 */
let stack: Stack;

const SQL = /Failed query|insert into|update "|select "|params:|\$1|SQLSTATE|ECONNRESET|ECONNREFUSED|Connection terminated/i;
const CALLS = 30;

/** The local cluster serving the test server's port, as `pg_lsclusters` names it. */
function cluster(url: string): [string, string] {
  const port = new URL(url).port || '5432';
  const r = spawnSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' });
  const line =
    r.status === 0
      ? r.stdout
          .split('\n')
          .map((l) => l.trim().split(/\s+/))
          .find((f) => f[2] === port && f[3] === 'online')
      : undefined;
  if (!line)
    throw new Error(
      `No local PostgreSQL cluster is online on port ${port} (pg_lsclusters): this fault restarts the server the tests use, so it needs the machine's own cluster, as npm test sets it up.`,
    );
  return [line[0]!, line[1]!];
}

function restart(version: string, name: string): Promise<{ code: number | null; ms: number; stderr: string }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn('pg_ctlcluster', [version, name, 'restart'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, ms: Date.now() - started, stderr }));
  });
}

beforeAll(async () => {
  stack = await startStack({ database: 'postgres' });
  await stack.publishPolicy({ version: 1, commands: { free: ['echo', 'sleep'] } });
}, 180_000);

afterAll(async () => {
  endRuns();
  await stack?.stop();
});

it(`a session of ${CALLS} calls across a real restart of its PostgreSQL server completes: exit 0, every call shown audited, the chain intact, no SQL shown, nothing left`, async () => {
  if (stack.database.kind !== 'postgres') throw new Error('the stack runs on PGlite');
  const [version, name] = cluster(stack.database.url);
  const script = stack.script('restart', [
    { repeat: CALLS, tool_calls: [{ name: 'Bash', arguments: { command: 'echo restart {{i}} && sleep 0.1' } }] },
    { text: `all ${CALLS} echoed across the restart.` },
  ]);
  const run = startRun(stack, ['-p', `echo ${CALLS} times`, '--model', `scripted:${script}`]);
  const restarted = run.until(nthProposal(run, 8), 'the eighth call').then(() => restart(version, name));
  const code = await run.exited;
  const restart_ = await restarted;
  expect(restart_).toMatchObject({ code: 0 });
  console.log(`PostgreSQL ${version}/${name} restarted in ${restart_.ms} ms during the session`);
  const { events, stdout: raw, stderr } = run;

  const leak = SQL.exec(raw + stderr);
  expect(leak ? (raw + stderr).slice(Math.max(0, leak.index - 300), leak.index + 100) : null).toBeNull();
  const result = events.at(-1) as Record<string, any>;
  expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' });
  expect(result).toMatchObject({ type: 'result', status: 'completed', stop_reason: null, exit_code: 0, actions_used: CALLS, summary: `all ${CALLS} echoed across the restart.` });
  for (const call of result.tool_calls as { decision: { effect: string }; result: { exit_code: number } }[]) {
    expect(call.decision).toMatchObject({ effect: 'allow' });
    expect(call.result.exit_code).toBe(0);
  }
  const sessionId = result.session_id as string;
  const session = await stack.api(stack.tokens.developer, 'GET', `/sessions/${sessionId}`);
  expect(session.json).toMatchObject({ status: 'completed', stopReason: null });
  // An entry shown is an entry audited, once.
  const shown = events.filter((e) => e.type === 'tool_call_proposed').map((e) => e.callId as string);
  const audit = await stack.api(stack.tokens.security, 'GET', `/audit?sessionId=${sessionId}&kind=tool_call.proposed&order=asc&limit=1000`);
  expect(audit.status).toBe(200);
  const audited = audit.json.map((e: { payload: { callId: string } }) => e.payload.callId) as string[];
  expect(new Set(shown).size).toBe(CALLS);
  expect([...audited].sort()).toEqual([...new Set(shown)].sort());
  expect((await stack.api(stack.tokens.security, 'GET', '/audit/verify')).json).toMatchObject({ ok: true });
  expect(containersOf(sessionId)).toEqual([]);
  // The gateway saw the outage (and said so in its log, not to the developer).
  expect(stack.logs()).toMatch(/the database is unreachable; retrying/);
  const running = await stack.api(stack.tokens.admin, 'GET', '/sessions?status=running');
  expect(running.json).toEqual([]);
}, 240_000);
