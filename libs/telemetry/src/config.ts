/**
 * Whether and where traces go, read from OpenTelemetry's own environment variables so an operator
 * configures Lemniscate like any other instrumented service. Off unless an OTLP endpoint is named.
 */
export interface TracingConfig {
  /** The OTLP/HTTP traces URL (`…/v1/traces`). */
  url: string;
  /** Sent with every export (OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS): a collector's credential. */
  headers: Record<string, string>;
  /** The service name, unless OTEL_SERVICE_NAME names another. */
  serviceName: string;
  /** One export's bound (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT / OTEL_EXPORTER_OTLP_TIMEOUT, default 10 s). */
  timeoutMs: number;
}

export class TracingConfigError extends Error {
  override readonly name = 'TracingConfigError';
}

type Env = Record<string, string | undefined>;

const set = (v: string | undefined): string | undefined => (v !== undefined && v.trim() !== '' ? v.trim() : undefined);

/** `k=v,k2=v2`, values percent-encoded (the OpenTelemetry specification's format). */
function parseHeaders(name: string, text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text) return out;
  for (const pair of text.split(',')) {
    if (pair.trim() === '') continue;
    const eq = pair.indexOf('=');
    const key = eq > 0 ? pair.slice(0, eq).trim() : '';
    if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(key)) throw new TracingConfigError(`${name} must be a list of name=value pairs separated by commas; "${pair.trim().slice(0, 40)}" is not one.`);
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      throw new TracingConfigError(`${name}: the value of ${key} is not valid percent-encoding.`);
    }
    if (/[\r\n]/.test(value)) throw new TracingConfigError(`${name}: the value of ${key} holds a line break.`);
    out[key.toLowerCase()] = value;
  }
  return out;
}

function parseUrl(name: string, text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new TracingConfigError(`${name} is not a URL: "${text.slice(0, 200)}". Name the collector's OTLP/HTTP address, e.g. http://otel-collector:4318.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TracingConfigError(`${name} must be an http:// or https:// address (OTLP over HTTP); "${url.protocol}" is not.`);
  if (url.username || url.password) throw new TracingConfigError(`${name} must not carry a user name or password; give a collector's credential in OTEL_EXPORTER_OTLP_HEADERS.`);
  return url;
}

function parseTimeout(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,7}$/.test(text) || Number(text) === 0) throw new TracingConfigError(`${name} must be a number of milliseconds above 0; "${text.slice(0, 40)}" is not.`);
  return Number(text);
}

/**
 * The tracing configuration of `service`, or null when tracing is off: no OTLP endpoint named,
 * OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true. Throws TracingConfigError with a sentence
 * for a value that cannot work (an address that is not http(s), gRPC asked for, a malformed header).
 */
export function tracingConfig(service: string, env: Env): TracingConfig | null {
  if (set(env.OTEL_SDK_DISABLED)?.toLowerCase() === 'true') return null;
  const exporter = set(env.OTEL_TRACES_EXPORTER)?.toLowerCase();
  if (exporter === 'none') return null;
  if (exporter !== undefined && exporter !== 'otlp')
    throw new TracingConfigError(`OTEL_TRACES_EXPORTER="${exporter.slice(0, 40)}": Lemniscate exports traces over OTLP only (otlp, or none to turn them off).`);
  const protocol = set(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) ?? set(env.OTEL_EXPORTER_OTLP_PROTOCOL);
  if (protocol !== undefined && protocol !== 'http/json' && protocol !== 'http/protobuf') {
    throw new TracingConfigError(`OTLP protocol "${protocol.slice(0, 40)}" is not supported: Lemniscate sends OTLP over HTTP (JSON), which a collector's OTLP/HTTP receiver (port 4318) accepts.`);
  }
  const tracesEndpoint = set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const endpoint = set(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  let url: string;
  if (tracesEndpoint !== undefined) url = parseUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', tracesEndpoint).toString();
  else if (endpoint !== undefined) {
    const base = parseUrl('OTEL_EXPORTER_OTLP_ENDPOINT', endpoint);
    url = new URL(`${base.pathname.replace(/\/+$/, '')}/v1/traces`, base).toString();
  } else return null;
  const headers = {
    ...parseHeaders('OTEL_EXPORTER_OTLP_HEADERS', set(env.OTEL_EXPORTER_OTLP_HEADERS)),
    ...parseHeaders('OTEL_EXPORTER_OTLP_TRACES_HEADERS', set(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS)),
  };
  const timeoutMs =
    parseTimeout('OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', set(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT)) ?? parseTimeout('OTEL_EXPORTER_OTLP_TIMEOUT', set(env.OTEL_EXPORTER_OTLP_TIMEOUT)) ?? 10_000;
  return { url, headers, serviceName: set(env.OTEL_SERVICE_NAME) ?? service, timeoutMs };
}
