// Compiled to bench/sessions/dist/bench/sessions/. Tool-call overhead (bench/README.md, "Sessions"):
// in one run, the same `echo` commands (a) as one scripted session through the whole platform —
// `lemni -p` → gateway (policy, audit, events) → exec-host → Docker — and (b) straight to the
// exec-host's API on a sandbox of the same runtime and limits; what the platform adds per call is
// (a) − (b), at the median and at the 95th percentile. Target: ≤ 10 ms added at the median, on
// PGlite and on PostgreSQL. With --breakdown, a further run with the platform's tracing on says
// where one call's time goes (the median of each part, from the gateway's and exec-host's spans).
import { randomBytes } from 'node:crypto';
import { parsePolicy } from '@lemniscate/policy';
import { startStack, type Stack } from '../../test/e2e/harness';
import { OtlpReceiver, type ReceivedSpan } from '../../test/support/otlp-receiver';
import { callCycles, collectCli, ms, percentile, type CliRun } from './common';

const CALLS = Number(process.env['BENCH_CALLS'] ?? 200);
const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 20);
const TARGET_MS = 10;
const json = process.argv.includes('--json');
const breakdown = process.argv.includes('--breakdown');
const kinds = (['pglite', 'postgres'] as const).filter((k) => !process.argv.some((a) => a === 'pglite' || a === 'postgres') || process.argv.includes(k));
// A session's default limit is 150 actions: the policy's ceiling and the run's own value are raised together.
const POLICY = { version: 1, commands: { free: ['echo'] }, execution: { sessionMaxActions: 10_000 } };

/** A sandbox made on the exec-host as the gateway makes a session's (same runtime, limits and exclusions). */
async function directSandbox(stack: Stack): Promise<string> {
  const policy = parsePolicy(POLICY);
  const res = await fetch(`${stack.execHostUrl}/v1/sandboxes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.execHostToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      sessionId: `bench-direct-${randomBytes(6).toString('hex')}`,
      repository: { source: stack.repository, ref: 'main' },
      contextExclusions: policy.contextExclusions,
      runtime: policy.sandbox.runtime,
      limits: {
        cpus: policy.sandbox.cpus,
        memoryMb: policy.sandbox.memoryMb,
        pids: Math.max(16, policy.sandbox.pids),
        diskMb: policy.sandbox.diskMb,
        commandTimeoutSeconds: policy.sandbox.commandTimeoutSeconds,
        lifetimeMinutes: 60,
      },
    }),
  });
  const body = (await res.json()) as { sandboxId?: string; message?: string };
  if (res.status !== 201 || !body.sandboxId) throw new Error(`The exec-host did not create the direct sandbox (HTTP ${res.status}): ${body.message ?? JSON.stringify(body)}`);
  return body.sandboxId;
}

/** One command through the exec-host's streaming exec API, timed from the request to the exit line. */
async function directExec(stack: Stack, sandboxId: string, command: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${stack.execHostUrl}/v1/sandboxes/${sandboxId}/exec`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.execHostToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ command }),
  });
  const text = await res.text();
  const elapsed = performance.now() - started;
  const exit = text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string; exitCode?: number })
    .find((c) => c.type === 'exit');
  if (res.status !== 200 || exit?.exitCode !== 0) throw new Error(`The direct command \`${command}\` did not succeed (HTTP ${res.status}): ${text.slice(0, 300)}`);
  return elapsed;
}

async function session(stack: Stack, calls: number, label: string): Promise<CliRun> {
  const script = stack.script(label, [{ repeat: calls, tool_calls: [{ name: 'Bash', arguments: { command: `echo ${label} call {{i}}` } }] }, { text: `${calls} calls.` }]);
  const child = stack.spawnCli(['-p', label, '--model', `scripted:${script}`, '--output-format', 'stream-json', '--no-apply'], { env: { LEMNISCATE_SESSION_MAX_ACTIONS: String(calls + 10) } });
  child.stdin!.end();
  const run = await collectCli(child);
  const result = run.events.find((e) => e.event.type === 'result')?.event as { status?: string; tool_calls?: unknown[] } | undefined;
  if (run.code !== 0 || result?.status !== 'completed' || result.tool_calls?.length !== calls) {
    throw new Error(
      `The ${label} session did not complete its ${calls} calls (exit ${run.code}, status ${result?.status}, ${result?.tool_calls?.length ?? 0} calls): ${run.stderr.trim().split('\n').at(-1)}`,
    );
  }
  return run;
}

