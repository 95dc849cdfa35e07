import { ModelError, errorFields, excerpt, isModelError, redact } from './model.errors';
import type { RetryNotice } from './model.types';
import { SseDecoder, type SseEvent } from './sse';

/** How one provider talks HTTP: where, how patient, how persistent. All from the gateway's configuration. */
export interface TransportSettings {
  /** Shown in messages; never carries a key or a query string. */
  label: string;
  idleTimeoutMs: number;
  maxRetries: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  /** A service asking for a longer pause than this is not waited for: the request fails with its answer. */
  maxRetryAfterMs: number;
  /** Values that must never appear in anything this module produces. */
  secrets: string[];
  /** Injectable for deterministic tests of the jitter; Math.random otherwise. */
  random?: () => number;
}

/**
 * One provider's endpoint: the URL under its configured base, and the transport settings that name it
 * in messages without a key or query string and redact its key and header values from everything.
 */
export function endpoint(
  baseUrl: string,
  path: string,
  settings: { transport: Omit<TransportSettings, 'label' | 'secrets'>; apiKey?: string | undefined; headers?: Record<string, string> | undefined },
): { url: string; transport: TransportSettings } {
  const url = `${baseUrl.replace(/\/+$/, '')}${path}`;
  return {
    url,
    transport: {
      ...settings.transport,
      label: `the model service at ${describeUrl(url)}`,
      secrets: [settings.apiKey, ...Object.values(settings.headers ?? {})].filter((s): s is string => Boolean(s)),
    },
  };
}

/** Origin and path only: a query string may carry a key (Azure-style `?api-key=`). */
function describeUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

interface StreamRequest {
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

export interface StreamContext {
  /** The service's events, in order, for one attempt. */
  events: AsyncIterable<SseEvent>;
  /**
   * Called by the consumer once it has passed output on (a text delta). From then on a failure is
   * not retried: a second attempt would show the same text twice.
   */
  outputSent(): void;
}

const ERROR_BODY_LIMIT = 4096;

/**
 * POSTs a streaming request and hands the events to `consume`, retrying on 429, 5xx, network
 * failures and errors `consume` marks retryable, with exponential backoff and jitter (honouring
 * Retry-After). An attempt that receives nothing for `idleTimeoutMs` is aborted as
 * `model_timeout` (X4); the caller's signal ends everything at once as `model_aborted`.
 */
export async function streamWithRetries<T>(
  settings: TransportSettings,
  request: StreamRequest,
  signal: AbortSignal,
  onRetry: ((notice: RetryNotice) => void) | undefined,
  consume: (context: StreamContext) => Promise<T>,
): Promise<T> {
  const attempts = settings.maxRetries + 1;
  let last: ModelError | undefined;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    throwIfAborted(signal, settings);
    const progress = { sent: false };
    try {
      return await oneAttempt(settings, request, signal, progress, consume);
    } catch (error) {
      const failure = toModelError(error, settings, signal);
      if (!failure.retryable) throw failure;
      if (progress.sent) {
        throw new ModelError(failure.code, `${failure.message} Part of the answer had already been shown, so the request was not retried.`, {
          status: failure.status,
        });
      }
      last = failure;
      if (attempt === attempts) break;
      if (failure.retryAfterMs !== undefined && failure.retryAfterMs > settings.maxRetryAfterMs) {
        throw new ModelError(
          failure.code,
          `${failure.message} The service asked to wait ${Math.ceil(failure.retryAfterMs / 1000)} s, more than the configured maximum of ${Math.ceil(settings.maxRetryAfterMs / 1000)} s, so the request was not retried.`,
          { status: failure.status },
        );
      }
      const delayMs = failure.retryAfterMs ?? backoffDelay(attempt, settings);
      onRetry?.({ attempt, delayMs, reason: failure.message });
      await abortableSleep(delayMs, signal, settings);
    }
  }
  // `last` is always set here: the loop only falls through after a retryable failure.
  const final = last as ModelError;
  throw new ModelError(final.code, `${final.message} Gave up after ${attempts} attempts.`, { status: final.status });
}

