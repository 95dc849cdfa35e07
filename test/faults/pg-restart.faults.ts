import { containersOf, startStack, type Stack } from '../e2e/harness';
import { endRuns, nthProposal, startRun } from './run';

/**
 * PostgreSQL goes away for 0.2–0.6 s in the middle of real sessions: the real CLI, the gateway on
 * PostgreSQL (reached through a proxy that resets every connection and refuses new ones, as a
 * restart does, without restarting the server other suites share), the exec-host and Docker.
 * The sessions must finish as if nothing happened: completed, exit 0, every call shown audited,
 * the chain intact, no SQL anywhere a person looks, no sandbox left behind.
 */
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ database: 'postgres', proxy: true });
  await stack.publishPolicy({ version: 1, commands: { free: ['echo', 'sleep'] } });
}, 180_000);

afterAll(async () => {
  endRuns();
  await stack?.stop();
});

const SQL = /Failed query|insert into|update "|select "|params:|\$1|SQLSTATE|ECONNRESET|ECONNREFUSED|Connection terminated/i;
const CALLS = 24;

function proxy() {
  if (stack.database.kind !== 'postgres' || !stack.database.proxy) throw new Error('the stack runs on PGlite');
  return stack.database.proxy;
}

/** Runs one headless session in stream-json, cutting the database when the given proposals appear. */
async function sessionWithCuts(name: string, cutsAt: Map<number, number>) {
  const script = stack.script(name, [{ repeat: CALLS, tool_calls: [{ name: 'Bash', arguments: { command: `echo ${name} {{i}}` } }] }, { text: `${name}: all ${CALLS} echoed.` }]);
  const run = startRun(stack, ['-p', `echo ${CALLS} times`, '--model', `scripted:${script}`]);
  const cuts = [...cutsAt].map(([n, ms]) => run.until(nthProposal(run, n), `call ${n}`).then(() => proxy().cut(ms)));
  const code = await run.exited;
  await Promise.all(cuts);
  const { events, stderr, stdout: raw } = run;
  return { code, events, stderr, raw, result: events.at(-1) as Record<string, any> };
}

async function auditedCalls(sessionId: string): Promise<string[]> {
  const r = await stack.api(stack.tokens.security, 'GET', `/audit?sessionId=${sessionId}&kind=tool_call.proposed&order=asc&limit=1000`);
  expect(r.status).toBe(200);
  return r.json.map((e: { payload: { callId: string } }) => e.payload.callId);
}

