import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { z } from 'zod';
import { AnthropicProvider } from './anthropic.provider';
import type { TransportSettings } from './http-transport';
import { ModelsConfig, PROVIDER_NAME, type ModelsConfigInput } from './model.config';
import { ModelError } from './model.errors';
import type { ModelProvider } from './model.types';
import { OpenAiCompatibleProvider } from './openai.provider';
import { summarise } from './streaming-provider';
import { ScriptedProvider, loadModelScript } from './scripted.provider';

/** What a model reference names once parsed. It never carries a URL or a key. */
export type ModelRef =
  { provider: 'scripted'; script: string } | { provider: 'openai'; model: string } | { provider: 'anthropic'; model: string } | { provider: 'openai-compatible'; name: string; model?: string };

const REF_PROVIDERS = ['scripted', 'openai', 'anthropic', 'openai-compatible'] as const;

const FORBIDDEN_REF_KEYS = ['apiKey', 'apiKeyEnv', 'api_key', 'key', 'baseUrl', 'base_url', 'url', 'headers'];

const RefObject = z.discriminatedUnion('provider', [
  z.strictObject({ provider: z.literal('scripted'), script: z.string().min(1, 'the script path is empty') }),
  z.strictObject({ provider: z.literal('openai'), model: z.string().min(1) }),
  z.strictObject({ provider: z.literal('anthropic'), model: z.string().min(1) }),
  z.strictObject({ provider: z.literal('openai-compatible'), name: z.string().regex(PROVIDER_NAME), model: z.string().min(1).optional() }),
]);

/**
 * Parses `scripted:PATH`, `openai:MODEL`, `anthropic:MODEL`, `openai-compatible:NAME[:MODEL]` or
 * the object form `{"provider":"scripted","script":PATH}` (and its siblings).
 */
export function parseModelRef(ref: unknown): ModelRef {
  if (typeof ref === 'string') return parseRefString(ref.trim());
  if (ref !== null && typeof ref === 'object' && !Array.isArray(ref)) {
    const smuggled = Object.keys(ref).filter((k) => FORBIDDEN_REF_KEYS.includes(k));
    if (smuggled.length > 0) {
      throw configError(`A model reference cannot carry ${smuggled.map((k) => `"${k}"`).join(', ')}: addresses and keys come only from the gateway's configuration.`);
    }
    const parsed = RefObject.safeParse(ref);
    if (!parsed.success) throw configError(`The model reference is not valid (${summarise(parsed.error)}).`);
    return parsed.data;
  }
  throw configError('A model reference must be a string such as "anthropic:MODEL" or an object with a "provider" field.');
}

function parseRefString(ref: string): ModelRef {
  const colon = ref.indexOf(':');
  const provider = colon === -1 ? ref : ref.slice(0, colon);
  const rest = colon === -1 ? '' : ref.slice(colon + 1).trim();
  const known = `Known providers: ${REF_PROVIDERS.join(', ')}`;
  if (!(REF_PROVIDERS as readonly string[]).includes(provider)) {
    throw configError(`The model reference "${ref}" does not start with a known provider. ${known}, e.g. "anthropic:MODEL" or "scripted:/path/script.json".`);
  }
  if (rest === '') throw configError(`The model reference "${ref}" names no ${provider === 'scripted' ? 'script path' : 'model'} after "${provider}:".`);
  switch (provider) {
    case 'scripted':
      return { provider, script: rest };
    case 'openai':
    case 'anthropic':
      return { provider, model: rest };
    default: {
      // Model names may contain ":" (Ollama's `llama3:8b`), so only the first one separates the name.
      const sep = rest.indexOf(':');
      const name = sep === -1 ? rest : rest.slice(0, sep);
      const model = sep === -1 ? undefined : rest.slice(sep + 1);
      if (!PROVIDER_NAME.test(name)) throw configError(`"${name}" is not a valid service name in "${ref}": use letters, digits, "-" and "_".`);
      if (model === '') throw configError(`The model reference "${ref}" ends with ":" but names no model.`);
      return { provider: 'openai-compatible', name, ...(model ? { model } : {}) };
    }
  }
}

export interface FactoryOptions {
  /** The gateway's environment, for `apiKeyEnv`. */
  env?: NodeJS.ProcessEnv;
  /** Relative script paths are resolved against this directory. */
  cwd?: string;
}

/**
 * Builds the provider a reference names, with everything else from the configuration. Fails with
 * `model_config_invalid` (or `model_script_invalid`) and a sentence naming what to fix.
 */
export async function createModelProvider(ref: unknown, configInput: ModelsConfigInput | ModelsConfig, options: FactoryOptions = {}): Promise<ModelProvider> {
  const config = parseConfig(configInput);
  const parsed = parseModelRef(ref);
  const env = options.env ?? process.env;
  switch (parsed.provider) {
    case 'scripted':
      return createScripted(parsed.script, config, options.cwd ?? process.cwd());
    case 'openai': {
      const section = config.openai ?? ModelsConfigDefaults.openai();
      return new OpenAiCompatibleProvider({
        ref: `openai:${parsed.model}`,
        model: parsed.model,
        ...connection('models.openai', section, config, env, true),
        maxTokens: section.maxTokens,
        maxTokensField: 'max_completion_tokens',
        includeUsage: section.includeUsage,
      });
    }
    case 'openai-compatible': {
      const section = config.openaiCompatible[parsed.name];
      if (!section) {
        const names = Object.keys(config.openaiCompatible);
        throw configError(`No OpenAI-compatible service named "${parsed.name}" is configured${names.length > 0 ? ` (configured: ${names.join(', ')})` : ''}; add it under models.openaiCompatible.`);
      }
      const model = parsed.model ?? section.model;
      if (!model) throw configError(`The service "${parsed.name}" has no default model: use "openai-compatible:${parsed.name}:MODEL" or set its "model".`);
      return new OpenAiCompatibleProvider({
        ref: `openai-compatible:${parsed.name}:${model}`,
        model,
        // Local servers (Ollama, llama.cpp) usually need no key.
        ...connection(`models.openaiCompatible.${parsed.name}`, section, config, env, false),
        maxTokens: section.maxTokens,
        maxTokensField: 'max_tokens',
        includeUsage: section.includeUsage,
      });
    }
    case 'anthropic': {
      const section = config.anthropic ?? ModelsConfigDefaults.anthropic();
      const link = connection('models.anthropic', section, config, env, true);
      return new AnthropicProvider({
        ref: `anthropic:${parsed.model}`,
        model: parsed.model,
        ...link,
        apiKey: link.apiKey as string,
        version: section.version,
        maxTokens: section.maxTokens,
      });
    }
  }
}

