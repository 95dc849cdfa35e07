import { RequestMethod, Type } from '@nestjs/common';
import { HTTP_CODE_METADATA, METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { API_PREFIX, UNPREFIXED } from '../app.constants';
import { PERMISSION, RoutePermission } from '../auth/permission.decorator';
import { RouteContract, routeContract } from '../common/zod-validation';

export interface RouteInfo {
  controller: string;
  handler: string;
  method: string;
  /** Express-style path without the global prefix, e.g. `/sessions/:id/stop`. */
  path: string;
  /** The status of a successful answer: `@HttpCode`, else Nest's default (201 for POST, 200 otherwise). */
  status: number;
  permission: RoutePermission | undefined;
  contract: RouteContract;
}

function join(...parts: string[]): string {
  const joined = parts
    .flatMap((p) => p.split('/'))
    .filter(Boolean)
    .join('/');
  return `/${joined}`;
}

function first(path: unknown): string {
  if (Array.isArray(path)) return String(path[0] ?? '');
  return typeof path === 'string' ? path : '';
}

/**
 * Every HTTP route a set of controllers declares, with its permission and contract. Used by the
 * OpenAPI generator and by the test that fails when a route declares no permission.
 */
export function listRoutes(controllers: Type[]): RouteInfo[] {
  const routes: RouteInfo[] = [];
  for (const controller of controllers) {
    const base = first(Reflect.getMetadata(PATH_METADATA, controller));
    const proto = controller.prototype as Record<string, unknown>;
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === 'constructor') continue;
      const fn = proto[name];
      if (typeof fn !== 'function') continue;
      const path = Reflect.getMetadata(PATH_METADATA, fn) as unknown;
      const method = Reflect.getMetadata(METHOD_METADATA, fn) as RequestMethod | undefined;
      if (path === undefined || method === undefined) continue;
      const permission = (Reflect.getMetadata(PERMISSION, fn) ?? Reflect.getMetadata(PERMISSION, controller)) as RoutePermission | undefined;
      routes.push({
        controller: controller.name,
        handler: name,
        method: RequestMethod[method] ?? String(method),
        path: join(base, first(path)),
        status: (Reflect.getMetadata(HTTP_CODE_METADATA, fn) as number | undefined) ?? (method === RequestMethod.POST ? 201 : 200),
        permission,
        contract: routeContract(proto, name),
      });
    }
  }
  return routes;
}

/** The path as served: under the API prefix unless it is a probe, the metrics or the API description. */
export function servedPath(path: string): string {
  return UNPREFIXED.some((p) => path === `/${p}` || path.startsWith(`/${p}/`)) ? path : `/${API_PREFIX}${path}`;
}
