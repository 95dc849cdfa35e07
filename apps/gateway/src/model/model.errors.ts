/**
 * Machine-readable classes (X2) for everything that can go wrong between the gateway and a model.
 * Automation branches on `code`; people read `message`.
 */
export const MODEL_ERROR_CODES = [
  'model_timeout',
  'model_aborted',
  'model_rate_limited',
  'model_unavailable',
  'model_auth_failed',
  'model_request_rejected',
  'model_protocol_error',
  'model_stream_error',
  'model_config_invalid',
  'model_script_invalid',
] as const;

type ModelErrorCode = (typeof MODEL_ERROR_CODES)[number];

interface ModelErrorOptions {
  status?: number;
  retryable?: boolean;
  /** Seconds or milliseconds the service asked us to wait before trying again, already converted to ms. */
  retryAfterMs?: number;
}

export class ModelError extends Error {
  override readonly name = 'ModelError';
  readonly status?: number;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;

  constructor(
    readonly code: ModelErrorCode,
    message: string,
    options: ModelErrorOptions = {},
  ) {
    super(message);
    this.status = options.status;
    this.retryable = options.retryable ?? false;
    this.retryAfterMs = options.retryAfterMs;
  }

  toJSON(): { code: ModelErrorCode; message: string; status?: number } {
    return { code: this.code, message: this.message, ...(this.status === undefined ? {} : { status: this.status }) };
  }
}

/**
 * The session event class (libs/contracts `EventClass`) a model failure is reported under: the
 * idle timeout has its own class (X4); every other failure is `model_error`, with `code` as detail.
 */
export function modelFailureClass(error: ModelError): 'model_timeout' | 'model_error' {
  return error.code === 'model_timeout' ? 'model_timeout' : 'model_error';
}

export function isModelError(value: unknown): value is ModelError {
  return value instanceof ModelError;
}

const REDACTED = '[redacted]';

/**
 * Removes every secret from a text before it can reach an error, an event or a log line. A
 * service may echo request headers in its error body, so server text is never trusted as clean.
 */
export function redact(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const secret of secrets) {
    // Short values would blank out ordinary words; keys are never that short (checked at configuration).
    if (secret && secret.length >= 8) out = out.split(secret).join(REDACTED);
  }
  return out;
}

/** Cuts text a remote party controls to a size a log line can carry. */
export function excerpt(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/**
 * Reads `message`, `code` and `cause` without `instanceof`: errors from Node internals and from
 * other realms (test sandboxes, workers) are not instances of this realm's Error.
 */
export function errorFields(error: unknown): { message?: string; code?: string; cause?: unknown } {
  if (typeof error !== 'object' || error === null) return typeof error === 'string' ? { message: error } : {};
  const record = error as { message?: unknown; code?: unknown; cause?: unknown };
  return {
    ...(typeof record.message === 'string' ? { message: record.message } : {}),
    ...(typeof record.code === 'string' ? { code: record.code } : {}),
    ...(record.cause !== undefined ? { cause: record.cause } : {}),
  };
}
