import type { ErrorBody } from '@lemniscate/contracts';
import type { NextFunction, Request, Response } from 'express';
import type { TLSSocket } from 'node:tls';

/**
 * With mutual TLS the handshake already refused a client without a certificate from the client CA;
 * this refuses one whose common name is not allowed, so that another exec-host (its certificate comes
 * from the same CA) cannot call this one. Runs before the token check and before routing.
 */
export function requireClientName(allowed: readonly string[], onRefused?: () => void) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const socket = req.socket as TLSSocket;
    const cn = socket.encrypted && socket.authorized ? socket.getPeerCertificate()?.subject?.CN : undefined;
    // A certificate with several common names is refused: which one would be meant is not clear.
    if (typeof cn === 'string' && allowed.includes(cn)) return next();
    onRefused?.();
    const body: ErrorBody = {
      code: 'unauthorized',
      message:
        typeof cn === 'string'
          ? `A client certificate for "${cn}" may not call this exec-host: only ${allowed.map((n) => `"${n}"`).join(', ')} may (LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES).`
          : 'This exec-host requires a verified client certificate.',
    };
    res.status(403).json(body);
  };
}
