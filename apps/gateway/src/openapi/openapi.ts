import { z } from 'zod';
import { ErrorBody } from '@lemniscate/contracts';
import type { RouteInfo } from './routes';

type JsonSchema = Record<string, unknown>;

function schemaOf(s: z.ZodType, io: 'input' | 'output'): JsonSchema {
  // `unrepresentable: 'any'` keeps the document whole when a contract carries a refinement or an
  // unknown payload: the schema is then looser than the validator, never stricter.
  const { $schema: _ignored, ...rest } = z.toJSONSchema(s, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

function parametersOf(s: z.ZodType | undefined, where: 'path' | 'query', pathParams: string[]): JsonSchema[] {
  if (!s) return where === 'path' ? pathParams.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })) : [];
  const json = schemaOf(s, 'input');
  const props = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, schema]) => ({ name, in: where, required: where === 'path' || required.has(name), schema }));
}

/** OpenAPI 3.1 generated from the same zod contracts the handlers validate with. */
export function buildOpenApi(routes: RouteInfo[], prefix: string, version: string): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  const errorSchema = schemaOf(ErrorBody, 'output');
  for (const r of routes) {
    const full = `${prefix}${r.path}`.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const pathParams = [...r.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1] ?? '');
    const op: JsonSchema = {
      operationId: `${r.controller.replace(/Controller$/, '')}_${r.handler}`,
      summary: r.contract.summary ?? r.handler,
      tags: [r.controller.replace(/Controller$/, '')],
      parameters: [...parametersOf(r.contract.params, 'path', pathParams), ...parametersOf(r.contract.query, 'query', [])],
      responses: {
        [String(r.contract.status ?? 200)]: {
          description: r.contract.summary ?? 'OK',
          ...(r.contract.response ? { content: { 'application/json': { schema: schemaOf(r.contract.response, 'output') } } } : {}),
        },
        default: { description: 'A coded error', content: { 'application/json': { schema: errorSchema } } },
      },
      'x-permission': r.permission ?? null,
    };
    if (r.permission?.kind !== 'public') op.security = [{ bearer: [] }, { cookie: [] }];
    if (r.contract.body) op.requestBody = { required: true, content: { 'application/json': { schema: schemaOf(r.contract.body, 'input') } } };
    (paths[full] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Lemniscate gateway', version },
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A personal API token (`lemni_…`).' },
        cookie: { type: 'apiKey', in: 'cookie', name: 'lemni_session', description: 'Console session; writes also need the `x-csrf-token` header.' },
      },
    },
  };
}