/** Exponential backoff with equal jitter: never shorter than half the step, so retries cannot stampede. */
export function backoffDelay(attempt: number, settings: Pick<TransportSettings, 'initialBackoffMs' | 'maxBackoffMs' | 'random'>): number {
  const step = Math.min(settings.maxBackoffMs, settings.initialBackoffMs * 2 ** (attempt - 1));
  const random = settings.random ?? Math.random;
  return Math.round(step / 2 + (step / 2) * random());
}

/**
 * Reads `retry-after-ms` (OpenAI's precise form) or `Retry-After` (seconds or an HTTP date, RFC 9110).
 * Returns milliseconds, or undefined when absent or unreadable.
 */
export function parseRetryAfter(headers: Headers, now: number = Date.now()): number | undefined {
  const ms = headers.get('retry-after-ms');
  if (ms !== null && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.round(Number(ms));
  const value = headers.get('retry-after');
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  // Only an HTTP date is left to accept; Date.parse would also read "-4" as a year.
  if (!/[A-Za-z]/.test(trimmed)) return undefined;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

async function oneAttempt<T>(settings: TransportSettings, request: StreamRequest, callerSignal: AbortSignal, progress: { sent: boolean }, consume: (context: StreamContext) => Promise<T>): Promise<T> {
  const watchdog = new IdleWatchdog(settings);
  const signal = AbortSignal.any([callerSignal, watchdog.signal]);
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  try {
    const response = await fetch(request.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...request.headers },
      body: JSON.stringify(request.body),
      signal,
      // A redirect would carry the key to an address nobody configured.
      redirect: 'manual',
    }).catch((error: unknown) => {
      throw networkError(error, settings, signal);
    });
    watchdog.touch();
    if (!response.ok) throw await statusError(response, settings, watchdog);
    const contentType = response.headers.get('content-type') ?? '';
    if (!contentType.includes('text/event-stream')) {
      const body = await readBounded(response, watchdog);
      throw new ModelError('model_protocol_error', `${settings.label} answered with "${contentType || 'no content type'}" instead of an event stream: ${clean(body, settings)}`, {
        status: response.status,
      });
    }
    if (!response.body) throw new ModelError('model_protocol_error', `${settings.label} answered with an empty body.`);
    const bodyReader = response.body.getReader();
    reader = bodyReader;
    return await consume({
      events: readEvents(bodyReader, watchdog, settings, signal),
      outputSent: () => {
        progress.sent = true;
      },
    });
  } catch (error) {
    if (watchdog.fired) throw watchdog.timeoutError();
    throw error;
  } finally {
    watchdog.stop();
    // Frees the connection when the consumer stops early (e.g. at `[DONE]`) or fails.
    if (reader) await reader.cancel().catch(() => undefined);
  }
}

async function* readEvents(reader: ReadableStreamDefaultReader<Uint8Array>, watchdog: IdleWatchdog, settings: TransportSettings, signal: AbortSignal): AsyncGenerator<SseEvent> {
  const decoder = new SseDecoder();
  for (;;) {
    const { done, value } = await reader.read().catch((error: unknown) => {
      throw networkError(error, settings, signal);
    });
    if (done) break;
    watchdog.touch();
    yield* decoder.push(value);
  }
  yield* decoder.end();
}

async function statusError(response: Response, settings: TransportSettings, watchdog: IdleWatchdog): Promise<ModelError> {
  const status = response.status;
  const what = `${settings.label} answered ${status}${response.statusText ? ` ${response.statusText}` : ''}`;
  if (status >= 300 && status < 400) {
    await response.body?.cancel().catch(() => undefined);
    return new ModelError(
      'model_request_rejected',
      `${what} (a redirect). Redirects are not followed, so the API key is never sent to an address that is not configured; set the final URL in the configuration.`,
      { status },
    );
  }
  const body = clean(await readBounded(response, watchdog).catch(() => ''), settings);
  const detail = body ? `: ${serviceMessage(body)}` : '.';
  if (status === 429) {
    return new ModelError('model_rate_limited', `${what} (rate limited)${detail}`, {
      status,
      retryable: true,
      retryAfterMs: parseRetryAfter(response.headers),
    });
  }
  if (status >= 500) {
    return new ModelError('model_unavailable', `${what}${detail}`, { status, retryable: true, retryAfterMs: parseRetryAfter(response.headers) });
  }
  if (status === 401 || status === 403) {
    return new ModelError('model_auth_failed', `${what}: the configured API key was refused${body ? ` (${serviceMessage(body)})` : ''}.`, { status });
  }
  return new ModelError('model_request_rejected', `${what}${detail}`, { status });
}

