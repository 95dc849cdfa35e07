import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { AppError, ErrorCode } from '../common/errors';
import { AccessService } from './access.service';
import { AuthService, CSRF_HEADER, SESSION_COOKIE, isSafeMethod } from './auth.service';
import { PERMISSION, type RoutePermission } from './permission.decorator';
import type { Principal } from './principal';

type AuthenticatedRequest = Request & { principal?: Principal };

/**
 * Runs before every HTTP handler: a route without a declared permission is refused (secure by
 * default), a public one passes, anything else needs a valid credential and, for abilities, a role
 * that may perform the action at all. Record-level checks follow in the services.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly auth: AuthService,
    private readonly access: AccessService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const permission = this.reflector.getAllAndOverride<RoutePermission | undefined>(PERMISSION, [context.getHandler(), context.getClass()]);
    if (!permission) throw new AppError(ErrorCode.Forbidden, 'This route declares no permission, so the gateway refuses it.');
    if (permission.kind === 'public') return true;

    const req = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const cookies = (req as { cookies?: Record<string, string> }).cookies ?? {};
    const csrf = req.headers[CSRF_HEADER];
    const principal = await this.auth.authenticate({
      authorization: req.headers.authorization,
      sessionCookie: cookies[SESSION_COOKIE],
      csrfHeader: typeof csrf === 'string' ? csrf : undefined,
      safeMethod: isSafeMethod(req.method),
      ip: req.ip,
    });
    req.principal = principal;
    if (permission.kind === 'ability') {
      await this.access.requireRoute(principal, permission.action, permission.subject, `${req.method} ${req.route?.path ?? req.path}`);
    }
    return true;
  }
}
