import { fastTransport, json, sse, startLoopback, streamSse, type Loopback, type SseFrame } from '../../support/loopback-server';
import { AnthropicProvider, type AnthropicProviderSettings } from '../../../src/model/anthropic.provider';
import { ModelError } from '../../../src/model/model.errors';
import type { ModelRequest, RetryNotice } from '../../../src/model/model.types';

const KEY = 'sk-ant-test-0a1b2c3d4e5f60718293';

function provider(url: string, overrides: Partial<AnthropicProviderSettings> = {}): AnthropicProvider {
  return new AnthropicProvider({
    ref: 'anthropic:claude-test',
    baseUrl: url,
    model: 'claude-test',
    apiKey: KEY,
    version: '2023-06-01',
    maxTokens: 1024,
    transport: fastTransport,
    ...overrides,
  });
}

function request(overrides: Partial<ModelRequest> = {}): ModelRequest {
  return {
    messages: [
      { role: 'system', content: 'You are careful.' },
      { role: 'user', content: 'Fix the build.' },
      {
        role: 'assistant',
        content: 'Reading both.',
        toolCalls: [
          { id: 'toolu_1', name: 'Read', arguments: { path: 'a.ts' } },
          { id: 'toolu_2', name: 'Bash', arguments: { command: 'rm -rf /' } },
        ],
      },
      { role: 'tool', toolCallId: 'toolu_1', content: 'export const a = 1;' },
      { role: 'tool', toolCallId: 'toolu_2', content: 'denied by policy', isError: true },
    ],
    tools: [{ name: 'Read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } }],
    signal: new AbortController().signal,
    ...overrides,
  };
}

/** Frames exactly as the Messages API streams them, each with its `event:` line. */
const frames = (...list: Array<Record<string, unknown> & { type: string }>): SseFrame[] => list.map((data) => ({ event: data.type, data }));

const messageStart = {
  type: 'message_start',
  message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], model: 'claude-test', stop_reason: null, stop_sequence: null, usage: { input_tokens: 120, output_tokens: 1 } },
};

const toolTurn = sse(
  frames(
    messageStart,
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'ping' },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'I will read ' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'the file — “quoted”.' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_a', name: 'Read', input: {} } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"path": "sr' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: 'c/main.ts"}' } },
    { type: 'content_block_stop', index: 1 },
    { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_b', name: 'List', input: {} } },
    { type: 'content_block_stop', index: 2 },
    { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 57 } },
    { type: 'message_stop' },
  ),
);

const textTurn = sse(
  frames(
    messageStart,
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Done.' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3 } },
    { type: 'message_stop' },
  ),
);

