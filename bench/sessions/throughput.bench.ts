// Compiled to bench/sessions/dist/bench/sessions/. Throughput (bench/README.md, "Sessions"): the real
// gateway and exec-host as processes (test/e2e/harness.ts), Docker with the sandbox runtime, and many
// headless sessions at once, each a scripted model proposing a mix of tool calls: half Bash `echo`, a
// quarter Read, a quarter Write. Writes wait for a person (`--wait-for-approvals`) and a reviewer
// approves each one as soon as it is announced, through the gateway's approvals API, as a person in
// the console would; so every Write is applied and ends in the session's patch.
//
// The sessions are driven through the gateway's API by this one process, with the CLI's own code for
// a headless run (`runHeadless`: start, follow the live events over the WebSocket, read the ending),
// so the figures are the platform's rather than a hundred Node start-ups; `--cli` also runs the
// lowest concurrency with one `lemni -p` process per session, as measured from outside before.
//
// Per run it prints calls per second (first session started → last ended), the p95 time of one call
// (from its proposal to the next line after its result, by tool), the CPU time per call of every
// process serving the run, and PASS only when every session completed with exit 0 and all its calls,
// the audit holds exactly the proposals each session showed, every Write is in its session's patch,
// no sandbox is left and the audit chain verifies.
import * as http from 'node:http';
import { Client } from 'pg';
import { runHeadless } from '../../apps/cli/src/session/headless';
import { gatewaySessionApi } from '../../apps/cli/src/session/session-api';
import { GatewayClient } from '../../apps/cli/src/gateway/gateway-client';
import { containersOf, startStack, type Stack } from '../../test/e2e/harness';
import { callCycles, collectCli, percentile, pidsNamed, processCpuMs, shimContainer, treeCpuMs, type CliRun, type TimedEvent } from './common';

type Tool = 'Bash' | 'Read' | 'Write';
type Mix = 'mixed' | Tool;
type Kind = 'pglite' | 'postgres';

const LEVELS = (process.env['BENCH_SESSIONS'] ?? '40,100').split(',').map(Number);
const CALLS = Number(process.env['BENCH_CALLS'] ?? 50);
const BY_TOOL_SESSIONS = Number(process.env['BENCH_BY_TOOL_SESSIONS'] ?? LEVELS[0] ?? 40);
// One mix only (`BENCH_MIX=Write`): the levels run with it and nothing else (profiling one tool's path).
const ONLY = process.env['BENCH_MIX'] as Mix | undefined;
if (ONLY !== undefined && !['mixed', 'Bash', 'Read', 'Write'].includes(ONLY)) throw new Error(`BENCH_MIX must be mixed, Bash, Read or Write, not ${ONLY}.`);
const json = process.argv.includes('--json');
const withCli = process.argv.includes('--cli');
const byTool = !process.argv.includes('--no-by-tool');
const kinds = (['pglite', 'postgres'] as const).filter((k) => !process.argv.some((a) => a === 'pglite' || a === 'postgres') || process.argv.includes(k));
/** Measured from outside on this machine before this work (bench/README.md), at 20–40 sessions. */
const TODAY: Record<Kind, number> = { pglite: 16, postgres: 25 };
const TARGET_FACTOR = 3;
const POLICY = { version: 1, commands: { free: ['echo'] }, execution: { sessionMaxActions: 10_000 } };
const READ_PATHS = ['src/calc.js', 'test/calc.test.js', 'package.json'];

function toolOf(mix: Mix, i: number): Tool {
  return mix === 'mixed' ? (['Bash', 'Read', 'Bash', 'Write'] as const)[i % 4]! : mix;
}

function scriptTurns(n: number, mix: Mix, calls: number): unknown[] {
  const turns: unknown[] = [];
  for (let i = 0; i < calls; i++) {
    const tool = toolOf(mix, i);
    const args =
      tool === 'Bash'
        ? { command: `echo session ${n} call ${i}` }
        : tool === 'Read'
          ? { path: READ_PATHS[i % READ_PATHS.length] }
          : { path: `notes/s${n}/c${i}.txt`, content: `session ${n} call ${i}\n` };
    turns.push({ tool_calls: [{ name: tool, arguments: args }] });
  }
  turns.push({ text: `Session ${n}: ${calls} calls.` });
  return turns;
}

