import { fillPath, pathParams, GatewayRoutes, gatewayApiPath, gatewayPath, matchGatewayRoute, GATEWAY_API_PREFIX, type GatewayRoute } from '../../../src/api/routes';

const entries = Object.entries(GatewayRoutes) as [string, GatewayRoute][];

describe('GatewayRoutes', () => {
  it('names every method and path once', () => {
    const keys = entries.map(([, r]) => `${r.method} ${r.path}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it.each(entries)('%s: its params schema names exactly the path parameters', (_, r) => {
    const names = pathParams(r.path);
    if (names.length === 0) return expect(r.params).toBeUndefined();
    const sample = Object.fromEntries(names.map((n) => [n, n === 'version' ? '3' : 'abc-1']));
    expect(r.params?.safeParse(sample).success).toBe(true);
    // One parameter too many is refused: the params schema is exactly the path's.
    expect(r.params?.safeParse({ ...sample, extra: 'x' }).success).toBe(false);
  });

  it.each(entries)('%s: a filled path matches the same route back, with its parameters', (name, r) => {
    const values = Object.fromEntries(pathParams(r.path).map((n, i) => [n, `v ${i}/x`]));
    const path = fillPath(r.path, values);
    expect(path).not.toContain(':');
    const matched = matchGatewayRoute(r.method, path);
    expect(matched?.name).toBe(name);
    expect(matched?.params).toEqual(values);
  });

  it.each(entries.filter(([, r]) => r.body !== undefined))('%s: its body refuses an unknown field', (_, r) => {
    const result = r.body!.safeParse({ unknownFieldXyz: true });
    expect(result.success).toBe(false);
    expect(JSON.stringify(result.error?.issues)).toContain('unknownFieldXyz');
  });

  it('gives paths relative to the API prefix, and refuses one outside it', () => {
    expect(gatewayApiPath(GatewayRoutes.startSubagent, { id: 's 1' })).toBe('/sessions/s%201/subagents');
    expect(gatewayPath(GatewayRoutes.startSubagent, { id: 's1' })).toBe(`${GATEWAY_API_PREFIX}/sessions/s1/subagents`);
    expect(() => gatewayApiPath(GatewayRoutes.healthz)).toThrow(/not under/);
  });

  it('matches literal segments before parameters and nothing for unknown routes', () => {
    expect(matchGatewayRoute('GET', '/api/v1/audit/kinds')?.name).toBe('auditKinds');
    expect(matchGatewayRoute('PUT', '/api/v1/sessions')).toBeUndefined();
    expect(matchGatewayRoute('GET', '/api/v1/sessions/s1/nope')).toBeUndefined();
  });
});

describe('GatewayRoutes queries', () => {
  /** The identity provider's answer carries parameters of its provider's own (Google: scope, authuser, prompt); no other query does. */
  const fromTheProvider = new Set(['oidcCallback']);
  it.each(entries.filter(([name, r]) => r.query !== undefined && !fromTheProvider.has(name)))('%s: its query refuses an unknown parameter', (_, r) => {
    expect(r.query!.safeParse({ unknownParamXyz: '1' }).success).toBe(false);
  });

  it("oidcCallback: the provider's own parameters are accepted but bounded", () => {
    const q = GatewayRoutes.oidcCallback.query;
    expect(q.safeParse({ state: 's', code: 'c', scope: 'openid email', authuser: '0' }).success).toBe(true);
    expect(q.safeParse({ state: 's', scope: 'x'.repeat(2001) }).success).toBe(false);
    expect(q.safeParse({ state: 's', scope: ['a', 'b'] }).success).toBe(false);
    expect(q.safeParse({ state: 's'.repeat(513) }).success).toBe(false);
  });
});
