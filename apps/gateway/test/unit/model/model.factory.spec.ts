import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sse, startLoopback, streamSse, type Loopback } from '../../support/loopback-server';
import { AnthropicProvider } from '../../../src/model/anthropic.provider';
import type { ModelsConfigInput } from '../../../src/model/model.config';
import { ModelError } from '../../../src/model/model.errors';
import { createModelProvider, parseModelRef } from '../../../src/model/model.factory';
import { OpenAiCompatibleProvider } from '../../../src/model/openai.provider';
import { ScriptedProvider } from '../../../src/model/scripted.provider';

const KEY = 'sk-config-only-5566778899';

/** The scripted model answers only when the configuration turns it on. */
const SCRIPTED_ON: ModelsConfigInput = { scripted: { enabled: true } };
describe('parseModelRef', () => {
  it.each([
    ['scripted:/srv/demo/script.json', { provider: 'scripted', script: '/srv/demo/script.json' }],
    ['scripted:C:/odd:path.json', { provider: 'scripted', script: 'C:/odd:path.json' }],
    ['openai:gpt-4o', { provider: 'openai', model: 'gpt-4o' }],
    ['anthropic:claude-sonnet-4-5', { provider: 'anthropic', model: 'claude-sonnet-4-5' }],
    ['openai-compatible:ollama', { provider: 'openai-compatible', name: 'ollama' }],
    ['openai-compatible:ollama:llama3.1:8b', { provider: 'openai-compatible', name: 'ollama', model: 'llama3.1:8b' }],
    [
      { provider: 'scripted', script: 'x.json' },
      { provider: 'scripted', script: 'x.json' },
    ],
    [
      { provider: 'anthropic', model: 'claude-x' },
      { provider: 'anthropic', model: 'claude-x' },
    ],
  ])('%j', (ref, expected) => {
    expect(parseModelRef(ref)).toEqual(expected);
  });

  it.each([
    ['gpt-4o', 'does not start with a known provider'],
    ['mystery:model', 'does not start with a known provider'],
    ['openai:', 'names no model after "openai:"'],
    ['scripted:', 'names no script path after "scripted:"'],
    ['openai-compatible:bad name', 'is not a valid service name'],
    ['openai-compatible:ollama:', 'names no model'],
    [42, 'must be a string'],
    [{ provider: 'openai' }, 'The model reference is not valid (model:'],
  ])('refuses %j with a sentence', (ref, text) => {
    expect(() => parseModelRef(ref)).toThrow(expect.objectContaining({ code: 'model_config_invalid', message: expect.stringContaining(text) }));
  });

  it('refuses a reference that tries to bring its own address or key', () => {
    expect(() => parseModelRef({ provider: 'openai', model: 'gpt-4o', apiKey: 'sk-attacker-000000', baseUrl: 'https://evil.example' })).toThrow(
      expect.objectContaining({
        code: 'model_config_invalid',
        message: 'A model reference cannot carry "apiKey", "baseUrl": addresses and keys come only from the gateway\'s configuration.',
      }),
    );
  });
});