const ModelsConfigDefaults = {
  openai: () => ModelsConfig.shape.openai.unwrap().parse({}),
  anthropic: () => ModelsConfig.shape.anthropic.unwrap().parse({}),
};

function parseConfig(input: ModelsConfigInput | ModelsConfig): ModelsConfig {
  const parsed = ModelsConfig.safeParse(input);
  // Issue messages name fields, never their values, so a misplaced key cannot leak through here.
  if (!parsed.success) throw configError(`The models configuration is invalid (${summariseConfig(parsed.error)}).`);
  return parsed.data;
}

function summariseConfig(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((i) => `models${i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')}: ${i.message}`)
    .join('; ');
}

type KeyedSection = { apiKey?: string; apiKeyEnv?: string };
type TransportOverrides = Partial<Omit<TransportSettings, 'label' | 'secrets' | 'random'>>;
type ServiceSection = KeyedSection & TransportOverrides & { baseUrl: string; headers?: Record<string, string> };

/** What every HTTP provider takes from its section: the address, the key (checked before it is ever sent), headers and transport. */
function connection(where: string, section: ServiceSection, config: ModelsConfig, env: NodeJS.ProcessEnv, keyRequired: boolean) {
  const apiKey = resolveKey(where, section, env, keyRequired);
  checkTransportSecurity(where, section.baseUrl, apiKey, config.allowInsecureHttp);
  return { baseUrl: section.baseUrl, apiKey, headers: section.headers, transport: transport(config, section) };
}

const USABLE_KEY = /^[\x21-\x7e]{8,}$/;

function resolveKey(where: string, section: KeyedSection, env: NodeJS.ProcessEnv, required: boolean): string | undefined {
  let key = section.apiKey;
  if (key === undefined && section.apiKeyEnv) {
    key = env[section.apiKeyEnv];
    if (key === undefined || key === '') throw configError(`${where}.apiKeyEnv names ${section.apiKeyEnv}, which is not set in the gateway's environment.`);
  }
  if (key === undefined) {
    if (required) throw configError(`No API key is configured for ${where}: set ${where}.apiKey or ${where}.apiKeyEnv in the gateway's configuration.`);
    return undefined;
  }
  // Checked here so a bad key is refused by a message of ours, not by an HTTP library quoting the header.
  if (!USABLE_KEY.test(key)) {
    throw configError(`The API key configured for ${where} is not usable: it must be at least 8 visible ASCII characters, without spaces or line breaks.`);
  }
  return key;
}

function checkTransportSecurity(where: string, baseUrl: string, apiKey: string | undefined, allowInsecureHttp: boolean): void {
  const url = new URL(baseUrl);
  if (url.username || url.password) throw configError(`${where}.baseUrl must not contain credentials; use apiKey or apiKeyEnv.`);
  if (url.protocol === 'http:' && apiKey && !isLoopback(url.hostname) && !allowInsecureHttp) {
    throw configError(`${where}.baseUrl uses plain http to ${url.hostname}, which would send the API key unencrypted; use https, or set models.allowInsecureHttp if the network is trusted.`);
  }
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

function transport(config: ModelsConfig, section: TransportOverrides): Omit<TransportSettings, 'label' | 'secrets'> {
  return {
    idleTimeoutMs: section.idleTimeoutMs ?? config.idleTimeoutMs,
    maxRetries: section.maxRetries ?? config.maxRetries,
    initialBackoffMs: section.initialBackoffMs ?? config.initialBackoffMs,
    maxBackoffMs: section.maxBackoffMs ?? config.maxBackoffMs,
    maxRetryAfterMs: section.maxRetryAfterMs ?? config.maxRetryAfterMs,
  };
}

async function createScripted(scriptPath: string, config: ModelsConfig, cwd: string): Promise<ModelProvider> {
  if (!config.scripted.enabled)
    throw configError(
      "The scripted model is not enabled in this gateway's configuration: it answers only when the model configuration (LEMNISCATE_MODELS_CONFIG) sets scripted.enabled: true, for demos and tests.",
    );
  const path = resolve(cwd, scriptPath);
  const allowed = config.scripted.directories;
  if (allowed) {
    // Symlinks are resolved first so a link inside an allowed directory cannot point outside it.
    const real = await realpath(path).catch(() => path);
    const roots = await Promise.all(allowed.map((d) => realpath(resolve(cwd, d)).catch(() => resolve(cwd, d))));
    if (!roots.some((root) => isInside(real, root))) {
      throw configError(`The model script ${path} is outside the directories this gateway reads scripts from (${allowed.join(', ')}).`);
    }
  }
  const script = await loadModelScript(path);
  return new ScriptedProvider(script, path);
}

function isInside(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function configError(message: string): ModelError {
  return new ModelError('model_config_invalid', message);
}
