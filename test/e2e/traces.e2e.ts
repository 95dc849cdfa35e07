import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver';
import { freePort, ROOT, startStack, type Stack } from './harness';

/**
 * T3 (issue 20): OpenTelemetry traces across CLI → gateway → policy → exec-host → sandbox command,
 * W3C trace context on every hop, exported over OTLP/HTTP. The receiver is a real OTLP/HTTP
 * endpoint in this process (JSON, as the exporter sends it, behind a collector credential); the
 * CLI, gateway and exec-host are the real processes, and the scripted model drives the session.
 */

const COLLECTOR_SECRET = `collector-${randomBytes(8).toString('hex')}`;
/** Text that only a command's argument and the instruction carry: no span may hold it. */
const MARKER = `sekrit-${randomBytes(6).toString('hex')}`;

const receiver = new OtlpReceiver(COLLECTOR_SECRET);
let stack: Stack;

const otlpEnv = () => ({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${COLLECTOR_SECRET}` });

beforeAll(async () => {
  await receiver.start();
  stack = await startStack({ gatewayEnv: otlpEnv(), execHostEnv: otlpEnv() });
  await stack.publishPolicy({ version: 1, commands: { free: ['echo', 'cat', 'ls'] } });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await receiver.close();
});

const json = (out: string) => JSON.parse(out.trim().split('\n').at(-1)!);

async function until<T>(what: string, read: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = read();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} did not arrive within ${timeoutMs / 1000} s; received: ${receiver.spans.map((s) => `${s.service}:${s.name}`).join(', ')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('OpenTelemetry traces, CLI → gateway → policy → exec-host → sandbox', () => {
  it('each tool call is one connected subtree of the CI job trace: its policy decision, the exec-host call and the sandbox command', async () => {
    const ciTrace = randomBytes(16).toString('hex');
    const ciSpan = randomBytes(8).toString('hex');
    const script = stack.script('traced', [
      { tool_calls: [{ name: 'Bash', arguments: { command: `echo ${MARKER}` } }] },
      { tool_calls: [{ name: 'Read', arguments: { path: 'src/calc.js' } }] },
      { tool_calls: [{ name: 'Bash', arguments: { command: `curl https://example.com/${MARKER}` } }] },
      { text: 'Done.' },
    ]);
    const r = await stack.cli(['-p', `trace this ${MARKER}`, '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply'], {
      env: { ...otlpEnv(), TRACEPARENT: `00-${ciTrace}-${ciSpan}-01` },
    });
    expect(r.stderr).not.toMatch(/traces are off/);
    expect(r.code).toBe(0);
    const out = json(r.stdout);
    expect(out.tool_calls.map((c: { name: string }) => c.name)).toEqual(['Bash', 'Read', 'Bash']);

    const inTrace = () => receiver.spans.filter((s) => s.traceId === ciTrace);
    await until('three tool calls, their sandbox command and the CLI span', () => {
      const spans = inTrace();
      return spans.filter((s) => s.name.startsWith('execute_tool ')).length === 3 && spans.some((s) => s.name === 'sandbox.exec') && spans.some((s) => s.service === 'lemni') ? true : undefined;
    });
    // The gateway's span of the session's end and the exec-host's destruction come a moment later.
    await new Promise((r) => setTimeout(r, 2500));
    const spans = inTrace();
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const childrenOf = (s: ReceivedSpan) => spans.filter((c) => c.parentSpanId === s.spanId);
    const descendantsOf = (s: ReceivedSpan): ReceivedSpan[] => childrenOf(s).flatMap((c) => [c, ...descendantsOf(c)]);
    const pathToRoot = (s: ReceivedSpan): ReceivedSpan[] => {
      const path = [s];
      for (let p = byId.get(s.parentSpanId); p; p = byId.get(p.parentSpanId)) path.push(p);
      return path;
    };

    // The CLI's span continues the CI job's (TRACEPARENT) and is the root of everything the run caused.
    const cli = spans.find((s) => s.service === 'lemni')!;
    expect(cli).toMatchObject({ name: 'lemni run', parentSpanId: ciSpan, kind: 3 /* CLIENT */ });
    expect(cli.attributes['process.exit.code']).toBe(0);
    const start = spans.find((s) => s.service === 'lemniscate-gateway' && s.name === 'POST /api/v1/sessions')!;
    expect(start).toMatchObject({ parentSpanId: cli.spanId, kind: 2 /* SERVER */ });
    expect(start.attributes['http.response.status_code']).toBe(201);
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(['lemni', 'lemniscate-gateway', 'lemniscate-exec-host']));

    // Every span of the run is connected: its parents lead to the CLI's span, none is missing.
    for (const s of spans) expect({ span: s.name, root: pathToRoot(s).at(-1)!.spanId }).toEqual({ span: s.name, root: cli.spanId });

    const calls = spans.filter((s) => s.name.startsWith('execute_tool ')).sort((a, b) => String(a.attributes['gen_ai.tool.call.id']).localeCompare(String(b.attributes['gen_ai.tool.call.id'])));
    expect(calls.map((c) => c.attributes['lemniscate.tool_call.id']).sort()).toEqual(out.tool_calls.map((c: { call_id: string }) => c.call_id).sort());
    for (const call of calls) {
      expect(call.service).toBe('lemniscate-gateway');
      expect(pathToRoot(call)).toContain(start);
      expect(call.attributes['lemniscate.session.id']).toBe(out.session_id);
    }
    const [echo, read, curl] = out.tool_calls.map((c: { call_id: string }) => calls.find((s) => s.attributes['lemniscate.tool_call.id'] === c.call_id)!);

    // The allowed command: policy → the gateway's call to the exec-host → its server span → the sandbox command.
    const echoTree = descendantsOf(echo!);
    expect(echoTree.find((s) => s.name === 'policy decision')?.attributes).toMatchObject({ 'lemniscate.policy.effect': 'allow' });
    const client = echoTree.find((s) => s.name === 'POST /v1/sandboxes/{id}/exec' && s.service === 'lemniscate-gateway')!;
    expect(client.kind).toBe(3);
    const server = childrenOf(client).find((s) => s.service === 'lemniscate-exec-host')!;
    expect(server).toMatchObject({ name: 'POST /v1/sandboxes/{id}/exec', kind: 2 });
    const command = childrenOf(server).find((s) => s.name === 'sandbox.exec')!;
    expect(command.attributes).toMatchObject({ 'process.exit.code': 0, 'lemniscate.session.id': out.session_id, 'lemniscate.exec.timed_out': false });
    expect(['runc', 'runsc']).toContain(command.attributes['lemniscate.sandbox.runtime']);

    // A read goes to the exec-host's file route; the refused command never leaves the gateway.
    const readTree = descendantsOf(read!);
    expect(readTree.map((s) => `${s.service}:${s.name}`)).toEqual(
      expect.arrayContaining(['lemniscate-gateway:policy decision', 'lemniscate-gateway:POST /v1/sandboxes/{id}/files/read', 'lemniscate-exec-host:POST /v1/sandboxes/{id}/files/read']),
    );
    const curlTree = descendantsOf(curl!);
    expect(curlTree.map((s) => s.name)).toEqual(['policy decision']);
    expect(curlTree[0]!.attributes).toMatchObject({ 'lemniscate.policy.effect': 'deny' });
    expect(curl!.attributes['lemniscate.tool.is_error']).toBe(true);

    // Nothing a trace backend must not hold: no command text, no instruction, no token, no query string.
    const everything = JSON.stringify(receiver.spans);
    expect(everything).not.toContain(MARKER);
    for (const token of Object.values(stack.tokens)) expect(everything).not.toContain(token);
    expect(everything).not.toContain(stack.execHostToken);
    expect(receiver.refused).toBe(0);
  }, 180_000);

  it("a person's approval is the tool call's 'approval wait' span, with its answer, between the policy decision and the command", async () => {
    const script = stack.script('approved', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'uname -s' } }] }, { text: 'Done.' }]);
    const child = stack.spawnCli(['-p', 'ask first', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply', '--wait-for-approvals'], { env: otlpEnv() });
    child.stdin!.end();
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const closed = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    const sessionId = await until('the session to start', () => /Session (\S+) started/.exec(stderr)?.[1]);
    let approvalId: string | undefined;
    for (let i = 0; i < 150 && !approvalId; i++) {
      const pending = await stack.api(stack.tokens.developer, 'GET', `/approvals?sessionId=${sessionId}`);
      approvalId = (pending.json as { id: string; state: string }[]).find((a) => a.state === 'pending')?.id;
      if (!approvalId) await new Promise((r) => setTimeout(r, 200));
    }
    expect(approvalId).toBeDefined();
    expect((await stack.api(stack.tokens.developer, 'POST', `/approvals/${approvalId}/approve`, {})).status).toBe(200);
    expect(await closed).toBe(0);
    const out = json(stdout);
    const call = await until('the tool call span', () =>
      receiver.spans.find(
        (s) =>
          s.name === 'execute_tool Bash' &&
          s.attributes['lemniscate.tool_call.id'] === out.tool_calls[0].call_id &&
          receiver.spans.some((w) => w.parentSpanId === s.spanId && w.name === 'approval wait'),
      ),
    );
    await until('the sandbox command', () => (receiver.spans.some((s) => s.traceId === call.traceId && s.name === 'sandbox.exec') ? true : undefined));
    const children = receiver.spans.filter((s) => s.parentSpanId === call.spanId).map((s) => s.name);
    expect(children).toEqual(expect.arrayContaining(['policy decision', 'approval wait', 'POST /v1/sandboxes/{id}/exec']));
    const wait = receiver.spans.find((s) => s.parentSpanId === call.spanId && s.name === 'approval wait')!;
    expect(wait.attributes).toMatchObject({ 'lemniscate.approval.kind': 'command', 'lemniscate.approval.state': 'approved' });
    expect(receiver.spans.find((s) => s.parentSpanId === call.spanId && s.name === 'policy decision')?.attributes).toMatchObject({ 'lemniscate.policy.effect': 'ask' });
  }, 120_000);

  it('a malformed TRACEPARENT starts a new trace; a collector that is down costs the run nothing', async () => {
    const script = stack.script('fresh', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'echo fresh' } }] }, { text: 'Done.' }]);
    const r = await stack.cli(['-p', 'trace a fresh one', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply'], { env: { ...otlpEnv(), TRACEPARENT: '00-zzzz-not-a-trace-01' } });
    expect(r.code).toBe(0);
    const sessionId = json(r.stdout).session_id as string;
    const cli = await until('the CLI span', () =>
      receiver.spans.find((s) => s.service === 'lemni' && s.name === 'lemni run' && receiver.spans.some((g) => g.traceId === s.traceId && g.attributes['lemniscate.session.id'] === sessionId)),
    );
    expect(cli.parentSpanId).toBe('');
    expect(cli.traceId).toMatch(/^[0-9a-f]{32}$/);

    // The CLI pointed at a port nobody listens on: the command completes as without traces.
    const down = `http://127.0.0.1:${await freePort()}`;
    const quiet = await stack.cli(['-p', 'no collector', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply'], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: down } });
    expect(quiet.code).toBe(0);
    expect(json(quiet.stdout)).toMatchObject({ status: 'completed', exit_code: 0 });
  }, 120_000);

  it('a tracing setting that cannot work: the CLI says so and runs untraced; the gateway and the exec-host refuse to start with the sentence', async () => {
    const script = stack.script('bad', [{ text: 'Nothing to do.' }]);
    const r = await stack.cli(['-p', 'nothing', '--model', `scripted:${script}`, '--output-format', 'json', '--no-apply'], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://collector:4317' } });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('lemni: traces are off for this command: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// address (OTLP over HTTP); "grpc:" is not.');
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: stack.dir, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' };
    const gateway = spawnSync(process.execPath, [join(ROOT, 'apps/gateway/bin/lemni-gateway.js')], {
      env: { ...env, LEMNISCATE_DATA_DIR: join(stack.dir, 'never') },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(gateway.status).toBe(1);
    expect(gateway.stderr).toContain('lemni-gateway: OTLP protocol "grpc" is not supported: Lemniscate sends OTLP over HTTP (JSON)');
    const execHost = spawnSync(process.execPath, [join(ROOT, 'apps/exec-host/bin/lemni-exec-host.js')], {
      env: { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_EXPORTER_OTLP_HEADERS: 'no-equals-sign' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(execHost.status).toBe(1);
    expect(execHost.stderr).toContain('The exec-host will not start: OTEL_EXPORTER_OTLP_HEADERS must be a list of name=value pairs separated by commas; "no-equals-sign" is not one.');
  }, 120_000);
});