describe('createModelProvider', () => {
  let dir: string;
  let server: Loopback | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lemni-models-'));
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  const failureOf = async (promise: Promise<unknown>): Promise<ModelError> => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ModelError);
    return error as ModelError;
  };

  it('builds a scripted provider from "scripted:PATH", resolving a relative path against the working directory', async () => {
    await writeFile(join(dir, 's.json'), JSON.stringify({ turns: [{ text: 'hi' }] }));
    const model = await createModelProvider('scripted:s.json', SCRIPTED_ON, { cwd: dir });
    expect(model).toBeInstanceOf(ScriptedProvider);
    expect(model.ref).toBe(`scripted:${join(dir, 's.json')}`);
    await expect(model.complete({ messages: [], tools: [], signal: new AbortController().signal })).resolves.toMatchObject({ text: 'hi' });
  });

  it('accepts the object form {"provider":"scripted","script":PATH}', async () => {
    await writeFile(join(dir, 's.json'), JSON.stringify({ turns: [] }));
    await expect(createModelProvider({ provider: 'scripted', script: join(dir, 's.json') }, SCRIPTED_ON)).resolves.toBeInstanceOf(ScriptedProvider);
  });

  it('reports a bad script when the provider is created, not at the first turn', async () => {
    await writeFile(join(dir, 's.json'), '{"turns": 3}');
    await expect(createModelProvider(`scripted:${join(dir, 's.json')}`, SCRIPTED_ON)).rejects.toMatchObject({
      code: 'model_script_invalid',
      message: `The model script ${join(dir, 's.json')} is invalid: turns: Invalid input: expected array, received number.`,
    });
  });

  it('reads scripts only from the configured directories, symlinks resolved', async () => {
    const allowed = join(dir, 'scripts');
    await mkdir(allowed);
    await writeFile(join(allowed, 'ok.json'), JSON.stringify({ turns: [] }));
    await writeFile(join(dir, 'outside.json'), JSON.stringify({ turns: [] }));
    await symlink(join(dir, 'outside.json'), join(allowed, 'link.json'));
    const config: ModelsConfigInput = { scripted: { enabled: true, directories: [allowed] } };

    await expect(createModelProvider(`scripted:${join(allowed, 'ok.json')}`, config)).resolves.toBeInstanceOf(ScriptedProvider);
    for (const path of [join(dir, 'outside.json'), join(allowed, 'link.json'), join(allowed, '..', 'outside.json')]) {
      const failure = await failureOf(createModelProvider(`scripted:${path}`, config));
      expect(failure.code).toBe('model_config_invalid');
      expect(failure.message).toContain('is outside the directories this gateway reads scripts from');
    }
  });

  it.each<[string, ModelsConfigInput]>([
    ['disables it', { scripted: { enabled: false } }],
    ['says nothing about it (production default)', {}],
    ['only restricts its directories', { scripted: { directories: ['/tmp'] } }],
  ])('refuses the scripted model when the configuration %s', async (_, config) => {
    await writeFile(join(dir, 's.json'), JSON.stringify({ turns: [] }));
    await expect(createModelProvider(`scripted:${join(dir, 's.json')}`, config)).rejects.toMatchObject({
      code: 'model_config_invalid',
      message:
        "The scripted model is not enabled in this gateway's configuration: it answers only when the model configuration (LEMNISCATE_MODELS_CONFIG) sets scripted.enabled: true, for demos and tests.",
    });
  });

  it('takes the OpenAI key from the configuration or the environment variable it names', async () => {
    const direct = await createModelProvider('openai:gpt-4o', { openai: { apiKey: KEY } });
    expect(direct).toBeInstanceOf(OpenAiCompatibleProvider);
    expect(direct.ref).toBe('openai:gpt-4o');
    const fromEnv = await createModelProvider('openai:gpt-4o', { openai: { apiKeyEnv: 'TEST_OPENAI_KEY' } }, { env: { TEST_OPENAI_KEY: KEY } });
    expect(fromEnv).toBeInstanceOf(OpenAiCompatibleProvider);
  });

  it('explains a missing key, an unset variable and an unusable key, without ever printing the key', async () => {
    await expect(createModelProvider('anthropic:claude-x', {})).rejects.toMatchObject({
      code: 'model_config_invalid',
      message: "No API key is configured for models.anthropic: set models.anthropic.apiKey or models.anthropic.apiKeyEnv in the gateway's configuration.",
    });
    await expect(createModelProvider('anthropic:claude-x', { anthropic: { apiKeyEnv: 'NOPE_KEY' } }, { env: {} })).rejects.toMatchObject({
      message: "models.anthropic.apiKeyEnv names NOPE_KEY, which is not set in the gateway's environment.",
    });
    const badKey = `${KEY}\r\nX-Injected: 1`;
    const failure = await failureOf(createModelProvider('anthropic:claude-x', { anthropic: { apiKey: badKey } }));
    expect(failure.message).toBe('The API key configured for models.anthropic is not usable: it must be at least 8 visible ASCII characters, without spaces or line breaks.');
    expect(failure.message).not.toContain(KEY);
  });

  it('refuses to send a key over plain http to another machine unless the configuration allows it', async () => {
    const config: ModelsConfigInput = { openaiCompatible: { lan: { baseUrl: 'http://10.0.0.5:8000/v1', model: 'm', apiKey: KEY } } };
    await expect(createModelProvider('openai-compatible:lan', config)).rejects.toMatchObject({
      code: 'model_config_invalid',
      message: expect.stringContaining('uses plain http to 10.0.0.5, which would send the API key unencrypted'),
    });
    await expect(createModelProvider('openai-compatible:lan', { ...config, allowInsecureHttp: true })).resolves.toBeInstanceOf(OpenAiCompatibleProvider);
    // Without a key there is nothing to protect (a local Ollama, say).
    await expect(createModelProvider('openai-compatible:lan', { openaiCompatible: { lan: { baseUrl: 'http://10.0.0.5:8000/v1', model: 'm' } } })).resolves.toBeInstanceOf(OpenAiCompatibleProvider);
  });

  it('refuses extra headers that would replace the ones the gateway sets', async () => {
    const failure = await failureOf(createModelProvider('openai:gpt-4o', { openai: { apiKey: KEY, headers: { Authorization: `Bearer ${KEY}` } } }));
    expect(failure.message).toContain('models.openai.headers.Authorization: this header is set by the gateway itself');
    expect(failure.message).not.toContain(KEY);
    await expect(createModelProvider('openai:gpt-4o', { openai: { apiKey: KEY, headers: { 'OpenAI-Organization': 'org-1' } } })).resolves.toBeInstanceOf(OpenAiCompatibleProvider);
  });

  it('names the configured services when an unknown one is asked for, and requires a model', async () => {
    const config: ModelsConfigInput = { openaiCompatible: { ollama: { baseUrl: 'http://127.0.0.1:11434/v1' } } };
    await expect(createModelProvider('openai-compatible:vllm', config)).rejects.toMatchObject({
      message: 'No OpenAI-compatible service named "vllm" is configured (configured: ollama); add it under models.openaiCompatible.',
    });
    await expect(createModelProvider('openai-compatible:ollama', config)).rejects.toMatchObject({
      message: 'The service "ollama" has no default model: use "openai-compatible:ollama:MODEL" or set its "model".',
    });
  });

  it('reports an invalid configuration by field, without echoing values', async () => {
    const failure = await failureOf(createModelProvider('openai:gpt-4o', { openai: { baseUrl: `ftp://${KEY}@host`, apiKey: KEY }, idleTimeoutMs: -1 }));
    expect(failure.code).toBe('model_config_invalid');
    expect(failure.message).toContain('models.idleTimeoutMs:');
    expect(failure.message).toContain('models.openai.baseUrl: must be an http:// or https:// URL');
    expect(failure.message).not.toContain(KEY);
    await expect(createModelProvider('openai:gpt-4o', { openaiCompatible: { 'my service': { baseUrl: 'http://127.0.0.1:1/v1' } } })).rejects.toMatchObject({
      message: 'The models configuration is invalid (models.openaiCompatible.my service: service names are letters, digits, "-" and "_").',
    });
  });

  it('wires an openai-compatible service end to end: base URL, model, key and timeouts from the configuration', async () => {
    const done = sse([{ data: { choices: [{ index: 0, delta: { content: 'pong' }, finish_reason: 'stop' }] } }, { data: '[DONE]' }]);
    server = await startLoopback((res) => streamSse(res, done));
    const model = await createModelProvider(
      'openai-compatible:local:qwen2.5-coder:7b',
      { openaiCompatible: { local: { baseUrl: `${server.url}/v1`, apiKeyEnv: 'LOCAL_KEY', maxTokens: 256, idleTimeoutMs: 1_000, maxRetries: 0 } } },
      { env: { LOCAL_KEY: KEY } },
    );
    const result = await model.complete({ messages: [{ role: 'user', content: 'ping' }], tools: [], signal: new AbortController().signal });

    expect(result.text).toBe('pong');
    expect(model.ref).toBe('openai-compatible:local:qwen2.5-coder:7b');
    expect(server.requests[0]?.path).toBe('/v1/chat/completions');
    expect(server.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(server.requests[0]?.body).toMatchObject({ model: 'qwen2.5-coder:7b', max_tokens: 256 });
  });

  it('asks OpenAI itself for max_completion_tokens, through the configured base URL', async () => {
    const done = sse([{ data: { choices: [{ index: 0, delta: { content: 'ok' }, finish_reason: 'stop' }] } }, { data: '[DONE]' }]);
    server = await startLoopback((res) => streamSse(res, done));
    const model = await createModelProvider('openai:gpt-5', { openai: { baseUrl: `${server.url}/v1`, apiKey: KEY, maxTokens: 100 } });
    await model.complete({ messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal });
    expect(server.requests[0]?.body).toMatchObject({ model: 'gpt-5', max_completion_tokens: 100 });
    expect(server.requests[0]?.body).not.toHaveProperty('max_tokens');
  });

  it('wires Anthropic with its defaults', async () => {
    const model = await createModelProvider('anthropic:claude-opus-4', { anthropic: { apiKey: KEY } });
    expect(model).toBeInstanceOf(AnthropicProvider);
    expect(model.ref).toBe('anthropic:claude-opus-4');
  });
});
