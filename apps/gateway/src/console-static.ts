import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NextFunction, Request, Response } from 'express';
import { static as serveStatic } from 'express';

/** The console's build: LEMNISCATE_CONSOLE_DIR, else apps/console/dist next to this app. */
function consoleDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.LEMNISCATE_CONSOLE_DIR ?? resolve(__dirname, '..', '..', 'console', 'dist');
}

/**
 * Pages get a strict Content-Security-Policy: scripts only from the gateway itself (no inline
 * script, no eval), data only from the gateway's own API and event stream, never framed.
 */
const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // CodeMirror and the charts set element styles at run time.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "object-src 'none'",
].join('; ');

const NOT_PAGES = /^\/(api|healthz|readyz|metrics)(\/|$)/;

/**
 * Serves the single-page console: its files, and index.html for any other GET that is not the API,
 * so a reload on /approvals works. Without a build, the API runs alone and `/` says how to build it.
 */
export function serveConsole(app: NestExpressApplication, dir = consoleDir()): boolean {
  const index = join(dir, 'index.html');
  if (!existsSync(index)) {
    app.use('/', (req: Request, res: Response, next: NextFunction) => {
      if (req.method !== 'GET' || req.path !== '/') return next();
      res.status(503).type('text/plain').send('The console is not built: run `npm start` (or `npx vite build` in apps/console). The API is at /api/v1.\n');
    });
    return false;
  }
  const html = readFileSync(index, 'utf8');
  app.use(serveStatic(dir, { index: false, fallthrough: true, maxAge: '1h', setHeaders: (res) => res.setHeader('content-security-policy', CONSOLE_CSP) }));
  app.use((req: Request, res: Response, next: NextFunction) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || NOT_PAGES.test(req.path)) return next();
    res.setHeader('content-security-policy', CONSOLE_CSP);
    res.setHeader('cache-control', 'no-cache');
    res.type('html').send(html);
  });
  return true;
}
