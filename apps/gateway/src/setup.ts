import { INestApplication, RequestMethod } from '@nestjs/common';
import { WsAdapter } from '@nestjs/platform-ws';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Limits, matchGatewayRoute, tooLargeMessage } from '@lemniscate/contracts';
import { traceHttpServer } from '@lemniscate/telemetry';
import cookieParser from 'cookie-parser';
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { Logger } from 'nestjs-pino';
import { API_PREFIX, UNPREFIXED } from './app.constants';
import { AppError, ErrorCode } from './common/errors';
import { requestIdFor } from './common/request-id';
import { serveConsole } from './console-static';
import type { GatewayConfig } from './config/config';
import { MetricsService } from './metrics/metrics.service';

/**
 * A session start carries the developer's starting patch, up to Limits.startingPatchBytes, so its body
 * may be as large as Limits.sessionRequestBodyBytes; every other request is held to
 * Limits.requestBodyBytes. A body over its limit is refused before it is read, with the limit's sentence.
 */
const SESSION_START_PATH = `/${API_PREFIX}/sessions`;

function startsSession(req: IncomingMessage): boolean {
  const path = (req.url ?? '').split('?')[0]?.replace(/\/+$/, '');
  return req.method === 'POST' && path === SESSION_START_PATH;
}

function isSessionStart(req: IncomingMessage): boolean {
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  return startsSession(req) && type === 'application/json';
}

/** The body limit of a request, by its route. */
function bodyLimitOf(req: IncomingMessage): 'sessionRequestBodyBytes' | 'requestBodyBytes' {
  return startsSession(req) ? 'sessionRequestBodyBytes' : 'requestBodyBytes';
}

/** The largest refused body still read to its end (and discarded) so its client hears the refusal. */
export function lingerBytes(limit: 'sessionRequestBodyBytes' | 'requestBodyBytes'): number {
  return Math.min(4 * Limits[limit], 256 * 1024 * 1024);
}

/**
 * Everything an application instance needs beyond its module: the same for `main.ts` and for tests,
 * so what is tested is what runs. The app must be created with `{ bodyParser: false, bufferLogs: true }`.
 */
export function configureApp(app: INestApplication, config: GatewayConfig): void {
  const express = app as NestExpressApplication;
  express.useLogger(app.get(Logger));
  // First of all, so even a request whose body cannot be parsed gets an id in its error body.
  express.use((req: Request & { id?: string; cookieSecure?: boolean }, res: Response, next: NextFunction) => {
    req.id = requestIdFor(req, res);
    req.cookieSecure = config.cookieSecure;
    next();
  });
  // A span per request, continuing the caller's W3C trace context (a no-op unless tracing is on).
  express.use(traceHttpServer((method, path) => matchGatewayRoute(method, path)?.route.path));
  const metrics = app.get(MetricsService);
  express.use((req: Request, res: Response, next: NextFunction) => {
    const end = metrics.httpDuration.startTimer();
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      end({ method: req.method, route });
      metrics.httpRequests.inc({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  });
  // A body announced over its limit is refused from its header, before a byte of it is parsed. A body
  // of a size a client may reasonably send is then read and thrown away (Node discards what the handler
  // did not consume), so the client, still writing, reads the sentence instead of a reset connection;
  // a body announced far beyond it is not worth the bandwidth, and the connection is closed.
  express.use((req: Request, res: Response, next: NextFunction) => {
    const limit = bodyLimitOf(req);
    const length = Number(req.headers['content-length']);
    if (!Number.isFinite(length) || length <= Limits[limit]) return next();
    if (length > lingerBytes(limit)) res.setHeader('connection', 'close');
    next(new AppError(ErrorCode.ValidationFailed, tooLargeMessage(limit, length)));
  });
  express.useBodyParser('json', { limit: Limits.sessionRequestBodyBytes, type: isSessionStart });
  express.useBodyParser('json', { limit: Limits.requestBodyBytes });
  express.use(cookieParser());
  express.disable('x-powered-by');
  express.set('trust proxy', config.trustProxyHops);
  express.use((_req: Request, res: Response, next: NextFunction) => {
    // API answers are data, never pages to sniff, frame or leak a referrer from.
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('x-frame-options', 'DENY');
    res.setHeader('referrer-policy', 'no-referrer');
    next();
  });
  serveConsole(express);
  app.setGlobalPrefix(API_PREFIX, { exclude: UNPREFIXED.map((path) => ({ path, method: RequestMethod.ALL })) });
  app.useWebSocketAdapter(new WsAdapter(app));
}
