import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { json, openAiChunk, sse, startLoopback, streamSse, type Loopback, type RecordedRequest } from '../../apps/gateway/test/support/loopback-server';
import { containersOf, startStack, type Stack } from './harness';

/**
 * A session driven by an OpenAI-compatible model service (a loopback server speaking the real
 * streaming wire format) through the gateway's model configuration, with the real exec-host and
 * Docker. The model's key lives in the gateway's environment only: it goes to the model service and
 * nowhere else — not into the sandbox, the events, the audit log or the logs.
 */
const KEY = `sk-e2e-${randomBytes(18).toString('hex')}`;
let stack: Stack;
let model: Loopback;
let configDir: string;

const chunk = (delta: Record<string, unknown>, finish: string | null = null) => openAiChunk(delta, finish, 'fake-1');
const bashTurn = (id: string, command: string) =>
  sse([
    { data: chunk({ role: 'assistant', content: 'Looking at the environment. ' }) },
    { data: chunk({ tool_calls: [{ index: 0, id, type: 'function', function: { name: 'Bash', arguments: '{"comm' } }] }) },
    { data: chunk({ tool_calls: [{ index: 0, function: { arguments: `and":${JSON.stringify(command).slice(0, 5)}` } }] }) },
    { data: chunk({ tool_calls: [{ index: 0, function: { arguments: `${JSON.stringify(command).slice(5)}}` } }] }) },
    { data: chunk({}, 'tool_calls') },
    { data: '[DONE]' },
  ]);

beforeAll(async () => {
  model = await startLoopback([
    // The first attempt is rate limited: the provider waits as told and tries again.
    (res) => json(res, 429, { error: { message: 'slow down', type: 'rate_limit_error' } }, { 'retry-after-ms': '20' }),
    (res) => streamSse(res, bashTurn('call_env', 'env | sort')),
    // pid 1 (the keeper) is not the command's user: its environment is refused. It is the container's,
    // which every command inherits, so the first command's `env` shows it.
    (res) => streamSse(res, bashTurn('call_pid1', "tr '\\0' '\\n' < /proc/1/environ | sort")),
    (res) => streamSse(res, sse([{ data: chunk({ role: 'assistant', content: 'No model key in the sandbox.' }) }, { data: chunk({}, 'stop') }, { data: '[DONE]' }])),
  ]);
  configDir = mkdtempSync(join(tmpdir(), 'lemniscate-models-'));
  const config = join(configDir, 'models.yaml');
  writeFileSync(
    config,
    JSON.stringify({ maxRetries: 2, initialBackoffMs: 5, maxBackoffMs: 50, openaiCompatible: { fake: { baseUrl: `${model.url}/v1`, apiKeyEnv: 'E2E_MODEL_KEY', model: 'fake-1' } } }),
  );
  stack = await startStack({ gatewayEnv: { LEMNISCATE_MODELS_CONFIG: config, E2E_MODEL_KEY: KEY, LEMNISCATE_LOG_LEVEL: 'debug' } });
  await stack.publishPolicy({ version: 1, commands: { free: ['env', 'sort', 'tr'] } });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await model?.close();
  rmSync(configDir, { recursive: true, force: true });
});

it('the key reaches the model service and nothing else: not the sandbox, the events, the records, the audit log or the logs', async () => {
  const r = await stack.cli(['-p', 'check the environment', '--model', 'openai-compatible:fake', '--output-format', 'stream-json', '--no-apply']);
  expect(r.stderr).not.toMatch(/crash/i);
  expect(r.code).toBe(0);
  const events = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });
  expect(events.at(-1)).toMatchObject({ type: 'result', status: 'completed', exit_code: 0 });
  expect(events.at(-2)).toMatchObject({ type: 'session_completed' });
  const sessionId = events[0]!.sessionId as string;

  // The service was called with the key, retried after its 429, and saw the real tool results.
  expect(model.requests).toHaveLength(4);
  for (const req of model.requests as RecordedRequest[]) {
    expect(req.path).toBe('/v1/chat/completions');
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
  }
  expect(model.requests[1]!.body as { model: string; stream: boolean }).toMatchObject({ model: 'fake-1', stream: true });

  // The commands ran in the sandbox; the command's environment (the container's, pid 1's too) does not
  // hold the key, and pid 1's own is not the command's to read.
  const results = events.filter((e) => e.type === 'tool_result') as unknown as { stdout: string; stderr: string; exitCode: number }[];
  expect(results.map((e) => e.exitCode)).toEqual([0, 0]);
  expect(results[0]!.stdout).toMatch(/^PATH=/m);
  expect(results[1]!).toMatchObject({ stdout: '', stderr: expect.stringMatching(/\/proc\/1\/environ: Permission denied/) });
  for (const res of results) {
    expect(res.stdout).not.toContain(KEY);
    expect(res.stdout).not.toContain('E2E_MODEL_KEY');
    expect(res.stdout).not.toContain('LEMNISCATE_MODELS_CONFIG');
  }

  // Nowhere in what the platform shows or keeps.
  expect(r.stdout).not.toContain(KEY);
  expect(r.stderr).not.toContain(KEY);
  const session = await stack.api(stack.tokens.developer, 'GET', `/sessions/${sessionId}`);
  expect(session.json).toMatchObject({ status: 'completed', summary: 'No model key in the sandbox.' });
  expect(JSON.stringify(session.json)).not.toContain(KEY);
  const calls = await stack.api(stack.tokens.developer, 'GET', `/sessions/${sessionId}/tool-calls`);
  expect(calls.json).toHaveLength(2);
  expect(JSON.stringify(calls.json)).not.toContain(KEY);
  const audit = await fetch(`${stack.gatewayUrl}/api/v1/audit/export?sessionId=${sessionId}&format=jsonl`, { headers: { authorization: `Bearer ${stack.tokens.security}` } });
  const auditText = await audit.text();
  expect(audit.status).toBe(200);
  expect(auditText).toContain('session.configured');
  expect(auditText).toContain('openai-compatible:fake');
  expect(auditText).not.toContain(KEY);
  const logs = stack.logs();
  expect(logs.length).toBeGreaterThan(0);
  expect(logs).not.toContain(KEY);
  expect(containersOf(sessionId)).toEqual([]);
}, 120_000);