interface ResultLine {
  session_id?: string;
  status?: string;
  stop_reason?: string | null;
  exit_code?: number;
  patch?: string;
  tool_calls?: unknown[];
  refused_changes?: unknown[];
}

interface SessionRun extends CliRun {
  approvalFailures: string[];
}

/** A reviewer approving every request a session announces, as soon as its line arrives. */
function reviewer(stack: Stack) {
  const pending: Promise<void>[] = [];
  return {
    approve(approvalId: string, failures: string[]) {
      pending.push(
        stack.api(stack.tokens.developer, 'POST', `/approvals/${approvalId}/approve`, {}).then(
          (r) => void (r.status === 200 || failures.push(`approval ${approvalId}: HTTP ${r.status} ${JSON.stringify(r.json)}`)),
          (e: unknown) => void failures.push(`approval ${approvalId}: ${(e as Error).message}`),
        ),
      );
    },
    settled: () => Promise.all(pending),
  };
}

/** One headless session run in this process with the CLI's code, its stream-json lines timed as they come. */
async function apiSession(
  stack: Stack,
  client: GatewayClient,
  project: Awaited<ReturnType<GatewayClient['projectByName']>>,
  n: number,
  mix: Mix,
  review: ReturnType<typeof reviewer>,
): Promise<SessionRun> {
  const script = stack.script(`bench-${mix}-${n}`, scriptTurns(n, mix, CALLS));
  const run: SessionRun = { code: null, events: [], stderr: '', approvalFailures: [] };
  let buffered = '';
  const io = {
    stdout(text: string) {
      const at = performance.now();
      buffered += text;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (!line.trim()) continue;
        const event = JSON.parse(line) as TimedEvent['event'];
        run.events.push({ at, event });
        if (event.type === 'approval_requested') review.approve(String(event['approvalId']), run.approvalFailures);
      }
    },
    stderr(text: string) {
      run.stderr += text;
    },
    onInterrupt: () => () => undefined,
  };
  try {
    run.code = await runHeadless(
      gatewaySessionApi(client),
      {
        instruction: `bench ${mix} session ${n}`,
        project,
        model: `scripted:${script}`,
        outputFormat: 'stream-json',
        apply: false,
        includeUncommitted: false,
        cwd: stack.dir,
        developer: { environment: { LEMNISCATE_SESSION_MAX_ACTIONS: String(CALLS + 10) } },
        waitForApprovals: true,
      },
      io,
    );
  } catch (error) {
    run.stderr += `${(error as Error).message}\n`;
    run.code = -1;
  }
  return run;
}

/** One `lemni -p` process per session, as a developer's terminal or a CI job runs it. */
async function cliSession(stack: Stack, n: number, mix: Mix, review: ReturnType<typeof reviewer>): Promise<SessionRun> {
  const script = stack.script(`bench-cli-${mix}-${n}`, scriptTurns(n, mix, CALLS));
  const child = stack.spawnCli(['-p', `bench ${mix} session ${n}`, '--model', `scripted:${script}`, '--output-format', 'stream-json', '--no-apply', '--wait-for-approvals'], {
    env: { LEMNISCATE_SESSION_MAX_ACTIONS: String(CALLS + 10) },
  });
  child.stdin!.end();
  const failures: string[] = [];
  const run = await collectCli(child, (event) => event.type === 'approval_requested' && review.approve(String(event['approvalId']), failures));
  return { ...run, approvalFailures: failures };
}

// ───────────────────────────── CPU of the processes that serve a run

interface CpuSample {
  gateway: number;
  execHost: number;
  docker: number;
  postgres: number;
  client: number;
}

/** The Docker engine's containers carrying this exec-host's label, asked over its socket (no process started). */
function labelledContainers(instance: string): Promise<Set<string>> {
  const filters = encodeURIComponent(JSON.stringify({ label: [`lemniscate.exec-host=${instance}`] }));
  return new Promise((resolve) => {
    const req = http.get({ socketPath: '/var/run/docker.sock', path: `/containers/json?all=1&filters=${filters}` }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        try {
          resolve(new Set((JSON.parse(body) as { Id: string }[]).map((c) => c.Id)));
        } catch {
          resolve(new Set());
        }
      });
    });
    req.on('error', () => resolve(new Set()));
  });
}

