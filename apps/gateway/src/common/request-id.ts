import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * One id per request, in every log line and every error body. A caller's `x-request-id` is kept
 * when it is harmless so a proxy's correlation id survives; anything else is replaced.
 */
export function requestIdFor(req: IncomingMessage, res: ServerResponse): string {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && ACCEPTABLE.test(incoming) ? incoming : randomUUID();
  res.setHeader('x-request-id', id);
  return id;
}

export function requestIdOf(req: unknown): string | undefined {
  const id = (req as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' ? id : undefined;
}
