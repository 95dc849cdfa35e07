// Compiled to bench/sessions/dist/bench/sessions/. Sessions under load (bench/README.md, "Sessions"):
// the real gateway and exec-host as processes (test/e2e/harness.ts), 40 `lemni -p` runs at once of
// 50 scripted tool calls each, on PGlite and on PostgreSQL. Prints calls per second, the p95 time of
// one call, the gateway's memory, and PASS only when every session ended completed with exit 0 and
// the audit holds exactly one `tool_call.proposed` entry per call each session showed.
import { readFileSync } from 'node:fs';
import { containersOf, startStack, type Stack } from '../../test/e2e/harness';

const SESSIONS = Number(process.env['BENCH_SESSIONS'] ?? 40);
const CALLS = Number(process.env['BENCH_CALLS'] ?? 50);
const json = process.argv.includes('--json');
const kinds = (['pglite', 'postgres'] as const).filter((k) => !process.argv.some((a) => a === 'pglite' || a === 'postgres') || process.argv.includes(k));

/** The fields of the CLI's final `result` line (DESIGN.md, the CLI contract) this benchmark reads. */
interface CliResult {
  session_id?: string;
  status?: string;
  stop_reason?: string | null;
  exit_code?: number;
  tool_calls?: unknown[];
}

interface SessionRun {
  code: number | null;
  result: CliResult | undefined;
  shown: string[];
  /** Milliseconds between one proposal and the next, as the developer's terminal saw them. */
  intervals: number[];
  stderr: string;
}

function runSession(stack: Stack, n: number): Promise<SessionRun> {
  const script = stack.script(`bench-${n}`, [{ repeat: CALLS, tool_calls: [{ name: 'Bash', arguments: { command: `echo session ${n} call {{i}}` } }] }, { text: `Session ${n}: ${CALLS} calls.` }]);
  const child = stack.spawnCli(['-p', `bench session ${n}`, '--model', `scripted:${script}`, '--output-format', 'stream-json', '--no-apply']);
  child.stdin!.end();
  const run: SessionRun = { code: null, result: undefined, shown: [], intervals: [], stderr: '' };
  let buffered = '';
  let last = 0;
  child.stderr!.on('data', (d: Buffer) => (run.stderr += d.toString()));
  child.stdout!.on('data', (d: Buffer) => {
    buffered += d.toString();
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!line.trim()) continue;
      const event = JSON.parse(line) as { type: string; callId?: string };
      const now = performance.now();
      if (event.type === 'session_started') last = now;
      if (event.type === 'tool_call_proposed') {
        if (last) run.intervals.push(now - last);
        last = now;
        run.shown.push(event.callId ?? '');
      }
      if (event.type === 'result') run.result = event as CliResult;
    }
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ ...run, code })));
}

function rssMb(pid: number | undefined): number {
  if (!pid) return 0;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN;
}

async function bench(kind: 'pglite' | 'postgres') {
  const stack = await startStack({ database: kind });
  try {
    await stack.publishPolicy({ version: 1, commands: { free: ['echo'] } });
    const rssBefore = rssMb(stack.gatewayPid());
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMb(stack.gatewayPid()))), 250);
    const started = performance.now();
    const runs = await Promise.all(Array.from({ length: SESSIONS }, (_, n) => runSession(stack, n)));
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    const rssAfter = rssMb(stack.gatewayPid());

    // Every session as expected, and its audit equal to what it showed.
    const broken: string[] = [];
    let audited = 0;
    let calls = 0;
    for (const [n, run] of runs.entries()) {
      const r = run.result;
      const id = r?.session_id;
      calls += r?.tool_calls?.length ?? 0;
      const problems: string[] = [];
      if (run.code !== 0) problems.push(`exit ${run.code}`);
      if (!r || r.status !== 'completed' || r.exit_code !== 0) problems.push(`status ${r?.status}/${r?.stop_reason}`);
      if (r?.tool_calls?.length !== CALLS) problems.push(`${r?.tool_calls?.length ?? 0} tool calls`);
      if (new Set(run.shown).size !== CALLS) problems.push(`${new Set(run.shown).size} proposals shown`);
      if (id) {
        const a = await stack.api(stack.tokens.security, 'GET', `/audit?sessionId=${id}&kind=tool_call.proposed&order=asc&limit=1000`);
        const ids = (a.json as { payload: { callId: string } }[]).map((e) => e.payload.callId);
        audited += ids.length;
        if (ids.length !== run.shown.length || [...ids].sort().join() !== [...run.shown].sort().join()) problems.push(`${ids.length} audited for ${run.shown.length} shown`);
        if (containersOf(id).length) problems.push('sandbox left behind');
      }
      if (problems.length) broken.push(`session ${n}${id ? ` (${id})` : ''}: ${problems.join(', ')}${run.stderr ? ` — ${run.stderr.trim().split('\n').at(-1)}` : ''}`);
    }
    const verify = await stack.api(stack.tokens.security, 'GET', '/audit/verify');
    if (!verify.json?.ok) broken.push(`audit chain: ${JSON.stringify(verify.json)}`);
    const intervals = runs.flatMap((r) => r.intervals);
    return {
      database: kind,
      sessions: SESSIONS,
      callsPerSession: CALLS,
      calls,
      audited,
      seconds: Number(seconds.toFixed(1)),
      callsPerSecond: Number((calls / seconds).toFixed(1)),
      callMsP50: Math.round(percentile(intervals, 50)),
      callMsP95: Math.round(percentile(intervals, 95)),
      gatewayRssMb: { before: Math.round(rssBefore), peak: Math.round(rssPeak), after: Math.round(rssAfter) },
      broken,
      pass: broken.length === 0 && audited === calls && calls === SESSIONS * CALLS,
    };
  } finally {
    await stack.stop();
  }
}

async function main() {
  const results = [];
  for (const kind of kinds) results.push(await bench(kind));
  if (json) {
    console.log(JSON.stringify({ node: process.version, results }));
  } else {
    console.log(`${SESSIONS} concurrent sessions × ${CALLS} tool calls, real CLI → gateway → exec-host → Docker (${process.version})`);
    for (const r of results) {
      console.log(
        `  ${r.database.padEnd(8)}  ${r.calls} calls in ${r.seconds} s: ${r.callsPerSecond} calls/s   per call p50 ${r.callMsP50} ms  p95 ${r.callMsP95} ms   gateway RSS ${r.gatewayRssMb.before} → peak ${r.gatewayRssMb.peak} MB   audit entries ${r.audited} = calls ${r.calls}: ${r.pass ? 'PASS' : 'FAIL'}`,
      );
      for (const b of r.broken) console.log(`    broken: ${b}`);
    }
  }
  process.exitCode = results.every((r) => r.pass) ? 0 : 1;
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
