import { SetMetadata, createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { AppAction, AppSubjectName } from '@lemniscate/policy';
import type { Principal } from './principal';

export const PERMISSION = 'lemniscate:permission';

export type RoutePermission = { kind: 'public'; why: string } | { kind: 'authenticated' } | { kind: 'ability'; action: AppAction; subject: AppSubjectName };

/**
 * Every route states what it needs; a route that states nothing is refused by the guard and fails
 * the route-permission coverage test.
 */
export const Can = (action: AppAction, subject: AppSubjectName) => SetMetadata(PERMISSION, { kind: 'ability', action, subject } satisfies RoutePermission);

/** Any signed-in person, whatever the role (their own profile, signing out). */
export const Authenticated = () => SetMetadata(PERMISSION, { kind: 'authenticated' } satisfies RoutePermission);

/** Reachable without credentials; the reason is required so a reviewer sees why. */
export const Public = (why: string) => SetMetadata(PERMISSION, { kind: 'public', why } satisfies RoutePermission);

export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  const principal = ctx.switchToHttp().getRequest<{ principal?: Principal }>().principal;
  if (!principal) throw new Error('CurrentPrincipal used on a route without authentication');
  return principal;
});
