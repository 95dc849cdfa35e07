import { CONTROLLERS } from '../../../src/app.module';
import { listRoutes } from '../../../src/openapi/routes';
import { buildOpenApi } from '../../../src/openapi/openapi';

describe('OpenAPI from the zod contracts', () => {
  const doc = buildOpenApi(listRoutes(CONTROLLERS), '/api/v1', '1') as {
    openapi: string;
    paths: Record<
      string,
      Record<
        string,
        {
          parameters: { name: string; in: string; required: boolean }[];
          requestBody?: { content: Record<string, { schema: { properties: Record<string, unknown>; required: string[] } }> };
          responses: Record<string, unknown>;
          security?: unknown;
          'x-permission': unknown;
        }
      >
    >;
  };

  it('describes every route with its permission', () => {
    expect(doc.openapi).toBe('3.1.0');
    const operations = Object.values(doc.paths).flatMap((p) => Object.values(p));
    expect(operations).toHaveLength(listRoutes(CONTROLLERS).length);
    for (const op of operations) expect(op['x-permission']).not.toBeNull();
  });

  it('takes request bodies, path and query parameters from the same schemas the handlers validate with', () => {
    const createUser = doc.paths['/api/v1/users']?.post;
    const body = createUser?.requestBody?.content['application/json']?.schema;
    expect(Object.keys(body?.properties ?? {})).toEqual(['email', 'displayName', 'role', 'password', 'projectIds']);
    expect(body?.required).toEqual(['email', 'displayName', 'role', 'password']);
    const show = doc.paths['/api/v1/projects/{projectId}/policy/versions/{version}']?.get;
    expect(show?.parameters.map((p) => [p.name, p.in, p.required])).toEqual([
      ['projectId', 'path', true],
      ['version', 'path', true],
    ]);
    const diff = doc.paths['/api/v1/projects/{projectId}/policy/diff']?.get;
    expect(diff?.parameters.filter((p) => p.in === 'query').map((p) => p.name)).toEqual(['from', 'to']);
    expect(Object.keys(createUser?.responses ?? {})).toEqual(['201', 'default']);
  });

  it('marks only public routes as needing no credentials', () => {
    expect(doc.paths['/api/v1/auth/login']?.post?.security).toBeUndefined();
    expect(doc.paths['/api/v1/sessions']?.post?.security).toBeDefined();
  });
});
