import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { CookieJar } from './auth.service';
import { SESSION_COOKIE } from './auth.service';

/** Secure is set when the gateway is told it is served over HTTPS (see LEMNISCATE_COOKIE_SECURE). */
function cookieJarFor(res: Response, secure: boolean): CookieJar {
  const base = { httpOnly: true, sameSite: 'strict' as const, secure, path: '/' };
  return {
    set: (value, maxAgeMs) => res.cookie(SESSION_COOKIE, value, { ...base, maxAge: maxAgeMs }),
    clear: () => res.clearCookie(SESSION_COOKIE, base),
  };
}

/** The session cookie jar of this response; `secure` comes from the app's configuration, stored on the request. */
export const SessionCookie = createParamDecorator((_: unknown, ctx: ExecutionContext): CookieJar => {
  const http = ctx.switchToHttp();
  const req = http.getRequest<Request & { cookieSecure?: boolean }>();
  return cookieJarFor(http.getResponse<Response>(), req.cookieSecure === true);
});

export const ClientIp = createParamDecorator((_: unknown, ctx: ExecutionContext): string => {
  const req = ctx.switchToHttp().getRequest<Request>();
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
});
