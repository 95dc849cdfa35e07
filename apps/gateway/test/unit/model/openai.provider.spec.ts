import { fastTransport, json, openAiChunk, sse, startLoopback, streamSse, type Loopback } from '../../support/loopback-server';
import { ModelError } from '../../../src/model/model.errors';
import type { ModelRequest, RetryNotice } from '../../../src/model/model.types';
import { OpenAiCompatibleProvider, type OpenAiProviderSettings } from '../../../src/model/openai.provider';

const KEY = 'sk-test-9f8e7d6c5b4a39281706';

function provider(url: string, overrides: Partial<OpenAiProviderSettings> = {}): OpenAiCompatibleProvider {
  return new OpenAiCompatibleProvider({
    ref: 'openai:gpt-test',
    baseUrl: `${url}/v1`,
    model: 'gpt-test',
    apiKey: KEY,
    includeUsage: true,
    maxTokensField: 'max_tokens',
    transport: fastTransport,
    ...overrides,
  });
}

function request(overrides: Partial<ModelRequest> = {}): ModelRequest {
  return {
    messages: [
      { role: 'system', content: 'You are careful.' },
      { role: 'user', content: 'Run the tests.' },
      { role: 'assistant', content: 'Running.', toolCalls: [{ id: 'call_0', name: 'Bash', arguments: { command: 'npm test' } }] },
      { role: 'tool', toolCallId: 'call_0', content: 'ok' },
    ],
    tools: [{ name: 'Bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } }],
    signal: new AbortController().signal,
    ...overrides,
  };
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) => openAiChunk(delta, finish);

/** A turn in OpenAI's real streaming shape: text, then two parallel tool calls whose arguments arrive in fragments. */
const toolTurn = sse([
  { data: chunk({ role: 'assistant', content: '' }) },
  { data: chunk({ content: 'Let me ' }) },
  { data: chunk({ content: 'look — ünïcödé.' }) },
  { data: chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'Read', arguments: '' } }] }) },
  { data: chunk({ tool_calls: [{ index: 0, function: { arguments: '{"pa' } }] }) },
  { data: chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'Bash', arguments: '{"command":' } }] }) },
  { data: chunk({ tool_calls: [{ index: 0, function: { arguments: 'th":"src/a.ts"}' } }] }) },
  { data: chunk({ tool_calls: [{ index: 1, function: { arguments: '"echo \\"hi\\""}' } }] }) },
  { data: chunk({}, 'tool_calls') },
  { data: { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-test', choices: [], usage: { prompt_tokens: 42, completion_tokens: 17, total_tokens: 59 } } },
  { data: '[DONE]' },
]);

const textTurn = sse([{ data: chunk({ role: 'assistant', content: 'All good.' }) }, { data: chunk({}, 'stop') }, { data: '[DONE]' }]);