describe('AnthropicProvider against a loopback server', () => {
  let server: Loopback | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('streams text and assembles tool_use input from input_json_delta fragments split across chunks', async () => {
    server = await startLoopback((res) => streamSse(res, toolTurn, { pieceBytes: 5 }));
    const deltas: string[] = [];
    const result = await provider(server.url).complete(request({ onTextDelta: (d) => deltas.push(d) }));

    expect(deltas).toEqual(['I will read ', 'the file — “quoted”.']);
    expect(result).toEqual({
      text: 'I will read the file — “quoted”.',
      toolCalls: [
        { id: 'toolu_a', name: 'Read', arguments: { path: 'src/main.ts' } },
        { id: 'toolu_b', name: 'List', arguments: {} },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 120, outputTokens: 57 },
    });
  });

  it('sends x-api-key, anthropic-version, a top-level system prompt and tool results as tool_result blocks', async () => {
    server = await startLoopback((res) => streamSse(res, textTurn));
    const result = await provider(server.url).complete(request());

    expect(result).toEqual({ text: 'Done.', toolCalls: [], stopReason: 'end_turn', usage: { inputTokens: 120, outputTokens: 3 } });
    const [sent] = server.requests;
    expect(sent?.path).toBe('/v1/messages');
    expect(sent?.headers['x-api-key']).toBe(KEY);
    expect(sent?.headers['anthropic-version']).toBe('2023-06-01');
    expect(sent?.headers).not.toHaveProperty('authorization');
    expect(sent?.body).toEqual({
      model: 'claude-test',
      max_tokens: 1024,
      stream: true,
      system: 'You are careful.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Fix the build.' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Reading both.' },
            { type: 'tool_use', id: 'toolu_1', name: 'Read', input: { path: 'a.ts' } },
            { type: 'tool_use', id: 'toolu_2', name: 'Bash', input: { command: 'rm -rf /' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'export const a = 1;' },
            { type: 'tool_result', tool_use_id: 'toolu_2', content: 'denied by policy', is_error: true },
          ],
        },
      ],
      tools: [{ name: 'Read', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }],
    });
  });

  it('reports tool input that is not valid JSON instead of failing the turn', async () => {
    const body = sse(
      frames(
        messageStart,
        { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_x', name: 'Bash', input: {} } },
        { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"command": ' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '}' } },
        { type: 'content_block_stop', index: 0 },
        { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } },
        { type: 'message_stop' },
      ),
    );
    server = await startLoopback((res) => streamSse(res, body));
    const result = await provider(server.url).complete(request());

    expect(result.toolCalls).toEqual([]);
    expect(result.malformedToolCalls).toEqual([{ id: 'toolu_x', name: 'Bash', rawArguments: '{"command": }', reason: expect.stringContaining('not valid JSON') }]);
    expect(result.stopReason).toBe('tool_use');
  });

  it('honours Retry-After on a 429, then succeeds', async () => {
    server = await startLoopback([
      (res) => json(res, 429, { type: 'error', error: { type: 'rate_limit_error', message: 'Number of request tokens has exceeded your rate limit' } }, { 'retry-after': '1' }),
      (res) => streamSse(res, textTurn),
    ]);
    const retries: RetryNotice[] = [];
    const result = await provider(server.url).complete(request({ onRetry: (n) => retries.push(n) }));

    expect(result.text).toBe('Done.');
    expect(retries).toEqual([{ attempt: 1, delayMs: 1000, reason: expect.stringContaining('rate limit') }]);
    const [first, second] = server.requests;
    expect((second?.receivedAt ?? 0) - (first?.receivedAt ?? 0)).toBeGreaterThanOrEqual(990);
  });

  it('retries an overloaded (529) service and gives up with a clear error when it stays down', async () => {
    server = await startLoopback((res) => json(res, 529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
    await expect(provider(server.url).complete(request())).rejects.toMatchObject({
      code: 'model_unavailable',
      status: 529,
      message: expect.stringMatching(/answered 529.*Overloaded.* Gave up after 3 attempts\./),
    });
    expect(server.requests).toHaveLength(3);
  });

  it('retries an overloaded_error event that arrives before any output', async () => {
    const overloaded = sse(frames({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
    server = await startLoopback([(res) => streamSse(res, overloaded), (res) => streamSse(res, textTurn)]);
    const result = await provider(server.url).complete(request());

    expect(result.text).toBe('Done.');
    expect(server.requests).toHaveLength(2);
  });

  it('does not retry an error event after text was shown, and says so', async () => {
    const body = sse(
      frames(
        messageStart,
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Half' } },
        { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
      ),
    );
    server = await startLoopback((res) => streamSse(res, body));
    await expect(provider(server.url).complete(request())).rejects.toMatchObject({
      code: 'model_unavailable',
      message: expect.stringContaining('Part of the answer had already been shown'),
    });
    expect(server.requests).toHaveLength(1);
  });

  it('does not retry an error event that would fail again', async () => {
    const invalid = sse(frames({ type: 'error', error: { type: 'invalid_request_error', message: 'messages: roles must alternate' } }));
    server = await startLoopback((res) => streamSse(res, invalid));
    await expect(provider(server.url).complete(request())).rejects.toMatchObject({
      code: 'model_stream_error',
      message: expect.stringContaining('reported invalid_request_error in the middle of its answer: messages: roles must alternate'),
    });
    expect(server.requests).toHaveLength(1);
  });

  it('aborts an idle stream as model_timeout', async () => {
    server = await startLoopback((res) => streamSse(res, sse(frames(messageStart)), { end: false }));
    await expect(provider(server.url, { transport: { ...fastTransport, idleTimeoutMs: 200 } }).complete(request())).rejects.toMatchObject({
      code: 'model_timeout',
      message: expect.stringContaining('idle timeout'),
    });
    expect(server.requests).toHaveLength(1);
  });

  it('stops at once when the caller aborts, and closes the connection', async () => {
    const body = sse(
      frames(
        messageStart,
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'text_delta', text: 'Working' },
        },
      ),
    );
    server = await startLoopback((res) => streamSse(res, body, { end: false }));
    const controller = new AbortController();
    const failure = provider(server.url).complete(request({ signal: controller.signal, onTextDelta: () => controller.abort(new Error('revoked by an administrator')) }));

    await expect(failure).rejects.toMatchObject({ code: 'model_aborted', message: expect.stringContaining('revoked by an administrator') });
    await server.requests[0]?.closed;
  });

  it('refuses to start when the signal is already aborted, without contacting the service', async () => {
    server = await startLoopback((res) => streamSse(res, textTurn));
    const controller = new AbortController();
    controller.abort();
    await expect(provider(server.url).complete(request({ signal: controller.signal }))).rejects.toMatchObject({ code: 'model_aborted' });
    expect(server.requests).toHaveLength(0);
  });

  it('never puts the API key in an error, even when the service echoes it back', async () => {
    server = await startLoopback((res, req) => json(res, 403, { type: 'error', error: { type: 'permission_error', message: `key ${String(req.headers['x-api-key'])} may not use this model` } }));
    const error = await provider(server.url)
      .complete(request())
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(ModelError);
    const failure = error as ModelError;
    expect(failure.code).toBe('model_auth_failed');
    expect(failure.message).toContain('key [redacted] may not use this model');
    expect(failure.message).not.toContain(KEY);
    expect(JSON.stringify(failure)).not.toContain(KEY);
  });

  it('fails clearly when the stream ends without message_stop', async () => {
    const body = sse(frames(messageStart, { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
    server = await startLoopback((res) => streamSse(res, body));
    await expect(provider(server.url, { transport: { ...fastTransport, maxRetries: 0 } }).complete(request())).rejects.toMatchObject({
      code: 'model_protocol_error',
      message: expect.stringContaining('closed the stream before the answer was complete'),
    });
  });

  it('skips event types it does not know, as the API versioning policy asks', async () => {
    const body = sse(
      frames(
        messageStart,
        { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hmm' } },
        { type: 'content_block_stop', index: 0 },
        { type: 'some_future_event', detail: 1 },
        { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Answer.' } },
        { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 4 } },
        { type: 'message_stop' },
      ),
    );
    server = await startLoopback((res) => streamSse(res, body));
    const result = await provider(server.url).complete(request());
    expect(result).toMatchObject({ text: 'Answer.', toolCalls: [], stopReason: 'end_turn' });
  });
});