/**
 * CPU time (user + system, from /proc) of everything that serves the run: the gateway and the
 * exec-host (with the git processes they reaped), dockerd and containerd, the shims of this
 * exec-host's containers (with what they reaped: runc and the commands), PostgreSQL's connections to
 * the run's database, and the client: this process, plus the CLIs it reaped. Sampled every 250 ms;
 * a shim's last quarter second before it exits is not seen. dockerd and containerd serve the whole
 * machine: whatever else uses Docker meanwhile is counted too.
 */
class CpuMeter {
  private readonly shims = new Map<number, { first: number; last: number }>();
  private readonly backends = new Map<number, { first: number; last: number }>();
  private timer: NodeJS.Timeout | undefined;
  private startSample: CpuSample | undefined;
  private sampling: Promise<void> = Promise.resolve();
  private readonly engine = pidsNamed(/^(dockerd|containerd)$/);

  constructor(
    private readonly stack: Stack,
    private readonly pg: Client | null,
    private readonly database: string | null,
  ) {}

  async start(): Promise<void> {
    await this.sample();
    this.startSample = this.fixed();
    for (const map of [this.shims, this.backends]) for (const v of map.values()) v.first = v.last;
    this.timer = setInterval(() => (this.sampling = this.sampling.then(() => this.sample())), 250);
  }

  async stop(): Promise<CpuSample> {
    clearInterval(this.timer);
    await this.sampling;
    await this.sample();
    const end = this.fixed();
    const growth = (map: Map<number, { first: number; last: number }>) => [...map.values()].reduce((sum, v) => sum + (v.last - v.first), 0);
    const start = this.startSample!;
    return {
      gateway: end.gateway - start.gateway,
      execHost: end.execHost - start.execHost,
      docker: end.docker - start.docker + growth(this.shims),
      postgres: growth(this.backends),
      client: end.client - start.client,
    };
  }

  private fixed(): CpuSample {
    const self = process.cpuUsage();
    return {
      gateway: treeCpuMs(this.stack.gatewayPid() ?? 0),
      execHost: treeCpuMs(this.stack.execHostPid() ?? 0),
      docker: this.engine.reduce((sum, pid) => sum + processCpuMs(pid), 0),
      postgres: 0,
      // This process, and the CLIs it has reaped (cutime/cstime of its own /proc entry).
      client: (self.user + self.system) / 1000 + (processCpuMs(process.pid) - ownCpuMs()),
    };
  }

  private async sample(): Promise<void> {
    const ours = await labelledContainers(this.stack.execHostInstance);
    for (const pid of pidsNamed(/^containerd-shim/)) {
      const id = shimContainer(pid);
      if (!id || !ours.has(id)) continue;
      const cpu = processCpuMs(pid);
      const known = this.shims.get(pid);
      if (known) known.last = Math.max(known.last, cpu);
      else this.shims.set(pid, { first: this.startSample ? 0 : cpu, last: cpu });
    }
    if (this.pg && this.database) {
      const r = await this.pg.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [this.database]).catch(() => ({ rows: [] as { pid: number }[] }));
      for (const { pid } of r.rows) {
        const cpu = processCpuMs(pid);
        const known = this.backends.get(pid);
        if (known) known.last = Math.max(known.last, cpu);
        else this.backends.set(pid, { first: this.startSample ? 0 : cpu, last: cpu });
      }
    }
  }
}

/** This process's own CPU time as /proc counts it (without reaped children), in ms. */
function ownCpuMs(): number {
  const self = process.cpuUsage();
  return (self.user + self.system) / 1000;
}

// ───────────────────────────── one run

interface RunReport {
  database: Kind;
  driver: 'api' | 'cli';
  mix: Mix;
  sessions: number;
  calls: number;
  seconds: number;
  callsPerSecond: number;
  p95Ms: number;
  p95MsByTool: Partial<Record<Tool, number>>;
  cpuMsPerCall: number;
  cpuMsPerCallByProcess: CpuSample;
  audited: number;
  pass: boolean;
  broken: string[];
}

