import type { z } from 'zod';
import { endpoint, streamWithRetries, type StreamContext, type TransportSettings } from './http-transport';
import { ModelError } from './model.errors';
import type { MalformedToolCall, ModelProvider, ModelRequest, StopReason, ToolCall, TurnResult, Usage } from './model.types';
import { describeJsonError, isMalformed } from './tool-arguments';

type EndpointSettings = Parameters<typeof endpoint>[2] & { ref: string; baseUrl: string };

/**
 * What the HTTP providers share: one endpoint with its transport (label, secrets to redact), the
 * stream retried as the transport allows, and the turn assembled at the end. Each provider says how
 * it authenticates, what it sends and how it reads its own events.
 */
export abstract class StreamingProvider implements ModelProvider {
  readonly ref: string;
  protected readonly transport: TransportSettings;
  private readonly url: string;

  protected constructor(settings: EndpointSettings, path: string) {
    this.ref = settings.ref;
    ({ url: this.url, transport: this.transport } = endpoint(settings.baseUrl, path, settings));
  }

  complete(request: ModelRequest): Promise<TurnResult> {
    return streamWithRetries(this.transport, { url: this.url, headers: this.headers(), body: this.body(request) }, request.signal, request.onRetry, (context) => this.consume(context, request));
  }

  protected abstract headers(): Record<string, string>;
  protected abstract body(request: ModelRequest): Record<string, unknown>;
  protected abstract consume(context: StreamContext, request: ModelRequest): Promise<TurnResult>;

  /** One event's data as JSON; anything else is a protocol error, worth another attempt. */
  protected parseEvent(data: string): unknown {
    try {
      return JSON.parse(data);
    } catch (error) {
      throw this.protocolError(`sent a stream event that is not JSON (${describeJsonError(error, data)})`);
    }
  }

  protected unexpectedShape(error: z.ZodError): ModelError {
    return this.protocolError(`sent a stream event of an unexpected shape (${summarise(error)})`);
  }

  protected closedEarly(): ModelError {
    return this.protocolError('closed the stream before the answer was complete');
  }

  /** `what` follows the service's label: "the model service at … sent …". */
  protected protocolError(what: string): ModelError {
    return new ModelError('model_protocol_error', `${this.transport.label} ${what}.`, { retryable: true });
  }
}

/** The turn from what the stream carried: tool calls in the order the model made them, malformed ones apart. */
export function turnResult(text: string, calls: readonly (ToolCall | MalformedToolCall)[], stopReason: (hasToolCalls: boolean) => StopReason, usage: Usage | undefined): TurnResult {
  const toolCalls = calls.filter((c): c is ToolCall => !isMalformed(c));
  const malformedToolCalls = calls.filter(isMalformed);
  return {
    ...(text ? { text } : {}),
    toolCalls,
    ...(malformedToolCalls.length > 0 ? { malformedToolCalls } : {}),
    stopReason: stopReason(calls.length > 0),
    ...(usage ? { usage } : {}),
  };
}

/** The first issues of a failed parse, for a sentence. */
export function summarise(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : 'value'}: ${i.message}`)
    .join('; ');
}
