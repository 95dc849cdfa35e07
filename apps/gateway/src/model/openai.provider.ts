import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { StreamContext, TransportSettings } from './http-transport';
import { ModelError, excerpt, redact } from './model.errors';
import type { ChatMessage, MalformedToolCall, ModelRequest, StopReason, ToolCall, TurnResult, Usage } from './model.types';
import { StreamingProvider, turnResult } from './streaming-provider';
import { parseToolArguments } from './tool-arguments';

export interface OpenAiProviderSettings {
  /** Shown in logs and events, e.g. `openai:gpt-4o` or `openai-compatible:ollama`. */
  ref: string;
  /** Up to and including the version segment, e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Extra headers some services need (organisation, project); treated as secrets too. */
  headers?: Record<string, string>;
  maxTokens?: number;
  /**
   * OpenAI's own API wants `max_completion_tokens` (its reasoning models refuse `max_tokens`);
   * compatible servers mostly know only `max_tokens`.
   */
  maxTokensField: 'max_tokens' | 'max_completion_tokens';
  /** Asks for token usage in the last chunk; a few older servers refuse the `stream_options` field. */
  includeUsage: boolean;
  transport: Omit<TransportSettings, 'label' | 'secrets'>;
}

/** OpenAI chat completions with streaming and tool calling: OpenAI, Mistral, vLLM, Ollama, llama.cpp server. */
export class OpenAiCompatibleProvider extends StreamingProvider {
  constructor(private readonly settings: OpenAiProviderSettings) {
    super(settings, '/chat/completions');
  }

  protected headers(): Record<string, string> {
    const headers: Record<string, string> = { ...this.settings.headers };
    if (this.settings.apiKey) headers.authorization = `Bearer ${this.settings.apiKey}`;
    return headers;
  }

  protected body(request: ModelRequest): Record<string, unknown> {
    const maxTokens = request.maxTokens ?? this.settings.maxTokens;
    return {
      model: this.settings.model,
      messages: request.messages.map(toWireMessage),
      stream: true,
      ...(this.settings.includeUsage ? { stream_options: { include_usage: true } } : {}),
      // An empty `tools` array is an error on several servers; no tools means a text-only turn.
      ...(request.tools.length > 0 ? { tools: request.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })) } : {}),
      ...(maxTokens !== undefined ? { [this.settings.maxTokensField]: maxTokens } : {}),
    };
  }

  protected async consume({ events, outputSent }: StreamContext, request: ModelRequest): Promise<TurnResult> {
    let text = '';
    let finishReason: string | undefined;
    let usage: Usage | undefined;
    let done = false;
    const calls = new Map<number, { id: string; name: string; arguments: string }>();
    const label = this.transport.label;
    const secrets = this.transport.secrets;

    for await (const event of events) {
      const data = event.data.trim();
      if (data === '[DONE]') {
        done = true;
        break;
      }
      const json = this.parseEvent(data);
      const streamError = StreamErrorChunk.safeParse(json);
      if (streamError.success) {
        const message = typeof streamError.data.error === 'string' ? streamError.data.error : (streamError.data.error.message ?? 'no message');
        throw new ModelError('model_stream_error', `${label} reported an error in the middle of its answer: ${excerpt(redact(message, secrets))}`, {
          retryable: true,
        });
      }
      const parsed = Chunk.safeParse(json);
      if (!parsed.success) {
        throw this.unexpectedShape(parsed.error);
      }
      const chunk = parsed.data;
      if (chunk.usage) usage = { inputTokens: chunk.usage.prompt_tokens ?? 0, outputTokens: chunk.usage.completion_tokens ?? 0 };
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const delta = choice.delta;
      for (const piece of [delta?.content, delta?.refusal]) {
        if (typeof piece === 'string' && piece !== '') {
          text += piece;
          outputSent();
          request.onTextDelta?.(piece);
        }
      }
      delta?.tool_calls?.forEach((fragment, position) => {
        const index = fragment.index ?? position;
        const call = calls.get(index) ?? { id: '', name: '', arguments: '' };
        if (fragment.id) call.id = fragment.id;
        if (fragment.function?.name) call.name += fragment.function.name;
        if (fragment.function?.arguments) call.arguments += fragment.function.arguments;
        calls.set(index, call);
      });
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }

    if (!done && finishReason === undefined) {
      throw this.closedEarly();
    }

    const turn = randomUUID().slice(0, 8);
    const parsedCalls = [...calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, call]): ToolCall | MalformedToolCall => {
        const id = call.id || `call_${turn}_${index}`;
        if (!call.name) return { id, name: '', rawArguments: call.arguments, reason: 'the model sent a tool call without a tool name' };
        return parseToolArguments(id, call.name, call.arguments);
      });
    return turnResult(text, parsedCalls, (hasToolCalls) => stopReason(finishReason, hasToolCalls), usage);
  }
}

function toWireMessage(message: ChatMessage): Record<string, unknown> {
  switch (message.role) {
    case 'system':
    case 'user':
      return { role: message.role, content: message.content };
    case 'assistant':
      return {
        role: 'assistant',
        content: message.content ?? null,
        ...(message.toolCalls && message.toolCalls.length > 0
          ? {
              tool_calls: message.toolCalls.map((c) => ({
                id: c.id,
                type: 'function',
                function: { name: c.name, arguments: JSON.stringify(c.arguments) },
              })),
            }
          : {}),
      };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
  }
}

function stopReason(finish: string | undefined, hasToolCalls: boolean): StopReason {
  switch (finish) {
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'length':
      return 'max_tokens';
    case 'content_filter':
      return 'content_filter';
    case 'stop':
    case undefined:
      // Some compatible servers finish with "stop" even when they called tools.
      return hasToolCalls ? 'tool_use' : 'end_turn';
    default:
      return hasToolCalls ? 'tool_use' : 'other';
  }
}

const StreamErrorChunk = z.object({ error: z.union([z.string(), z.looseObject({ message: z.string().nullish() })]) });

const ToolCallFragment = z.looseObject({
  index: z.number().int().nonnegative().optional(),
  id: z.string().nullish(),
  function: z.looseObject({ name: z.string().nullish(), arguments: z.string().nullish() }).nullish(),
});

const Chunk = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        delta: z.looseObject({ content: z.string().nullish(), refusal: z.string().nullish(), tool_calls: z.array(ToolCallFragment).nullish() }).nullish(),
        finish_reason: z.string().nullish(),
      }),
    )
    .nullish(),
  usage: z.looseObject({ prompt_tokens: z.number().optional(), completion_tokens: z.number().optional() }).nullish(),
});