async function runPhase(stack: Stack, meter: CpuMeter, kind: Kind, driver: 'api' | 'cli', mix: Mix, sessions: number): Promise<RunReport> {
  const review = reviewer(stack);
  const client = new GatewayClient(stack.gatewayUrl, stack.tokens.developer);
  const project = await client.projectByName('demo');
  await meter.start();
  const started = performance.now();
  const runs = await Promise.all(Array.from({ length: sessions }, (_, n) => (driver === 'api' ? apiSession(stack, client, project, n, mix, review) : cliSession(stack, n, mix, review))));
  const seconds = (performance.now() - started) / 1000;
  const cpu = await meter.stop();
  await review.settled();

  const broken: string[] = [];
  let audited = 0;
  let calls = 0;
  const cycles: { ms: number; name: string }[] = [];
  for (const [n, run] of runs.entries()) {
    const r = run.events.find((e) => e.event.type === 'result')?.event as ResultLine | undefined;
    const id = r?.session_id;
    const shown = run.events.filter((e) => e.event.type === 'tool_call_proposed').map((e) => String(e.event.callId));
    calls += r?.tool_calls?.length ?? 0;
    cycles.push(...callCycles(run.events));
    const problems: string[] = [...run.approvalFailures];
    if (run.code !== 0) problems.push(`exit ${run.code}`);
    if (!r || r.status !== 'completed' || r.exit_code !== 0) problems.push(`status ${r?.status}/${r?.stop_reason}`);
    if (r?.tool_calls?.length !== CALLS) problems.push(`${r?.tool_calls?.length ?? 0} tool calls`);
    if (new Set(shown).size !== CALLS) problems.push(`${new Set(shown).size} proposals shown`);
    if ((r?.refused_changes?.length ?? 0) > 0) problems.push(`${r?.refused_changes?.length} refused changes`);
    const writes = Array.from({ length: CALLS }, (_, i) => i).filter((i) => toolOf(mix, i) === 'Write');
    const missing = writes.filter((i) => !r?.patch?.includes(`b/notes/s${n}/c${i}.txt`));
    if (missing.length) problems.push(`${missing.length} of ${writes.length} writes missing from the patch`);
    if (id) {
      const a = await stack.api(stack.tokens.security, 'GET', `/audit?sessionId=${id}&kind=tool_call.proposed&order=asc&limit=1000`);
      const ids = (a.json as { payload: { callId: string } }[]).map((e) => e.payload.callId);
      audited += ids.length;
      if (ids.length !== shown.length || [...ids].sort().join() !== [...shown].sort().join()) problems.push(`${ids.length} audited for ${shown.length} shown`);
      if (containersOf(id).length) problems.push('sandbox left behind');
    }
    if (problems.length) broken.push(`session ${n}${id ? ` (${id})` : ''}: ${problems.join(', ')}${run.stderr.trim() ? ` — ${run.stderr.trim().split('\n').at(-1)}` : ''}`);
  }
  const verify = await stack.api(stack.tokens.security, 'GET', '/audit/verify');
  if (!verify.json?.ok) broken.push(`audit chain: ${JSON.stringify(verify.json)}`);
  const byTool: Partial<Record<Tool, number>> = {};
  for (const tool of ['Bash', 'Read', 'Write'] as const) {
    const mine = cycles.filter((c) => c.name === tool).map((c) => c.ms);
    if (mine.length) byTool[tool] = Math.round(percentile(mine, 95));
  }
  const total = cpu.gateway + cpu.execHost + cpu.docker + cpu.postgres + cpu.client;
  const perCall = (v: number) => Number((v / Math.max(1, calls)).toFixed(1));
  return {
    database: kind,
    driver,
    mix,
    sessions,
    calls,
    seconds: Number(seconds.toFixed(1)),
    callsPerSecond: Number((calls / seconds).toFixed(1)),
    p95Ms: Math.round(
      percentile(
        cycles.map((c) => c.ms),
        95,
      ),
    ),
    p95MsByTool: byTool,
    cpuMsPerCall: perCall(total),
    cpuMsPerCallByProcess: { gateway: perCall(cpu.gateway), execHost: perCall(cpu.execHost), docker: perCall(cpu.docker), postgres: perCall(cpu.postgres), client: perCall(cpu.client) },
    audited,
    pass: broken.length === 0 && audited === calls && calls === sessions * CALLS,
    broken,
  };
}