async function bench(kind: 'pglite' | 'postgres') {
  const stack = await startStack({ database: kind, gatewayEnv: { ...(process.env['BENCH_GATEWAY_NODE_OPTIONS'] ? { NODE_OPTIONS: process.env['BENCH_GATEWAY_NODE_OPTIONS'] } : {}) } });
  try {
    await stack.publishPolicy(POLICY);
    const sandboxId = await directSandbox(stack);
    // Both paths warm (the JIT, the connections, the sandbox image's pages) before anything is timed.
    for (let i = 0; i < WARMUP; i++) await directExec(stack, sandboxId, `echo warm-up ${i}`);
    await session(stack, WARMUP, 'warm-up');
    // The direct commands before and after the session, so a drift of the machine's load meets both.
    const direct: number[] = [];
    for (let i = 0; i < CALLS / 2; i++) direct.push(await directExec(stack, sandboxId, `echo direct call ${i}`));
    const run = await session(stack, CALLS, 'bench');
    for (let i = CALLS / 2; i < CALLS; i++) direct.push(await directExec(stack, sandboxId, `echo direct call ${i}`));
    await fetch(`${stack.execHostUrl}/v1/sandboxes/${sandboxId}`, { method: 'DELETE', headers: { authorization: `Bearer ${stack.execHostToken}` } });
    if (process.env['BENCH_GATEWAY_NODE_OPTIONS']) await stack.stopGateway('SIGTERM');

    const cycles = callCycles(run.events).map((c) => c.ms);
    // The command's part as the terminal sees it: from the proposal to the result line.
    const proposed = new Map<string, number>();
    const toResult: number[] = [];
    for (const { at, event } of run.events) {
      if (event.type === 'tool_call_proposed') proposed.set(String(event.callId), at);
      if (event.type === 'tool_result' && proposed.has(String(event.callId))) toResult.push(at - proposed.get(String(event.callId))!);
    }
    const gateway = { p50: percentile(cycles, 50), p95: percentile(cycles, 95) };
    const straight = { p50: percentile(direct, 50), p95: percentile(direct, 95) };
    const added = { p50: gateway.p50 - straight.p50, p95: gateway.p95 - straight.p95 };
    return {
      database: kind,
      calls: cycles.length,
      gatewayMs: round(gateway),
      proposalToResultMs: round({ p50: percentile(toResult, 50), p95: percentile(toResult, 95) }),
      directMs: round(straight),
      addedMs: round(added),
      targetMs: TARGET_MS,
      met: added.p50 <= TARGET_MS,
    };
  } finally {
    await stack.stop();
  }
}

/**
 * Where one call's time goes, from the platform's own traces (docs/operator-guide.md, "Traces"): a
 * separate stack with tracing on, its spans sent to a receiver in this process, one session of
 * `calls` commands; the median of each part of a call. Tracing costs a little itself, so these parts
 * are read beside the timed runs, not subtracted from them.
 */