describe('OpenAiCompatibleProvider against a loopback server', () => {
  let server: Loopback | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('streams text deltas and assembles parallel tool calls from fragments split across chunks', async () => {
    server = await startLoopback((res) => streamSse(res, toolTurn, { pieceBytes: 7 }));
    const deltas: string[] = [];
    const result = await provider(server.url).complete(request({ onTextDelta: (d) => deltas.push(d) }));

    expect(deltas).toEqual(['Let me ', 'look — ünïcödé.']);
    expect(result).toEqual({
      text: 'Let me look — ünïcödé.',
      toolCalls: [
        { id: 'call_a', name: 'Read', arguments: { path: 'src/a.ts' } },
        { id: 'call_b', name: 'Bash', arguments: { command: 'echo "hi"' } },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 42, outputTokens: 17 },
    });
  });

  it('sends the chat completions request with the bearer key, tools and the conversation in wire form', async () => {
    server = await startLoopback((res) => streamSse(res, textTurn));
    await provider(server.url, { maxTokens: 512 }).complete(request());

    const [sent] = server.requests;
    expect(sent?.method).toBe('POST');
    expect(sent?.path).toBe('/v1/chat/completions');
    expect(sent?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(sent?.body).toEqual({
      model: 'gpt-test',
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 512,
      messages: [
        { role: 'system', content: 'You are careful.' },
        { role: 'user', content: 'Run the tests.' },
        {
          role: 'assistant',
          content: 'Running.',
          tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'Bash', arguments: '{"command":"npm test"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_0', content: 'ok' },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'Bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
        },
      ],
    });
  });

  it('omits tools for a text-only turn and sends no authorization header without a key', async () => {
    server = await startLoopback((res) => streamSse(res, textTurn));
    const result = await provider(server.url, { apiKey: undefined, includeUsage: false }).complete(request({ tools: [] }));

    expect(result).toEqual({ text: 'All good.', toolCalls: [], stopReason: 'end_turn' });
    const body = server.requests[0]?.body as Record<string, unknown>;
    expect(body).not.toHaveProperty('tools');
    expect(body).not.toHaveProperty('stream_options');
    expect(server.requests[0]?.headers).not.toHaveProperty('authorization');
  });

  it('reports tool-call arguments that are not a JSON object instead of failing the turn', async () => {
    const body = sse([
      { data: chunk({ tool_calls: [{ index: 0, id: 'call_bad', type: 'function', function: { name: 'Bash', arguments: '{"command": "ls' } }] }) },
      { data: chunk({ tool_calls: [{ index: 1, id: 'call_arr', type: 'function', function: { name: 'Read', arguments: '["x"]' } }] }) },
      { data: chunk({ tool_calls: [{ index: 2, id: 'call_ok', type: 'function', function: { name: 'List', arguments: '{"path":"."}' } }] }) },
      { data: chunk({}, 'tool_calls') },
      { data: '[DONE]' },
    ]);
    server = await startLoopback((res) => streamSse(res, body));
    const result = await provider(server.url).complete(request());

    expect(result.toolCalls).toEqual([{ id: 'call_ok', name: 'List', arguments: { path: '.' } }]);
    expect(result.malformedToolCalls).toEqual([
      { id: 'call_bad', name: 'Bash', rawArguments: '{"command": "ls', reason: expect.stringContaining('not valid JSON') },
      { id: 'call_arr', name: 'Read', rawArguments: '["x"]', reason: 'the arguments must be a JSON object, not an array' },
    ]);
    expect(result.stopReason).toBe('tool_use');
  });

  it('waits as long as Retry-After asks after a 429, then succeeds', async () => {
    server = await startLoopback([(res) => json(res, 429, { error: { message: 'Rate limit reached', type: 'rate_limit_exceeded' } }, { 'retry-after': '1' }), (res) => streamSse(res, textTurn)]);
    const retries: RetryNotice[] = [];
    const result = await provider(server.url).complete(request({ onRetry: (n) => retries.push(n) }));

    expect(result.text).toBe('All good.');
    expect(server.requests).toHaveLength(2);
    expect(retries).toEqual([{ attempt: 1, delayMs: 1000, reason: expect.stringContaining('429') }]);
    const [first, second] = server.requests;
    expect((second?.receivedAt ?? 0) - (first?.receivedAt ?? 0)).toBeGreaterThanOrEqual(990);
  });

  it('does not wait when Retry-After asks for longer than the configured maximum', async () => {
    server = await startLoopback((res) => json(res, 429, { error: { message: 'Quota exceeded' } }, { 'retry-after': '3600' }));
    await expect(provider(server.url).complete(request())).rejects.toMatchObject({
      code: 'model_rate_limited',
      message: expect.stringContaining('The service asked to wait 3600 s, more than the configured maximum of 5 s, so the request was not retried.'),
    });
    expect(server.requests).toHaveLength(1);
  });

  it('gives up after the configured retries when the service keeps answering 500, with a clear error', async () => {
    server = await startLoopback((res) => json(res, 500, { error: { message: 'The server had an error while processing your request.' } }));
    const failure = provider(server.url).complete(request());

    await expect(failure).rejects.toMatchObject({
      code: 'model_unavailable',
      status: 500,
      message: expect.stringMatching(/answered 500 Internal Server Error: The server had an error .* Gave up after 3 attempts\./),
    });
    expect(server.requests).toHaveLength(3);
  });

  it('does not retry a request the service rejects as invalid', async () => {
    server = await startLoopback((res) => json(res, 400, { error: { message: "The model 'gpt-nope' does not exist" } }));
    await expect(provider(server.url).complete(request())).rejects.toMatchObject({
      code: 'model_request_rejected',
      message: expect.stringContaining("The model 'gpt-nope' does not exist"),
    });
    expect(server.requests).toHaveLength(1);
  });

  it('aborts an idle stream as model_timeout', async () => {
    // Headers and a first delta, then silence.
    server = await startLoopback((res) => streamSse(res, sse([{ data: chunk({ content: 'Thinking' }) }]), { end: false }));
    const started = Date.now();
    const failure = provider(server.url, { transport: { ...fastTransport, idleTimeoutMs: 200 } }).complete(request());

    await expect(failure).rejects.toMatchObject({ code: 'model_timeout', message: expect.stringContaining('sent nothing for 200 ms') });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(server.requests).toHaveLength(1);
    await server.requests[0]?.closed;
  });

  it('aborts as model_timeout when the service never answers at all', async () => {
    server = await startLoopback(() => undefined);
    await expect(provider(server.url, { transport: { ...fastTransport, idleTimeoutMs: 150 } }).complete(request())).rejects.toMatchObject({
      code: 'model_timeout',
    });
  });

  it('stops at once when the caller aborts, and closes the connection', async () => {
    server = await startLoopback((res) => streamSse(res, sse([{ data: chunk({ content: 'Working' }) }]), { end: false }));
    const controller = new AbortController();
    const failure = provider(server.url).complete(request({ signal: controller.signal, onTextDelta: () => controller.abort('session stopped') }));

    await expect(failure).rejects.toMatchObject({ code: 'model_aborted', message: expect.stringContaining('session stopped') });
    await server.requests[0]?.closed;
  });

  it('never puts the API key in an error, even when the service echoes it back', async () => {
    server = await startLoopback((res, req) => json(res, 401, { error: { message: `Incorrect API key provided: ${String(req.headers.authorization)}` } }));
    const error = await provider(server.url)
      .complete(request())
      .then(
        () => undefined,
        (e: unknown) => e,
      );

    expect(error).toBeInstanceOf(ModelError);
    const failure = error as ModelError;
    expect(failure.code).toBe('model_auth_failed');
    expect(failure.message).toContain('the configured API key was refused');
    expect(failure.message).toContain('[redacted]');
    expect(failure.message).not.toContain(KEY);
    expect(JSON.stringify(failure)).not.toContain(KEY);
    expect(failure.stack ?? '').not.toContain(KEY);
  });

  it('reports an error the service sends inside the stream', async () => {
    const body = sse([{ data: chunk({ content: 'Partial' }) }, { data: { error: { message: 'upstream model crashed', type: 'server_error' } } }]);
    server = await startLoopback((res) => streamSse(res, body));
    await expect(provider(server.url).complete(request())).rejects.toMatchObject({
      code: 'model_stream_error',
      message: expect.stringContaining('upstream model crashed'),
    });
    // Text had already been passed on, so a retry would have repeated it.
    expect(server.requests).toHaveLength(1);
  });

  it('retries a stream cut before anything was shown, and fails clearly when it keeps being cut', async () => {
    server = await startLoopback((res) => streamSse(res, sse([{ data: chunk({ role: 'assistant' }) }])));
    await expect(provider(server.url).complete(request())).rejects.toMatchObject({
      code: 'model_protocol_error',
      message: expect.stringContaining('closed the stream before the answer was complete'),
    });
    expect(server.requests).toHaveLength(3);
  });

  it('refuses an answer that is not an event stream', async () => {
    server = await startLoopback((res) => json(res, 200, { choices: [{ message: { content: 'hi' } }] }));
    await expect(provider(server.url, { transport: { ...fastTransport, maxRetries: 0 } }).complete(request())).rejects.toMatchObject({
      code: 'model_protocol_error',
      message: expect.stringContaining('instead of an event stream'),
    });
  });

  it('does not follow a redirect, so the key cannot travel elsewhere', async () => {
    server = await startLoopback((res) => {
      res.writeHead(307, { location: 'http://127.0.0.1:9/steal' });
      res.end();
    });
    await expect(provider(server.url).complete(request())).rejects.toMatchObject({
      code: 'model_request_rejected',
      message: expect.stringContaining('Redirects are not followed'),
    });
    expect(server.requests).toHaveLength(1);
  });

  it('reports an unreachable service as model_unavailable after retrying', async () => {
    const closed = await startLoopback(() => undefined);
    const url = closed.url;
    await closed.close();
    const retries: RetryNotice[] = [];
    await expect(provider(url).complete(request({ onRetry: (n) => retries.push(n) }))).rejects.toMatchObject({
      code: 'model_unavailable',
      message: expect.stringMatching(/connection to the model service at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions failed .*ECONNREFUSED/),
    });
    expect(retries).toHaveLength(2);
  });
});
