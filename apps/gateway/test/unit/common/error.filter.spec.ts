import { ArgumentsHost, HttpException, NotFoundException } from '@nestjs/common';
import { AppErrorFilter, statusFor } from '../../../src/common/error.filter';
import { TRANSIENT_SOCKET_CODES, TRANSIENT_SQLSTATES } from '../../../src/db/errors';
import { AppError, ErrorCode } from '../../../src/common/errors';

function run(exception: unknown) {
  const sent: { status?: number; body?: unknown; headers: Record<string, string> } = { headers: {} };
  const res = {
    status(code: number) {
      sent.status = code;
      return this;
    },
    json(body: unknown) {
      sent.body = body;
    },
    setHeader(name: string, value: string) {
      sent.headers[name] = value;
    },
  };
  const host = { getType: () => 'http', switchToHttp: () => ({ getRequest: () => ({ id: 'req-1' }), getResponse: () => res }) } as unknown as ArgumentsHost;
  new AppErrorFilter().catch(exception, host);
  return sent;
}

describe('the one error mapping', () => {
  it('gives every code an HTTP status', () => {
    for (const code of Object.values(ErrorCode)) expect(statusFor(code)).toBeGreaterThanOrEqual(400);
    expect(statusFor(ErrorCode.ApprovalAlreadyAnswered)).toBe(409);
    expect(statusFor(ErrorCode.SessionEnded)).toBe(409);
    expect(statusFor(ErrorCode.ValidationFailed)).toBe(400);
    expect(statusFor(ErrorCode.Forbidden)).toBe(403);
  });

  it('writes code, sentence and request id', () => {
    const out = run(new AppError(ErrorCode.SessionEnded, 'Session s1 has already ended (stopped).'));
    expect(out.status).toBe(409);
    expect(out.body).toEqual({ code: 'session_ended', message: 'Session s1 has already ended (stopped).', requestId: 'req-1' });
  });

  it('sets Retry-After for pacing errors', () => {
    const out = run(new AppError(ErrorCode.RateLimited, 'Too many.', undefined, 42));
    expect(out.status).toBe(429);
    expect(out.headers['retry-after']).toBe('42');
  });

  it("gives Nest's own exceptions a code and a sentence", () => {
    expect(run(new NotFoundException()).body).toMatchObject({ code: 'route_not_found', requestId: 'req-1' });
    expect(run(new HttpException('x', 413)).body).toMatchObject({ code: 'validation_failed', message: 'The request body is too large.' });
  });

  it('never leaks the message of an unexpected error', () => {
    const out = run(new Error('connection string postgres://secret@db'));
    expect(out.status).toBe(500);
    expect(JSON.stringify(out.body)).not.toContain('secret');
    expect(out.body).toMatchObject({ code: 'internal', requestId: 'req-1' });
  });

  describe('database errors', () => {
    const SQL = /select|insert|Failed query|params|s3cr3t/i;
    const wrapped = (cause: unknown) => Object.assign(new Error('Failed query: select "token_hash" from "api_tokens" where "prefix" = $1\nparams: s3cr3t', { cause }), { name: 'DrizzleQueryError' });

    it.each(
      [
        ...Object.keys(TRANSIENT_SQLSTATES).map((code) => Object.assign(new Error(code), { code, severity: 'FATAL' })),
        ...TRANSIENT_SOCKET_CODES.map((code) => Object.assign(new Error(`connect ${code}`), { code })),
        new Error('Connection terminated unexpectedly'),
      ].map((e) => [(e as { code?: string }).code ?? e.message, e]),
    )('%s: 503 database_unavailable with Retry-After and a sentence, no SQL', (_name, cause) => {
      const out = run(wrapped(cause));
      expect(out.status).toBe(503);
      expect(out.headers['retry-after']).toBe('5');
      expect(out.body).toMatchObject({ code: 'database_unavailable', message: "The gateway's database is not reachable right now; try again in a few seconds.", requestId: 'req-1' });
      expect(JSON.stringify(out.body)).not.toMatch(SQL);
    });

    it('a permanent database error is a 500 without SQL', () => {
      const out = run(wrapped(Object.assign(new Error('relation "api_tokens" does not exist'), { code: '42P01', severity: 'ERROR' })));
      expect(out.status).toBe(500);
      expect(JSON.stringify(out.body)).not.toMatch(SQL);
    });
  });
});
