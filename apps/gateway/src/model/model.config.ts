import { z } from 'zod';

/**
 * The `models:` section of the gateway's configuration. Base URLs, keys, timeouts and retries
 * live here and only here (X1): a model reference names a provider and a model, nothing more.
 */

const Transport = {
  /** A request that receives nothing for this long is aborted as `model_timeout` (X4). */
  idleTimeoutMs: z.number().int().positive().optional(),
  maxRetries: z.number().int().min(0).max(10).optional(),
  initialBackoffMs: z.number().int().min(0).optional(),
  maxBackoffMs: z.number().int().min(0).optional(),
  maxRetryAfterMs: z.number().int().min(0).optional(),
};

const RESERVED_HEADERS = ['authorization', 'x-api-key', 'anthropic-version', 'content-type', 'accept', 'host', 'content-length'];

// Key problems are reported per header name; a record's own key errors would only say "Invalid key in record".
const Headers = z.record(z.string(), z.string().regex(/^[\x20-\x7e]*$/, 'header values are printable ASCII on one line')).superRefine((headers, ctx) => {
  for (const name of Object.keys(headers)) {
    if (!/^[A-Za-z0-9-]+$/.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'header names are letters, digits and "-"' });
    else if (RESERVED_HEADERS.includes(name.toLowerCase())) {
      ctx.addIssue({ code: 'custom', path: [name], message: 'this header is set by the gateway itself (put a key in apiKey or apiKeyEnv)' });
    }
  }
});

const KeySource = {
  /** The key itself, for configuration files that are already secret. */
  apiKey: z.string().optional(),
  /** The name of an environment variable of the gateway holding the key. */
  apiKeyEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
    .optional(),
};

const ServiceUrl = () => z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

/** OpenAI's own service and the compatible ones take the same settings besides address and model. */
const ChatCompletionsSettings = {
  ...KeySource,
  headers: Headers.optional(),
  maxTokens: z.number().int().positive().optional(),
  includeUsage: z.boolean().default(true),
  ...Transport,
};

const OpenAiSection = z.strictObject({
  baseUrl: ServiceUrl().default('https://api.openai.com/v1'),
  ...ChatCompletionsSettings,
});

const OpenAiCompatibleSection = z.strictObject({
  baseUrl: ServiceUrl(),
  /** Used when the reference does not name a model (`openai-compatible:NAME`). */
  model: z.string().min(1).optional(),
  ...ChatCompletionsSettings,
});

const AnthropicSection = z.strictObject({
  baseUrl: ServiceUrl().default('https://api.anthropic.com'),
  ...KeySource,
  version: z.string().min(1).default('2023-06-01'),
  maxTokens: z.number().int().positive().default(8192),
  headers: Headers.optional(),
  ...Transport,
});

const ScriptedSection = z.strictObject({
  /** Off unless the operator turns it on: a replayed script is for demos and tests, not production. */
  enabled: z.boolean().default(false),
  /** When set, scripts are read only from inside these directories. */
  directories: z.array(z.string().min(1)).optional(),
});

export const PROVIDER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export const ModelsConfig = z.strictObject({
  idleTimeoutMs: z.number().int().positive().default(120_000),
  maxRetries: z.number().int().min(0).max(10).default(4),
  initialBackoffMs: z.number().int().min(0).default(1_000),
  maxBackoffMs: z.number().int().min(0).default(30_000),
  maxRetryAfterMs: z.number().int().min(0).default(120_000),
  /** Plain http is refused for a key going anywhere but this machine unless this is set. */
  allowInsecureHttp: z.boolean().default(false),
  openai: OpenAiSection.optional(),
  anthropic: AnthropicSection.optional(),
  openaiCompatible: z
    .record(z.string(), OpenAiCompatibleSection)
    .superRefine((services, ctx) => {
      for (const name of Object.keys(services)) {
        if (!PROVIDER_NAME.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'service names are letters, digits, "-" and "_"' });
      }
    })
    .default({}),
  scripted: ScriptedSection.default({ enabled: false }),
});

export type ModelsConfig = z.infer<typeof ModelsConfig>;
export type ModelsConfigInput = z.input<typeof ModelsConfig>;
