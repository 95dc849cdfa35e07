export { tracingConfig, TracingConfigError, type TracingConfig } from './config';
export {
  currentTraceparent,
  extractTraceContext,
  injectTraceHeaders,
  setSpanAttributes,
  startTracing,
  traceHttpServer,
  tracingEnabled,
  withSpan,
  type SpanOptions,
  type StartTracingOptions,
  type Tracing,
} from './tracing';
export { SpanKind, type Span } from '@opentelemetry/api';
