import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { context, INVALID_SPAN_CONTEXT, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { tracingConfig, type TracingConfig } from './config';

/** Every span of Lemniscate comes from this one tracer (its instrumentation scope). */
const SCOPE = 'lemniscate';

let active: { provider: TracerProvider; config: TracingConfig } | null = null;

export interface Tracing {
  /** Whether spans are recorded and exported (an OTLP endpoint was named). */
  readonly enabled: boolean;
  /** Where spans go, when enabled. */
  readonly url: string | null;
  /** Sends what is queued, within the export timeout. */
  flush(): Promise<void>;
  /** Sends what is queued and stops; later spans are not recorded. */
  shutdown(): Promise<void>;
}

const OFF: Tracing = { enabled: false, url: null, flush: async () => undefined, shutdown: async () => undefined };

export interface StartTracingOptions {
  /** How long spans wait in the queue before they are sent (default 1 s; the CLI sends at exit). */
  scheduledDelayMs?: number;
  /** Bounds one export (default: the configuration's, 10 s); the CLI waits no longer than this at exit. */
  exportTimeoutMs?: number;
  version?: string;
}

/**
 * Starts tracing for this process when its environment names an OTLP endpoint (see config.ts):
 * a W3C trace-context propagator, an AsyncLocalStorage context, a batch processor with a bounded
 * queue (spans beyond it are dropped, never held: a collector that is down costs nothing but its
 * spans) and the OTLP/HTTP exporter. Once per process; off, it returns a Tracing that does nothing,
 * and every helper below is then a no-op. Throws TracingConfigError for a configuration that cannot work.
 */
export function startTracing(service: string, env: Record<string, string | undefined> = process.env, options: StartTracingOptions = {}): Tracing {
  const config = tracingConfig(service, env);
  if (!config) return OFF;
  if (active) throw new Error('Tracing is already started in this process.');
  const timeoutMs = options.exportTimeoutMs ?? config.timeoutMs;
  const exporter = new OTLPTraceExporter({ url: config.url, headers: config.headers, timeoutMillis: timeoutMs });
  const resource = resourceFromAttributes({ 'service.name': config.serviceName, ...(options.version ? { 'service.version': options.version } : {}) }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new TracerProvider({
    resource,
    sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
    spanProcessors: [new BatchSpanProcessor({ exporter, maxQueueSize: 4096, maxExportBatchSize: 512, scheduledDelayMillis: options.scheduledDelayMs ?? 1000, exportTimeoutMillis: timeoutMs })],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  active = { provider, config };
  return {
    enabled: true,
    url: config.url,
    flush: () => provider.forceFlush(),
    async shutdown() {
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
      active = null;
    },
  };
}

/** Whether this process records spans. */
export function tracingEnabled(): boolean {
  return active !== null;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent (default: the active context). */
  parent?: Context;
}

/**
 * Runs `fn` inside a new span, active for everything `fn` awaits; the span ends when `fn` settles,
 * with an error status and the error's type (never its message: a message may quote a command) when it throws.
 */
export async function withSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T>): Promise<T> {
  if (!active) return fn(trace.wrapSpanContext(INVALID_SPAN_CONTEXT));
  const parent = options.parent ?? context.active();
  const span = trace.getTracer(SCOPE).startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    span.setAttribute('error.type', errorType(err));
    throw err;
  } finally {
    span.end();
  }
}

function errorType(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[\w.-]{1,64}$/.test(code)) return code;
  return err instanceof Error ? err.name : 'unknown';
}

/** Adds attributes to the active span (nothing when no span records). */
export function setSpanAttributes(attributes: Attributes): void {
  if (active) trace.getActiveSpan()?.setAttributes(attributes);
}

/** Adds the active context's `traceparent` (and `tracestate`) to outgoing request headers. */
export function injectTraceHeaders(headers: Record<string, string>, ctx: Context = context.active()): Record<string, string> {
  if (active) propagation.inject(ctx, headers);
  return headers;
}

/**
 * The context a `traceparent` carrier names (request headers, or `{ traceparent: env.TRACEPARENT }`).
 * A malformed or all-zero value is ignored: the span starts a new trace.
 */
export function extractTraceContext(carrier: IncomingHttpHeaders | Record<string, string | undefined>): Context {
  if (!active) return ROOT_CONTEXT;
  const traceparent = carrier.traceparent;
  const tracestate = carrier.tracestate;
  const clean: Record<string, string> = {};
  if (typeof traceparent === 'string' && traceparent.length <= 55) clean.traceparent = traceparent;
  if (typeof tracestate === 'string' && tracestate.length <= 512) clean.tracestate = tracestate;
  return propagation.extract(ROOT_CONTEXT, clean);
}

/** The active span's W3C `traceparent`, if a span is recording. */
export function currentTraceparent(): string | null {
  const headers = injectTraceHeaders({});
  return headers.traceparent ?? null;
}

/**
 * An HTTP server's span per request, as Express middleware: the caller's W3C trace context
 * continued, named `METHOD route` from the route table (never the concrete path, never the query:
 * a query can carry a sign-in code), with the response status; 5xx marks it failed. The request's
 * and response's events run in its context so body parsing and handlers see it.
 */
export function traceHttpServer(routeOf: (method: string, path: string) => string | undefined) {
  return (req: IncomingMessage, res: ServerResponse, next: () => void): void => {
    if (!active) return next();
    const method = (req.method ?? 'GET').toUpperCase();
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const route = routeOf(method, path);
    const parent = extractTraceContext(req.headers);
    const span = trace
      .getTracer(SCOPE)
      .startSpan(route ? `${method} ${route}` : method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, ...(route ? { 'http.route': route } : {}) } }, parent);
    const ctx = trace.setSpan(parent, span);
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute('error.type', String(res.statusCode));
      }
      if (!res.writableFinished) span.setAttribute('lemniscate.http.aborted', true);
      span.end();
    };
    res.once('finish', end);
    res.once('close', end);
    context.bind(ctx, req);
    context.bind(ctx, res);
    context.with(ctx, next);
  };
}
