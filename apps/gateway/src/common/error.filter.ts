import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import { assertUnreachable, Limits, tooLargeMessage, type ErrorBody } from '@lemniscate/contracts';
import type { Request, Response } from 'express';
import { DatabaseUnavailableError, isTransientDbError } from '../db/errors';
import { AppError, ErrorCode } from './errors';
import { requestIdOf } from './request-id';

export function statusFor(code: ErrorCode): number {
  switch (code) {
    case ErrorCode.ValidationFailed:
    case ErrorCode.PolicyInvalid:
      return HttpStatus.BAD_REQUEST;
    case ErrorCode.Unauthenticated:
      return HttpStatus.UNAUTHORIZED;
    case ErrorCode.CsrfMismatch:
    case ErrorCode.Forbidden:
      return HttpStatus.FORBIDDEN;
    case ErrorCode.NotFound:
    case ErrorCode.RouteNotFound:
      return HttpStatus.NOT_FOUND;
    case ErrorCode.Conflict:
    case ErrorCode.ApprovalAlreadyAnswered:
    case ErrorCode.SessionEnded:
    case ErrorCode.EnvironmentNotReady:
      return HttpStatus.CONFLICT;
    case ErrorCode.EnvironmentInvalid:
      return HttpStatus.UNPROCESSABLE_ENTITY;
    case ErrorCode.RateLimited:
      return HttpStatus.TOO_MANY_REQUESTS;
    case ErrorCode.ExecHostUnavailable:
      return HttpStatus.BAD_GATEWAY;
    case ErrorCode.DatabaseUnavailable:
    case ErrorCode.AuditUnrecorded:
      return HttpStatus.SERVICE_UNAVAILABLE;
    case ErrorCode.Internal:
      return HttpStatus.INTERNAL_SERVER_ERROR;
    default:
      return assertUnreachable(code);
  }
}

/** Nest's own exceptions (unknown route, body too large, malformed JSON) get a code and a sentence too. */
function fromHttpException(e: HttpException): AppError {
  const status = e.getStatus();
  if (status === HttpStatus.NOT_FOUND) return new AppError(ErrorCode.RouteNotFound, 'There is no such route on this gateway.');
  if (status === HttpStatus.PAYLOAD_TOO_LARGE) return new AppError(ErrorCode.ValidationFailed, 'The request body is too large.');
  if (status === HttpStatus.BAD_REQUEST) return new AppError(ErrorCode.ValidationFailed, 'The request could not be read: the body must be valid JSON.');
  if (status === HttpStatus.UNAUTHORIZED) return new AppError(ErrorCode.Unauthenticated, 'You need to sign in or send a valid API token.');
  if (status === HttpStatus.FORBIDDEN) return new AppError(ErrorCode.Forbidden, 'You are not allowed to do this.');
  if (status === HttpStatus.TOO_MANY_REQUESTS) return new AppError(ErrorCode.RateLimited, 'Too many requests; slow down and try again.');
  if (status >= 500) return new AppError(ErrorCode.Internal, 'The gateway failed to handle this request.');
  return new AppError(ErrorCode.ValidationFailed, 'The request was not understood.');
}

/** The one mapping from coded errors to HTTP (STYLE.md §4). */
@Catch()
export class AppErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  catch(exception: unknown, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw exception;
    const req = host.switchToHttp().getRequest<Request>();
    const res = host.switchToHttp().getResponse<Response>();
    const requestId = requestIdOf(req);

    let error: AppError;
    if (exception instanceof AppError) error = exception;
    else if (exception instanceof HttpException) error = fromHttpException(exception);
    else if (isBodyTooLarge(exception)) error = new AppError(ErrorCode.ValidationFailed, bodyTooLargeMessage(exception));
    else if (isBodyParserError(exception)) error = new AppError(ErrorCode.ValidationFailed, 'The request body is not valid JSON.');
    // A database that went away (a restart) is worth a retry; one that refused the statement is not.
    // Neither answer quotes the driver's message, which carries SQL and its parameters.
    else if (isTransientDbError(exception) || exception instanceof DatabaseUnavailableError) {
      error = new AppError(ErrorCode.DatabaseUnavailable, "The gateway's database is not reachable right now; try again in a few seconds.", undefined, 5);
    } else error = new AppError(ErrorCode.Internal, 'The gateway failed to handle this request; the request id identifies it in the logs.');

    const status = statusFor(error.code);
    if (status >= 500) this.logger.error({ err: exception, requestId }, 'request failed');
    if (error.retryAfterSeconds !== undefined) res.setHeader('retry-after', String(error.retryAfterSeconds));
    const body: ErrorBody = { code: error.code, message: error.message, requestId, ...(error.details === undefined ? {} : { details: error.details }) };
    res.status(status).json(body);
  }
}

interface TooLarge {
  type: 'entity.too.large';
  length?: number;
  limit?: number;
}

function isBodyTooLarge(e: unknown): e is TooLarge {
  return typeof e === 'object' && e !== null && (e as { type?: unknown }).type === 'entity.too.large';
}

/** The body parser knows the body's length and the limit it applied; the sentence names both. */
function bodyTooLargeMessage(e: { length?: number; limit?: number }): string {
  const limit = e.limit === Limits.sessionRequestBodyBytes ? 'sessionRequestBodyBytes' : 'requestBodyBytes';
  return typeof e.length === 'number'
    ? tooLargeMessage(limit, e.length)
    : `The request body is too large; ${limit === 'requestBodyBytes' ? 'request bodies' : 'session requests'} are limited to ${Limits[limit]} bytes.`;
}

function isBodyParserError(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { type?: unknown }).type === 'entity.parse.failed';
}
