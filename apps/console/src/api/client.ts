import { ErrorBody, fillPath, GATEWAY_API_PREFIX, type GatewayRoute, type PathParams } from '@lemniscate/contracts';
import type { z } from 'zod';

/**
 * An error the console can show as it is: the server's code (for logic), its sentence (for the
 * person) and the request id (for the administrator reading the gateway's logs).
 */
export class ApiError extends Error {
  readonly code: string;
  readonly status: number;
  readonly requestId: string | null;
  readonly details: unknown;

  constructor(opts: { code: string; message: string; status: number; requestId?: string | null; details?: unknown }) {
    super(opts.message);
    this.name = 'ApiError';
    this.code = opts.code;
    this.status = opts.status;
    this.requestId = opts.requestId ?? null;
    this.details = opts.details;
  }
}

export function isApiError(e: unknown): e is ApiError {
  return e instanceof ApiError;
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

interface RequestOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  query?: Record<string, string | number | boolean | undefined | null>;
  body?: unknown;
  signal?: AbortSignal;
}

export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

type JsonRoute = GatewayRoute & { readonly response: z.ZodType };
type BodyOf<R> = R extends { readonly body: infer B extends z.ZodType } ? z.input<B> : undefined;

/** A call of one libs/contracts GatewayRoutes entry: the values of its path, its body typed by the route's schema. */
export interface CallOptions<R extends GatewayRoute> extends Omit<RequestOptions, 'method' | 'body'> {
  params?: PathParams<R>;
  body?: BodyOf<R>;
}

/** A route's path relative to the API prefix (`/sessions/s1`), its `:params` filled in and encoded. */
export function routePath(route: GatewayRoute, params: Record<string, string | number> = {}): string {
  const full = fillPath(route.path, params);
  return full.startsWith(`${GATEWAY_API_PREFIX}/`) ? full.slice(GATEWAY_API_PREFIX.length) : full;
}

/**
 * The one way the console talks to the gateway. Authentication is the HttpOnly session cookie the
 * gateway sets at sign-in; every write echoes the CSRF token in `x-csrf-token`, because a cookie
 * alone would be sent by any page the browser visits.
 */
export class ApiClient {
  private csrfToken: string | null = null;

  constructor(
    private readonly baseUrl = '/api/v1',
    private readonly fetchImpl: Fetch = (input, init) => fetch(input, init),
  ) {}

  setCsrfToken(token: string | null): void {
    this.csrfToken = token;
  }

  url(path: string, query?: RequestOptions['query']): string {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
    }
    const qs = params.toString();
    return `${this.baseUrl}${path}${qs ? `?${qs}` : ''}`;
  }

  /** Sends a request and validates the response against the contract's schema. */
  async json<S extends z.ZodType>(schema: S, path: string, opts: RequestOptions = {}): Promise<z.output<S>> {
    const res = await this.send(path, opts, 'application/json');
    const body: unknown =
      res.status === 204
        ? null
        : await res.json().catch(() => {
            throw new ApiError({ code: 'invalid_response', status: res.status, message: 'The gateway answered with something that is not JSON.', requestId: res.headers.get('x-request-id') });
          });
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      throw new ApiError({
        code: 'invalid_response',
        status: res.status,
        message: `The gateway's answer to ${path} does not have the expected shape (${parsed.error.issues[0]?.path.join('.') || 'body'}: ${parsed.error.issues[0]?.message ?? 'invalid'}). The console and the gateway may be different versions.`,
        requestId: res.headers.get('x-request-id'),
      });
    }
    return parsed.data;
  }

  /**
   * Calls a GatewayRoutes entry: method and path from the table, the answer parsed with the route's
   * response schema, so the console and the gateway share one definition of every request.
   */
  call<R extends JsonRoute>(route: R, opts: CallOptions<R> = {}): Promise<z.output<R['response']>> {
    const { params, ...rest } = opts;
    return this.json(route.response, routePath(route, params as Record<string, string | number> | undefined), { ...rest, method: route.method }) as Promise<z.output<R['response']>>;
  }

  /** For downloads (patches, audit exports): the raw body. */
  async blob(path: string, opts: RequestOptions = {}): Promise<{ blob: Blob; filename: string | null }> {
    const res = await this.send(path, opts, '*/*');
    const disposition = res.headers.get('content-disposition') ?? '';
    const match = /filename="?([^";]+)"?/.exec(disposition);
    return { blob: await res.blob(), filename: match?.[1] ?? null };
  }

  private async send(path: string, opts: RequestOptions, accept: string): Promise<Response> {
    const method = opts.method ?? 'GET';
    const headers: Record<string, string> = { accept };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    if (UNSAFE.has(method) && this.csrfToken) headers['x-csrf-token'] = this.csrfToken;
    let res: Response;
    try {
      res = await this.fetchImpl(this.url(path, opts.query), {
        method,
        headers,
        credentials: 'same-origin',
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        signal: opts.signal,
      });
    } catch (e) {
      if (e instanceof DOMException && e.name === 'AbortError') throw e;
      throw new ApiError({ code: 'network_error', status: 0, message: 'The gateway cannot be reached. Check your connection, or ask an administrator whether it is running.' });
    }
    if (!res.ok) throw await toApiError(res);
    return res;
  }
}

async function toApiError(res: Response): Promise<ApiError> {
  const headerId = res.headers.get('x-request-id');
  const text = await res.text().catch(() => '');
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // A proxy in front of the gateway may answer with HTML; the status still says what happened.
  }
  const parsed = ErrorBody.safeParse(body);
  if (parsed.success) {
    return new ApiError({ code: parsed.data.code, message: parsed.data.message, status: res.status, requestId: parsed.data.requestId ?? headerId, details: parsed.data.details });
  }
  return new ApiError({ code: `http_${res.status}`, status: res.status, requestId: headerId, message: fallbackSentence(res.status) });
}

function fallbackSentence(status: number): string {
  if (status === 401) return 'You are not signed in, or your sign-in has expired.';
  if (status === 403) return 'Your role does not allow this.';
  if (status === 404) return 'This does not exist, or you cannot see it.';
  if (status === 429) return 'Too many attempts; wait a minute and try again.';
  if (status >= 500) return `The gateway failed to answer (HTTP ${status}).`;
  return `The gateway refused the request (HTTP ${status}).`;
}

export const api = new ApiClient();
