import type { ErrorBody } from '@lemniscate/contracts';
import type { NextFunction, Request, Response } from 'express';
import { bearerToken, tokenMatches } from './token';

/**
 * Runs before routing, so every path (unknown ones included) needs the gateway's bearer token, and
 * a refusal says nothing about why or about which routes exist.
 */
export function requireToken(expected: string, onRefused?: () => void) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (tokenMatches(bearerToken(req.headers.authorization), expected)) return next();
    onRefused?.();
    const body: ErrorBody = { code: 'unauthorized', message: 'Authentication required.' };
    res.status(401).setHeader('www-authenticate', 'Bearer').json(body);
  };
}