describe('a PostgreSQL outage of 0.2–0.6 s during real sessions', () => {
  // Generated over the range: one cut each of 200, 400 and 600 ms, at three points of a session, and
  // all three in one session; the sessions run side by side so cuts land on each other's writes too.
  const plans: [string, Map<number, number>][] = [
    ['early', new Map([[3, 200]])],
    ['middle', new Map([[12, 400]])],
    ['late', new Map([[21, 600]])],
    [
      'thrice',
      new Map([
        [4, 200],
        [11, 400],
        [18, 600],
      ]),
    ],
  ];

  it(`${plans.length} concurrent sessions of ${CALLS} calls complete with exit 0, every call shown audited, the chain intact, nothing left behind`, async () => {
    const resetBefore = proxy().stats.reset;
    const runs = await Promise.all(plans.map(([name, cuts]) => sessionWithCuts(name, cuts)));
    expect(proxy().stats.reset).toBeGreaterThan(resetBefore);
    for (const [i, run] of runs.entries()) {
      const [name] = plans[i]!;
      // What the developer saw: no SQL, no driver error, on stdout or stderr.
      expect({ name, sql: SQL.exec(run.raw + run.stderr)?.[0] ?? null }).toEqual({ name, sql: null });
      expect({ name, code: run.code, stderr: run.code === 0 ? '' : run.stderr, last: run.code === 0 ? null : run.events.slice(-3) }).toEqual({ name, code: 0, stderr: '', last: null });
      expect(run.result).toMatchObject({ type: 'result', status: 'completed', stop_reason: null, exit_code: 0, actions_used: CALLS, summary: `${name}: all ${CALLS} echoed.` });
      expect(run.result.tool_calls).toHaveLength(CALLS);
      for (const call of run.result.tool_calls as { decision: { effect: string }; result: { exit_code: number; stdout: string } }[]) {
        expect(call.decision).toMatchObject({ effect: 'allow' });
        expect(call.result.exit_code).toBe(0);
      }
      const sessionId = run.result.session_id as string;
      const session = await stack.api(stack.tokens.developer, 'GET', `/sessions/${sessionId}`);
      expect(session.json).toMatchObject({ status: 'completed', stopReason: null });
      expect(JSON.stringify(session.json)).not.toMatch(SQL);
      // An entry shown is an entry audited: each proposal the stream showed, once, in the audit.
      const shown = run.events.filter((e) => e.type === 'tool_call_proposed').map((e) => e.callId as string);
      const audited = await auditedCalls(sessionId);
      expect(new Set(shown).size).toBe(CALLS);
      expect(audited).toHaveLength(CALLS);
      expect([...new Set(shown)].sort()).toEqual([...audited].sort());
      expect(containersOf(sessionId)).toEqual([]);
    }
    const verify = await stack.api(stack.tokens.security, 'GET', '/audit/verify');
    expect(verify.json).toMatchObject({ ok: true });
    // The gateway said what it was doing, in its log, not to the user.
    expect(stack.logs()).toMatch(/the database is unreachable; retrying/);
  });

  // 35 s is longer than one retry window (30 s), but a write's attempts themselves take time, so
  // the session may either ride it out or end failed; either way the CLI, the API and the audit must
  // agree, nobody is shown SQL, and nothing is left running or behind.
  it('away for 35 s: the session ends one way, told the same by the CLI, the API and the audit, with no SQL', async () => {
    const script = stack.script('long', [{ repeat: CALLS, tool_calls: [{ name: 'Bash', arguments: { command: 'echo long {{i}}' } }] }, { text: 'never reached' }]);
    const run = startRun(stack, ['-p', 'outlast the database', '--model', `scripted:${script}`]);
    const outage = run.until(nthProposal(run, 3), 'the third call').then(() => proxy().cut(35_000));
    const code = await run.exited;
    await outage;
    const { events, stderr, stdout: raw } = run;
    const leak = SQL.exec(raw + stderr);
    expect(leak ? (raw + stderr).slice(Math.max(0, leak.index - 300), leak.index + 100) : null).toBeNull();
    const result = events.at(-1) as Record<string, any>;
    expect(result.type).toBe('result');
    expect(code).toBe(result.exit_code);
    const sessionId = result.session_id as string;
    const session = await stack.api(stack.tokens.developer, 'GET', `/sessions/${sessionId}`);
    expect(JSON.stringify(session.json)).not.toMatch(SQL);
    if (result.status === 'completed') {
      expect({ code, session: session.json.status, actions: result.actions_used }).toEqual({ code: 0, session: 'completed', actions: CALLS });
    } else {
      expect({ code, status: result.status, session: session.json.status, stopReason: session.json.stopReason }).toEqual({ code: 1, status: 'failed', session: 'failed', stopReason: 'crash' });
      expect(events.find((e) => e.type === 'session_failed')?.message).toMatch(/database/);
    }
    console.log(`35 s outage: the session ended ${result.status} (exit ${code}) after ${result.actions_used} calls`);
    const shown = events.filter((e) => e.type === 'tool_call_proposed').map((e) => e.callId as string);
    expect([...(await auditedCalls(sessionId))].sort()).toEqual([...new Set(shown)].sort());
    expect(containersOf(sessionId)).toEqual([]);
    expect((await stack.api(stack.tokens.security, 'GET', '/audit/verify')).json).toMatchObject({ ok: true });
  }, 240_000);

  it('no session is left running for the orphan sweep to misreport', async () => {
    const r = await stack.api(stack.tokens.admin, 'GET', '/sessions?status=running');
    expect(r.status).toBe(200);
    expect(r.json).toEqual([]);
  });
});