async function tracedBreakdown(kind: 'pglite' | 'postgres', calls: number): Promise<{ part: string; p50: number }[]> {
  const receiver = await new OtlpReceiver().start();
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '200' };
  const stack = await startStack({ database: kind, gatewayEnv: otel, execHostEnv: otel });
  let warmTraces = new Set<string>();
  try {
    await stack.publishPolicy(POLICY);
    await session(stack, WARMUP, 'warm-up');
    await new Promise((r) => setTimeout(r, 1_000));
    warmTraces = new Set(receiver.spans.map((s) => s.traceId));
    await session(stack, calls, 'bench');
  } finally {
    // Stopping flushes what the gateway and the exec-host still hold.
    await stack.stop();
    await receiver.close();
  }
  const spans = receiver.spans.filter((s) => !warmTraces.has(s.traceId));
  const children = new Map<string, ReceivedSpan[]>();
  for (const s of spans) {
    if (!children.has(s.parentSpanId)) children.set(s.parentSpanId, []);
    children.get(s.parentSpanId)!.push(s);
  }
  const childOf = (parent: ReceivedSpan, name: string) => (children.get(parent.spanId) ?? []).find((c) => c.name === name);
  const tools = spans.filter((s) => s.service === 'lemniscate-gateway' && s.name === 'execute_tool Bash').sort((a, b) => a.startMs - b.startMs);
  const parts = new Map<string, number[]>();
  const add = (part: string, value: number | undefined) => {
    if (value === undefined || !Number.isFinite(value)) return;
    if (!parts.has(part)) parts.set(part, []);
    parts.get(part)!.push(value);
  };
  tools.forEach((tool, i) => {
    const decision = childOf(tool, 'policy decision');
    const exec = childOf(tool, 'POST /v1/sandboxes/{id}/exec');
    const changes = childOf(tool, 'GET /v1/sandboxes/{id}/changes');
    const served = exec && childOf(exec, 'POST /v1/sandboxes/{id}/exec');
    const command = served && childOf(served, 'sandbox.exec');
    if (!decision || !exec || !command) return;
    add('before the decision (limits, loop check, the policy in force read)', decision.startMs - tool.startMs);
    add('the policy decision', decision.endMs - decision.startMs);
    add('the proposal recorded (its row and audit entries) and announced', exec.startMs - decision.endMs);
    add('the exec-host call around the command (HTTP, the sandbox lock, the kill after it)', exec.endMs - exec.startMs - (command.endMs - command.startMs));
    add('the command in its sandbox (sandbox.exec, as on the direct path)', command.endMs - command.startMs);
    add('the result announced and audited, the changes read (GET …/changes)', tool.endMs - exec.endMs);
    if (changes) add('  of which the changes call', changes.endMs - changes.startMs);
    const next = tools[i + 1];
    if (next) add('between two calls (the model turn, the answer to the model)', next.startMs - tool.endMs);
  });
  if (tools.length === 0) throw new Error(`The traced ${kind} run exported no tool-call spans (${spans.length} spans in all).`);
  return [...parts].map(([part, values]) => ({ part, p50: Number(percentile(values, 50).toFixed(2)) }));
}

function round(v: { p50: number; p95: number }) {
  return { p50: Number(v.p50.toFixed(1)), p95: Number(v.p95.toFixed(1)) };
}

async function main() {
  const results = [];
  // The traced run comes after the timed one, on a stack of its own: tracing is off in the timed runs.
  for (const kind of kinds) results.push({ ...(await bench(kind)), ...(breakdown ? { breakdown: await tracedBreakdown(kind, Math.min(CALLS, 100)) } : {}) });
  if (json) {
    console.log(JSON.stringify({ node: process.version, calls: CALLS, results }));
  } else {
    console.log(`Tool-call overhead: ${CALLS} \`echo\` calls through lemni -p → gateway → exec-host vs. the same ${CALLS} straight to the exec-host API (${process.version})`);
    for (const r of results) {
      console.log(
        `  ${r.database.padEnd(8)}  gateway path p50 ${ms(r.gatewayMs.p50)}  p95 ${ms(r.gatewayMs.p95)}   exec-host API p50 ${ms(r.directMs.p50)}  p95 ${ms(r.directMs.p95)}   added p50 ${ms(r.addedMs.p50)}  p95 ${ms(r.addedMs.p95)}   target p50 ≤ ${TARGET_MS} ms: ${r.met ? 'met' : 'missed'}`,
      );
      console.log(`            (proposal → result line: p50 ${ms(r.proposalToResultMs.p50)}  p95 ${ms(r.proposalToResultMs.p95)})`);
      if (r.breakdown) {
        console.log(`            one call, from the platform's traces (a separate traced run, ${Math.min(CALLS, 100)} calls; medians):`);
        for (const { part, p50 } of r.breakdown) console.log(`              ${part.padEnd(86)} ${ms(p50)}`);
      }
    }
  }
  process.exitCode = results.every((r) => r.met) ? 0 : 1;
}

void main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