async function bench(kind: Kind): Promise<RunReport[]> {
  const stack = await startStack({ database: kind });
  const pg = stack.database.kind === 'postgres' ? new Client({ connectionString: stack.database.url }) : null;
  await pg?.connect();
  const database = stack.database.kind === 'postgres' ? new URL(stack.database.url).pathname.slice(1) : null;
  const meter = () => new CpuMeter(stack, pg, database);
  const reports: RunReport[] = [];
  try {
    await stack.publishPolicy(POLICY);
    // A short warm-up (JIT, connections, the image's pages), not counted.
    await runPhase(stack, meter(), kind, 'api', 'mixed', 4);
    // Each run is printed as it ends, so a long benchmark cut short keeps what it measured.
    const report = (r: RunReport) => {
      reports.push(r);
      if (!json) console.log(describe(r));
    };
    for (const sessions of LEVELS) report(await runPhase(stack, meter(), kind, 'api', ONLY ?? 'mixed', sessions));
    if (byTool && ONLY === undefined) for (const tool of ['Bash', 'Read', 'Write'] as const) report(await runPhase(stack, meter(), kind, 'api', tool, BY_TOOL_SESSIONS));
    if (withCli) report(await runPhase(stack, meter(), kind, 'cli', 'mixed', LEVELS[0]!));
  } finally {
    await pg?.end();
    await stack.stop();
  }
  return reports;
}

function describe(r: RunReport): string {
  const c = r.cpuMsPerCallByProcess;
  const target = TODAY[r.database] * TARGET_FACTOR;
  const head = `  ${r.database.padEnd(8)} ${String(r.sessions).padStart(3)} sessions${r.driver === 'cli' ? ' (one lemni process each)' : ''}${r.mix === 'mixed' ? '' : `, ${r.mix} only`}: ${r.calls} calls in ${r.seconds} s: ${r.callsPerSecond} calls/s`;
  const tools = Object.entries(r.p95MsByTool)
    .map(([t, v]) => `${t} ${v}`)
    .join(', ');
  const verdict = r.mix === 'mixed' ? `   target ≥ ${target} calls/s (${TARGET_FACTOR}× ${TODAY[r.database]}): ${r.callsPerSecond >= target ? 'met' : 'missed'}` : '';
  return [
    `${head}${verdict}`,
    `            p95 call ${r.p95Ms} ms${r.mix === 'mixed' ? ` (${tools})` : ''}   CPU ${r.cpuMsPerCall} ms/call: gateway ${c.gateway}, exec-host ${c.execHost}, Docker ${c.docker}${r.database === 'postgres' ? `, PostgreSQL ${c.postgres}` : ''}, client ${c.client}   audit ${r.audited} = calls ${r.calls}, chain verified: ${r.pass ? 'PASS' : 'FAIL'}`,
    ...r.broken.slice(0, 10).map((b) => `    broken: ${b}`),
    ...(r.broken.length > 10 ? [`    … and ${r.broken.length - 10} more broken sessions`] : []),
  ].join('\n');
}

async function main() {
  const reports: RunReport[] = [];
  if (!json) {
    console.log(
      `Throughput: concurrent headless sessions × ${CALLS} tool calls (half Bash \`echo\`, a quarter Read, a quarter Write approved by a reviewer), driven through the gateway's API by one process (${process.version})`,
    );
  }
  for (const kind of kinds) reports.push(...(await bench(kind)));
  if (json) console.log(JSON.stringify({ node: process.version, calls: CALLS, reports }));
  const mixed = reports.filter((r) => r.mix === 'mixed' && r.driver === 'api');
  process.exitCode = reports.every((r) => r.pass) && mixed.every((r) => r.callsPerSecond >= TODAY[r.database] * TARGET_FACTOR) ? 0 : 1;
}

void main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exitCode = 1;
});
