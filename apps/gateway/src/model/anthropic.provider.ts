import { z } from 'zod';
import type { StreamContext, TransportSettings } from './http-transport';
import { ModelError, excerpt, redact } from './model.errors';
import type { ChatMessage, ModelRequest, StopReason, TurnResult, Usage } from './model.types';
import { StreamingProvider, turnResult } from './streaming-provider';
import { parseToolArguments } from './tool-arguments';

export interface AnthropicProviderSettings {
  ref: string;
  /** Without the `/v1` segment, e.g. `https://api.anthropic.com`. */
  baseUrl: string;
  model: string;
  apiKey: string;
  /** The `anthropic-version` header. */
  version: string;
  /** Required by the Messages API on every request. */
  maxTokens: number;
  headers?: Record<string, string>;
  transport: Omit<TransportSettings, 'label' | 'secrets'>;
}

type Block =
  { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> } | { type: 'tool_result'; tool_use_id: string; content: string; is_error?: boolean };

interface WireMessage {
  role: 'user' | 'assistant';
  content: Block[];
}

/** Error types Anthropic documents as transient; others (invalid request, permission) would fail again. */
const TRANSIENT_STREAM_ERRORS = new Set(['overloaded_error', 'api_error', 'rate_limit_error', 'timeout_error']);

/** Anthropic Messages API with streaming and tool use. */
export class AnthropicProvider extends StreamingProvider {
  constructor(private readonly settings: AnthropicProviderSettings) {
    super(settings, '/v1/messages');
  }

  protected headers(): Record<string, string> {
    return { ...this.settings.headers, 'x-api-key': this.settings.apiKey, 'anthropic-version': this.settings.version };
  }

  protected body(request: ModelRequest): Record<string, unknown> {
    const system = request.messages
      .filter((m) => m.role === 'system')
      .map((m) => m.content)
      .join('\n\n');
    return {
      model: this.settings.model,
      max_tokens: request.maxTokens ?? this.settings.maxTokens,
      ...(system ? { system } : {}),
      messages: toWireMessages(request.messages),
      ...(request.tools.length > 0 ? { tools: request.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters })) } : {}),
      stream: true,
    };
  }

  protected async consume({ events, outputSent }: StreamContext, request: ModelRequest): Promise<TurnResult> {
    const label = this.transport.label;
    let text = '';
    let stopReasonValue: string | undefined;
    let stopped = false;
    let usage: Usage | undefined;
    const toolBlocks = new Map<number, { id: string; name: string; json: string; initial: Record<string, unknown> }>();

    for await (const event of events) {
      const json = this.parseEvent(event.data);
      const parsed = StreamEvent.safeParse(json);
      if (!parsed.success) {
        // Event types added after this was written are skipped, as Anthropic's versioning policy asks.
        if (isUnknownType(json)) continue;
        throw this.unexpectedShape(parsed.error);
      }
      const ev = parsed.data;
      switch (ev.type) {
        case 'message_start':
          usage = { inputTokens: ev.message.usage?.input_tokens ?? 0, outputTokens: ev.message.usage?.output_tokens ?? 0 };
          break;
        case 'content_block_start':
          if (ev.content_block.type === 'tool_use') {
            const { id, name, input } = ev.content_block;
            if (!id || !name) {
              throw this.protocolError('started a tool call without an id or a tool name');
            }
            toolBlocks.set(ev.index, { id, name, json: '', initial: input ?? {} });
          } else if (ev.content_block.type === 'text' && ev.content_block.text) {
            text += ev.content_block.text;
            outputSent();
            request.onTextDelta?.(ev.content_block.text);
          }
          break;
        case 'content_block_delta':
          if (ev.delta.type === 'text_delta' && ev.delta.text) {
            text += ev.delta.text;
            outputSent();
            request.onTextDelta?.(ev.delta.text);
          } else if (ev.delta.type === 'input_json_delta' && ev.delta.partial_json !== undefined) {
            const block = toolBlocks.get(ev.index);
            if (!block) {
              throw this.protocolError(`sent tool input for block ${ev.index}, which did not start as a tool call`);
            }
            block.json += ev.delta.partial_json;
          }
          // thinking_delta, signature_delta, citations_delta: not part of what the loop acts on.
          break;
        case 'content_block_stop':
        case 'ping':
          break;
        case 'message_delta':
          if (ev.delta.stop_reason) stopReasonValue = ev.delta.stop_reason;
          if (typeof ev.usage?.output_tokens === 'number') {
            usage = { inputTokens: ev.usage.input_tokens ?? usage?.inputTokens ?? 0, outputTokens: ev.usage.output_tokens };
          }
          break;
        case 'message_stop':
          stopped = true;
          break;
        case 'error': {
          const kind = ev.error.type ?? 'error';
          const message = excerpt(redact(ev.error.message ?? 'no message', this.transport.secrets));
          const code = kind === 'rate_limit_error' ? 'model_rate_limited' : kind === 'overloaded_error' ? 'model_unavailable' : 'model_stream_error';
          throw new ModelError(code, `${label} reported ${kind} in the middle of its answer: ${message}`, { retryable: TRANSIENT_STREAM_ERRORS.has(kind) });
        }
      }
      if (stopped) break;
    }

    if (!stopped && stopReasonValue === undefined) {
      throw this.closedEarly();
    }

    const calls = [...toolBlocks.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, block]) => (block.json.trim() === '' ? { id: block.id, name: block.name, arguments: block.initial } : parseToolArguments(block.id, block.name, block.json)));
    return turnResult(text, calls, (hasToolCalls) => stopReason(stopReasonValue, hasToolCalls), usage);
  }
}

