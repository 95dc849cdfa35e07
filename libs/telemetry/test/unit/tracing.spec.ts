import { randomBytes } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OtlpReceiver } from '../../../../test/support/otlp-receiver';
import { currentTraceparent, injectTraceHeaders, startTracing, traceHttpServer, tracingEnabled, withSpan, type Tracing } from '../../src/tracing';

/**
 * The tracing helpers against a real OTLP/HTTP receiver: what a server span takes from a caller's
 * headers (and what it refuses), what never reaches a span, and that off means nothing at all.
 */

function serve(handler: (path: string) => number): Promise<{ server: Server; url: string }> {
  const middleware = traceHttpServer((method, path) => (path.startsWith('/things/') ? '/things/{id}' : path === '/' ? '/' : undefined));
  const server = createServer((req, res) =>
    middleware(req, res, () => {
      res.writeHead(handler(req.url ?? '/'), { 'content-type': 'text/plain' });
      res.end(currentTraceparent() ?? 'none');
    }),
  );
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })));
}

function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('tracing off (no endpoint named)', () => {
  it('starts nothing; spans, headers and the middleware do nothing', async () => {
    const tracing = startTracing('svc', {});
    expect(tracing.enabled).toBe(false);
    expect(tracingEnabled()).toBe(false);
    expect(await withSpan('x', {}, async () => 42)).toBe(42);
    expect(injectTraceHeaders({ a: 'b' })).toEqual({ a: 'b' });
    const { server, url } = await serve(() => 200);
    try {
      expect(await get(`${url}/things/1`, { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` })).toEqual({ status: 200, body: 'none' });
    } finally {
      server.close();
    }
  });
});

describe('tracing on', () => {
  const receiver = new OtlpReceiver('s3cret');
  let tracing: Tracing;
  let app: { server: Server; url: string };

  beforeAll(async () => {
    await receiver.start();
    tracing = startTracing('unit-svc', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20s3cret' }, { scheduledDelayMs: 50 });
    app = await serve((path) => (path.startsWith('/things/boom') ? 503 : 200));
  });
  afterAll(async () => {
    app.server.close();
    await tracing.shutdown();
    await receiver.close();
  });

  it('started once per process, with the credential the collector asks for', async () => {
    expect(tracing.enabled).toBe(true);
    expect(() => startTracing('again', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })).toThrow('Tracing is already started in this process.');
    await withSpan('probe', {}, async () => undefined);
    await tracing.flush();
    expect(receiver.spans.map((s) => s.name)).toContain('probe');
    expect(receiver.refused).toBe(0);
  });

  it("a server span continues the caller's trace, is named by route (never the path or the query), and its context reaches the handler", async () => {
    const traceId = randomBytes(16).toString('hex');
    const parent = randomBytes(8).toString('hex');
    const secret = randomBytes(8).toString('hex');
    const res = await get(`${app.url}/things/${secret}?code=${secret}&state=${secret}`, { traceparent: `00-${traceId}-${parent}-01` });
    // The handler sees the server span as active: the traceparent it would send on carries the same trace.
    expect(res.body).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    await tracing.flush();
    const span = receiver.spans.find((s) => s.traceId === traceId)!;
    expect(span).toMatchObject({ service: 'unit-svc', name: 'GET /things/{id}', parentSpanId: parent, kind: 2, status: 0 });
    expect(span.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.route': '/things/{id}', 'http.response.status_code': 200 });
    expect(res.body.split('-')[2]).toBe(span.spanId);
    expect(JSON.stringify(receiver.spans)).not.toContain(secret);
  });

  it('a path outside the route table is named by its method only', async () => {
    const secret = randomBytes(8).toString('hex');
    const traceId = randomBytes(16).toString('hex');
    await get(`${app.url}/elsewhere/${secret}`, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` });
    await tracing.flush();
    expect(receiver.spans.find((s) => s.traceId === traceId)).toMatchObject({ name: 'GET' });
    expect(JSON.stringify(receiver.spans)).not.toContain(secret);
  });

  it('a 5xx answer marks the span failed', async () => {
    const traceId = randomBytes(16).toString('hex');
    expect((await get(`${app.url}/things/boom`, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` })).status).toBe(503);
    await tracing.flush();
    expect(receiver.spans.find((s) => s.traceId === traceId)).toMatchObject({ status: 2, attributes: expect.objectContaining({ 'error.type': '503' }) });
  });

  // What a caller may send in place of a trace context: each is ignored and the span starts a new trace.
  const forged: [string, Record<string, string>][] = [
    ['not hex', { traceparent: `00-${'z'.repeat(32)}-${'b'.repeat(16)}-01` }],
    ['an all-zero trace id', { traceparent: `00-${'0'.repeat(32)}-${'b'.repeat(16)}-01` }],
    ['an all-zero parent id', { traceparent: `00-${'a'.repeat(32)}-${'0'.repeat(16)}-01` }],
    ['version ff', { traceparent: `ff-${'a'.repeat(32)}-${'b'.repeat(16)}-01` }],
    ['too short', { traceparent: '00-abc-def-01' }],
    ['too long (padding after a valid one)', { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01${'-x'.repeat(2000)}` }],
    ['a line of garbage', { traceparent: 'hello' }],
  ];
  it.each(forged)('a forged traceparent (%s) starts a new trace', async (_, headers) => {
    const marker = randomBytes(4).toString('hex');
    const res = await get(`${app.url}/things/${marker}`, headers);
    const [, traceId] = res.body.split('-');
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(traceId).not.toBe('a'.repeat(32));
    await tracing.flush();
    const span = receiver.spans.find((s) => s.traceId === traceId)!;
    expect(span.parentSpanId).toBe('');
  });

  it('an oversized tracestate is dropped, the trace kept', async () => {
    const traceId = randomBytes(16).toString('hex');
    const res = await get(`${app.url}/things/1`, { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`, tracestate: `k=${'v'.repeat(5000)}` });
    expect(res.body.split('-')[1]).toBe(traceId);
    const injected = await withSpan('outgoing', {}, async () => injectTraceHeaders({}));
    expect(injected.tracestate).toBeUndefined();
  });

  it("a failed span records the error's type, never its message (a message may quote a command)", async () => {
    const secret = randomBytes(8).toString('hex');
    const err = Object.assign(new Error(`the command "echo ${secret}" failed`), { code: 'sandbox_lost' });
    await expect(withSpan('fails', {}, async () => Promise.reject(err))).rejects.toBe(err);
    await withSpan('fails-plain', {}, async () => Promise.reject(new TypeError(secret))).catch(() => undefined);
    await tracing.flush();
    expect(receiver.spans.find((s) => s.name === 'fails')).toMatchObject({ status: 2, attributes: { 'error.type': 'sandbox_lost' } });
    expect(receiver.spans.find((s) => s.name === 'fails-plain')).toMatchObject({ status: 2, attributes: { 'error.type': 'TypeError' } });
    expect(JSON.stringify(receiver.spans)).not.toContain(secret);
  });

  it('nested spans form a tree; headers injected inside carry the innermost span', async () => {
    const ids = await withSpan('outer', {}, async (outer) =>
      withSpan('inner', {}, async (inner) => ({ outer: outer.spanContext().spanId, inner: inner.spanContext().spanId, header: injectTraceHeaders({}).traceparent })),
    );
    expect(ids.header).toBe(`00-${ids.header!.split('-')[1]}-${ids.inner}-01`);
    await tracing.flush();
    expect(receiver.spans.find((s) => s.spanId === ids.inner)?.parentSpanId).toBe(ids.outer);
  });
});
