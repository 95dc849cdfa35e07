import { z } from 'zod';
import { fillPath, GatewayRoutes, matchGatewayRoute, pathParams, type GatewayRoute } from '@lemniscate/contracts';
import { ApiClient, ApiError, type Fetch } from '../../../src/api/client';
import { routes } from '../../../src/api/routes';

type Seen = { url: string; init: RequestInit };

function fakeFetch(respond: (req: Seen) => Response | Promise<Response>): { fetch: Fetch; seen: Seen[] } {
  const seen: Seen[] = [];
  return {
    seen,
    fetch: async (url, init) => {
      seen.push({ url, init });
      return respond({ url, init });
    },
  };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

describe('ApiClient', () => {
  it('sends the CSRF token on writes only, with the session cookie', async () => {
    const f = fakeFetch(() => json(200, { ok: true }));
    const client = new ApiClient('/api/v1', f.fetch);
    client.setCsrfToken('tok');
    await client.json(z.object({ ok: z.literal(true) }), '/things', { query: { a: 1, empty: '', none: undefined } });
    await client.json(z.object({ ok: z.literal(true) }), '/things', { method: 'POST', body: { x: 1 } });
    expect(f.seen[0]!.url).toBe('/api/v1/things?a=1');
    expect((f.seen[0]!.init.headers as Record<string, string>)['x-csrf-token']).toBeUndefined();
    expect((f.seen[1]!.init.headers as Record<string, string>)['x-csrf-token']).toBe('tok');
    expect(f.seen[1]!.init.credentials).toBe('same-origin');
    expect(f.seen[1]!.init.body).toBe('{"x":1}');
  });

  it("carries the server's code, sentence and request id", async () => {
    const f = fakeFetch(() => json(403, { code: 'forbidden', message: 'Your role does not allow publishing a policy.', requestId: 'req_1' }));
    const err = await new ApiClient('/api/v1', f.fetch).json(z.unknown(), '/x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: 'forbidden', status: 403, message: 'Your role does not allow publishing a policy.', requestId: 'req_1' });
  });

  it('explains a refusal without a JSON body from its status, keeping the request id header', async () => {
    const f = fakeFetch(() => new Response('<html>Bad gateway</html>', { status: 502, headers: { 'x-request-id': 'req_2' } }));
    const err = await new ApiClient('/api/v1', f.fetch).json(z.unknown(), '/x').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'http_502', status: 502, requestId: 'req_2', message: 'The gateway failed to answer (HTTP 502).' });
  });

  it('says when the gateway cannot be reached', async () => {
    const f = fakeFetch(() => Promise.reject(new TypeError('fetch failed')));
    const err = await new ApiClient('/api/v1', f.fetch).json(z.unknown(), '/x').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'network_error', status: 0 });
    expect((err as Error).message).toContain('cannot be reached');
  });

  it('refuses an answer that does not match the contract, naming the field', async () => {
    const f = fakeFetch(() => json(200, { id: 42 }));
    const err = await new ApiClient('/api/v1', f.fetch).json(z.object({ id: z.string() }), '/x').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'invalid_response' });
    expect((err as Error).message).toContain('id:');
  });

  it('passes an abort through untouched, so cancelled queries are not shown as failures', async () => {
    const f = fakeFetch(() => Promise.reject(new DOMException('aborted', 'AbortError')));
    const err = await new ApiClient('/api/v1', f.fetch).json(z.unknown(), '/x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DOMException);
  });

  it('reads a download with the file name the server gives', async () => {
    const f = fakeFetch(() => new Response('a,b\r\n', { status: 200, headers: { 'content-disposition': 'attachment; filename="audit.csv"' } }));
    const { blob, filename } = await new ApiClient('/api/v1', f.fetch).blob('/audit/export');
    expect(filename).toBe('audit.csv');
    expect(await blob.text()).toBe('a,b\r\n');
  });
});

describe('ApiClient.call: every request from libs/contracts GatewayRoutes', () => {
  const jsonRoutes = (Object.entries(GatewayRoutes) as [string, GatewayRoute][]).filter(([, r]) => r.response !== undefined && r.path.startsWith('/api/v1/'));

  it.each(jsonRoutes)("%s: method and path from the table, the answer checked against the route's response schema", async (_, route) => {
    const f = fakeFetch(() => json(route.status, { surely: 'not this shape' }));
    const client = new ApiClient('/api/v1', f.fetch);
    const params = Object.fromEntries(pathParams(route.path).map((n) => [n, n === 'version' ? 2 : 'id 1']));
    const e = await client.call(route as GatewayRoute & { response: z.ZodType }, { params } as never).catch((err: unknown) => err);
    expect(f.seen[0]!.init.method).toBe(route.method);
    expect(f.seen[0]!.url).toBe(fillPath(route.path, params));
    expect(matchGatewayRoute(route.method, f.seen[0]!.url)?.route).toBe(route);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).code).toBe('invalid_response');
  });

  it('the paths the console names outside call() are routes of the table', () => {
    expect(matchGatewayRoute('GET', `/api/v1${routes.auditExport}`)?.name).toBe('auditExport');
  });
});
