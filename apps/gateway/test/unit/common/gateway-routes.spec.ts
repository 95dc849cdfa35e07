import { GatewayRoutes, type GatewayRoute } from '@lemniscate/contracts';
import { CONTROLLERS } from '../../../src/app.module';
import { listRoutes, servedPath, type RouteInfo } from '../../../src/openapi/routes';

/**
 * The gateway serves exactly the routes of libs/contracts' GatewayRoutes, with the table's own
 * schemas: a controller route missing from the table, a table entry no controller serves, or a
 * controller validating with a schema other than the table's fails here, so the CLI and the console
 * (which build their requests from the table) cannot drift from the server unnoticed.
 */
const key = (method: string, path: string) => `${method} ${path}`;
const served = listRoutes(CONTROLLERS).map((r) => ({ ...r, path: servedPath(r.path) }));
const table = Object.entries(GatewayRoutes) as [string, GatewayRoute][];
const byKey = new Map(table.map(([name, r]) => [key(r.method, r.path), { name, route: r }]));

describe('GatewayRoutes and the controllers', () => {
  it('every controller route is in the table', () => {
    const missing = served.filter((r) => !byKey.has(key(r.method, r.path))).map((r) => `${r.controller}.${r.handler}: ${key(r.method, r.path)}`);
    expect(missing).toEqual([]);
  });

  it('every table entry is served by a controller', () => {
    const servedKeys = new Set(served.map((r) => key(r.method, r.path)));
    expect(table.filter(([, r]) => !servedKeys.has(key(r.method, r.path))).map(([name, r]) => `${name}: ${key(r.method, r.path)}`)).toEqual([]);
  });

  describe.each(served.map((r) => [`${r.controller}.${r.handler}`, r] as [string, RouteInfo]))('%s', (_, r) => {
    const entry = byKey.get(key(r.method, r.path));
    const route = entry?.route;

    it('validates params, query and body with the schemas of the table (the same objects)', () => {
      expect(route).toBeDefined();
      const same = Object.fromEntries((['params', 'query', 'body'] as const).map((part) => [part, r.contract[part] === route?.[part]]));
      expect(same).toEqual({ params: true, query: true, body: true });
    });

    it("declares the table's response schema and answers with the table's status", () => {
      expect(r.contract.response === route?.response).toBe(true);
      expect(r.status).toBe(route?.status);
      expect(r.contract.status).toBe(route?.status);
    });
  });
});