/** Both services wrap errors as `{"error":{"message":…}}`; show that sentence rather than raw JSON when present. */
function serviceMessage(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === 'object' && 'error' in parsed) {
      const error = (parsed as { error: unknown }).error;
      if (typeof error === 'string') return excerpt(error);
      if (error && typeof error === 'object' && 'message' in error && typeof error.message === 'string') return excerpt(error.message);
    }
  } catch {
    // Not JSON: the raw excerpt is the best there is.
  }
  return excerpt(body);
}

async function readBounded(response: Response, watchdog: IdleWatchdog): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < ERROR_BODY_LIMIT) {
      const { done, value } = await reader.read();
      if (done) break;
      watchdog.touch();
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, ERROR_BODY_LIMIT));
}

function clean(text: string, settings: TransportSettings): string {
  return excerpt(redact(text, settings.secrets));
}

function toModelError(error: unknown, settings: TransportSettings, signal: AbortSignal): ModelError {
  if (signal.aborted) return abortedError(signal, settings);
  if (isModelError(error)) return error;
  // Anything else is a defect in the gateway (or a throwing callback), not a service failure: never retried.
  throw error;
}

/**
 * undici reports a failed connection as TypeError('fetch failed') and a cut stream as
 * TypeError('terminated'), each with the system error as cause. Aborts pass through untouched:
 * the caller tells timeouts and cancellations apart.
 */
function networkError(error: unknown, settings: TransportSettings, signal: AbortSignal): unknown {
  if (signal.aborted) return error;
  const outer = errorFields(error);
  const cause = errorFields(outer.cause);
  const reason = [outer.message ?? 'unknown error', cause.code ?? cause.message].filter(Boolean).join(': ');
  return new ModelError('model_unavailable', `The connection to ${settings.label} failed (${clean(reason, settings)}).`, { retryable: true });
}

function throwIfAborted(signal: AbortSignal, settings: TransportSettings): void {
  if (signal.aborted) throw abortedError(signal, settings);
}

function abortedError(signal: AbortSignal, settings: TransportSettings): ModelError {
  const reason: unknown = signal.reason;
  const text = errorFields(reason).message ?? '';
  // The default reason ("This operation was aborted") says nothing a person needs.
  const isDefault = typeof reason === 'object' && reason !== null && (reason as { name?: unknown }).name === 'AbortError';
  const because = text && !isDefault ? ` (${clean(text, settings)})` : '';
  return new ModelError('model_aborted', `The request to ${settings.label} was cancelled${because}.`);
}

function abortableSleep(ms: number, signal: AbortSignal, settings: TransportSettings): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortedError(signal, settings));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(signal, settings));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Aborts an attempt when nothing arrives for the configured time; every received byte resets it. */
class IdleWatchdog {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  fired = false;

  constructor(private readonly settings: TransportSettings) {
    this.arm();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  touch(): void {
    if (this.fired || this.timer === undefined) return;
    clearTimeout(this.timer);
    this.arm();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  timeoutError(): ModelError {
    return new ModelError('model_timeout', `${this.settings.label} sent nothing for ${formatMs(this.settings.idleTimeoutMs)}, so the request was aborted (idle timeout).`);
  }

  private arm(): void {
    this.timer = setTimeout(() => {
      this.fired = true;
      this.controller.abort(this.timeoutError());
    }, this.settings.idleTimeoutMs);
  }
}

function formatMs(ms: number): string {
  return ms >= 1000 && ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