/**
 * System messages become the top-level `system` field; tool results become `tool_result` blocks
 * in a user message. Consecutive messages of one role are merged, as the API expects alternation.
 */
function toWireMessages(messages: ChatMessage[]): WireMessage[] {
  const out: WireMessage[] = [];
  const append = (role: WireMessage['role'], blocks: Block[]) => {
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const message of messages) {
    switch (message.role) {
      case 'system':
        break;
      case 'user':
        // The API refuses empty text blocks.
        append('user', message.content ? [{ type: 'text', text: message.content }] : []);
        break;
      case 'assistant':
        append('assistant', [
          ...(message.content ? [{ type: 'text' as const, text: message.content }] : []),
          ...(message.toolCalls ?? []).map((c) => ({ type: 'tool_use' as const, id: c.id, name: c.name, input: c.arguments })),
        ]);
        break;
      case 'tool':
        append('user', [{ type: 'tool_result', tool_use_id: message.toolCallId, content: message.content, ...(message.isError ? { is_error: true } : {}) }]);
        break;
    }
  }
  return out;
}

function stopReason(value: string | undefined, hasToolCalls: boolean): StopReason {
  switch (value) {
    case 'end_turn':
      return hasToolCalls ? 'tool_use' : 'end_turn';
    case 'tool_use':
      return 'tool_use';
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'max_tokens';
    case 'stop_sequence':
      return 'stop_sequence';
    case 'refusal':
      return 'content_filter';
    default:
      return hasToolCalls ? 'tool_use' : 'other';
  }
}

const KNOWN_TYPES = new Set(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop', 'ping', 'error']);

function isUnknownType(json: unknown): boolean {
  return typeof json === 'object' && json !== null && 'type' in json && typeof json.type === 'string' && !KNOWN_TYPES.has(json.type);
}

const UsageShape = z.looseObject({ input_tokens: z.number().nullish(), output_tokens: z.number().nullish() });

const StreamEvent = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('message_start'), message: z.looseObject({ usage: UsageShape.nullish() }) }),
  z.looseObject({
    type: z.literal('content_block_start'),
    index: z.number().int().nonnegative(),
    // Besides text and tool_use: thinking, redacted_thinking, server tool blocks, which are skipped.
    content_block: z.looseObject({
      type: z.string(),
      text: z.string().optional(),
      id: z.string().optional(),
      name: z.string().optional(),
      input: z.record(z.string(), z.unknown()).optional(),
    }),
  }),
  z.looseObject({
    type: z.literal('content_block_delta'),
    index: z.number().int().nonnegative(),
    delta: z.looseObject({ type: z.string(), text: z.string().optional(), partial_json: z.string().optional() }),
  }),
  z.looseObject({ type: z.literal('content_block_stop'), index: z.number().int().nonnegative() }),
  z.looseObject({ type: z.literal('message_delta'), delta: z.looseObject({ stop_reason: z.string().nullish() }), usage: UsageShape.nullish() }),
  z.looseObject({ type: z.literal('message_stop') }),
  z.looseObject({ type: z.literal('ping') }),
  z.looseObject({ type: z.literal('error'), error: z.looseObject({ type: z.string().nullish(), message: z.string().nullish() }) }),
]);
