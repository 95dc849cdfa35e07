import { tracingConfig, TracingConfigError } from '../../src/config';

const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

describe('tracingConfig: off unless an OTLP endpoint is named', () => {
  it.each([
    ['nothing set', {}],
    ['only a service name', { OTEL_SERVICE_NAME: 'x' }],
    ['an empty endpoint', { OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }],
    ['OTEL_TRACES_EXPORTER=none', { ...base, OTEL_TRACES_EXPORTER: 'none' }],
    ['OTEL_SDK_DISABLED=true', { ...base, OTEL_SDK_DISABLED: 'true' }],
    ['OTEL_SDK_DISABLED=TRUE', { ...base, OTEL_SDK_DISABLED: 'TRUE' }],
  ])('%s → off', (_, env) => {
    expect(tracingConfig('svc', env)).toBeNull();
  });

  it('a base endpoint gets /v1/traces; a traces endpoint is taken as it is and wins', () => {
    expect(tracingConfig('svc', base)).toEqual({ url: 'http://collector:4318/v1/traces', headers: {}, serviceName: 'svc', timeoutMs: 10_000 });
    expect(tracingConfig('svc', { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c.example/otlp/' })?.url).toBe('https://c.example/otlp/v1/traces');
    expect(tracingConfig('svc', { ...base, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://t.example/custom' })?.url).toBe('https://t.example/custom');
  });

  it('headers (percent-decoded, traces-specific ones win), the service name and the timeout', () => {
    const c = tracingConfig('svc', {
      ...base,
      OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Bearer%20abc, x-tenant=t1',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-tenant=t2',
      OTEL_SERVICE_NAME: 'gw-eu',
      OTEL_EXPORTER_OTLP_TIMEOUT: '2500',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    });
    expect(c).toEqual({ url: 'http://collector:4318/v1/traces', headers: { authorization: 'Bearer abc', 'x-tenant': 't2' }, serviceName: 'gw-eu', timeoutMs: 2500 });
    expect(tracingConfig('svc', { ...base, OTEL_EXPORTER_OTLP_TIMEOUT: '2500', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '700' })?.timeoutMs).toBe(700);
  });

  // Every variable × every kind of value that cannot work: refused with a sentence naming the variable.
  const bad: [string, Record<string, string>, RegExp][] = [
    ['endpoint not a URL', { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /^OTEL_EXPORTER_OTLP_ENDPOINT (is not a URL|must be an http)/],
    ['endpoint gRPC scheme', { OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://c:4317' }, /^OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ address/],
    ['endpoint file scheme', { OTEL_EXPORTER_OTLP_ENDPOINT: 'file:///tmp/x' }, /^OTEL_EXPORTER_OTLP_ENDPOINT must be an http/],
    ['endpoint with a password', { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://u:p@c.example' }, /^OTEL_EXPORTER_OTLP_ENDPOINT must not carry a user name or password/],
    ['traces endpoint not a URL', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '::' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not a URL/],
    ['traces endpoint ftp', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://c/x' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http/],
    ['exporter zipkin', { ...base, OTEL_TRACES_EXPORTER: 'zipkin' }, /^OTEL_TRACES_EXPORTER="zipkin": Lemniscate exports traces over OTLP only/],
    ['protocol grpc', { ...base, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTLP protocol "grpc" is not supported/],
    ['traces protocol grpc', { ...base, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }, /^OTLP protocol "grpc" is not supported/],
    ['header without =', { ...base, OTEL_EXPORTER_OTLP_HEADERS: 'token' }, /^OTEL_EXPORTER_OTLP_HEADERS must be a list of name=value pairs/],
    ['header with an empty name', { ...base, OTEL_EXPORTER_OTLP_HEADERS: '=v' }, /^OTEL_EXPORTER_OTLP_HEADERS must be a list/],
    ['header name with a space', { ...base, OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'a b=c' }, /^OTEL_EXPORTER_OTLP_TRACES_HEADERS must be a list/],
    ['header with bad percent-encoding', { ...base, OTEL_EXPORTER_OTLP_HEADERS: 'a=%zz' }, /^OTEL_EXPORTER_OTLP_HEADERS: the value of a is not valid percent-encoding/],
    ['header smuggling a line break', { ...base, OTEL_EXPORTER_OTLP_HEADERS: 'a=b%0d%0aX-Evil: 1' }, /^OTEL_EXPORTER_OTLP_HEADERS: the value of a holds a line break/],
    ['timeout not a number', { ...base, OTEL_EXPORTER_OTLP_TIMEOUT: '10s' }, /^OTEL_EXPORTER_OTLP_TIMEOUT must be a number of milliseconds above 0/],
    ['timeout zero', { ...base, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '0' }, /^OTEL_EXPORTER_OTLP_TRACES_TIMEOUT must be a number/],
    ['timeout negative', { ...base, OTEL_EXPORTER_OTLP_TIMEOUT: '-1' }, /^OTEL_EXPORTER_OTLP_TIMEOUT must be a number/],
  ];
  it.each(bad)('%s → refused with a sentence', (_, env, message) => {
    expect(() => tracingConfig('svc', env)).toThrow(TracingConfigError);
    expect(() => tracingConfig('svc', env)).toThrow(message);
  });

  it('a refused value is quoted only in part: a long value is not repeated whole', () => {
    const long = `http${'x'.repeat(5000)}`;
    expect(() => tracingConfig('svc', { OTEL_EXPORTER_OTLP_ENDPOINT: long })).toThrow(/^OTEL_EXPORTER_OTLP_ENDPOINT is not a URL: "httpx{196}"\. Name the collector/);
  });
});
