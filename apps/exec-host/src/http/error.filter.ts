import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import { assertUnreachable, type ErrorBody, type ExecHostErrorCode } from '@lemniscate/contracts';
import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import { ExecHostError } from '../errors';

export function statusFor(code: ExecHostErrorCode): number {
  switch (code) {
    case 'invalid_request':
    case 'repository_not_found':
    case 'repository_ref_not_found':
    case 'not_a_file':
    case 'invalid_pattern':
    case 'runtime_unavailable':
    case 'uncommitted_patch_does_not_apply':
      return HttpStatus.BAD_REQUEST;
    case 'unauthorized':
      return HttpStatus.UNAUTHORIZED;
    case 'outside_working_copy':
      return HttpStatus.FORBIDDEN;
    case 'sandbox_not_found':
    case 'file_not_found':
    case 'change_not_found':
    case 'job_not_found':
    case 'mcp_process_not_found':
      return HttpStatus.NOT_FOUND;
    case 'sandbox_busy':
    case 'session_has_sandbox':
    case 'unreviewed_changes':
    case 'patch_does_not_apply':
    case 'environment_not_ready':
      return HttpStatus.CONFLICT;
    case 'sandbox_lost':
      return HttpStatus.GONE;
    case 'file_too_large':
      return HttpStatus.PAYLOAD_TOO_LARGE;
    case 'binary_file':
    case 'edit_not_unique':
    case 'edit_not_found':
    case 'environment_invalid':
      return HttpStatus.UNPROCESSABLE_ENTITY;
    case 'sandbox_limit_reached':
      return HttpStatus.TOO_MANY_REQUESTS;
    case 'engine_unavailable':
      return HttpStatus.SERVICE_UNAVAILABLE;
    case 'sandbox_setup_failed':
    case 'internal':
      return HttpStatus.INTERNAL_SERVER_ERROR;
    default:
      return assertUnreachable(code);
  }
}

function fromHttpException(e: HttpException): ExecHostError {
  const status = e.getStatus();
  if (status === HttpStatus.NOT_FOUND) return new ExecHostError('invalid_request', 'There is no such route on the exec-host.');
  if (status === HttpStatus.PAYLOAD_TOO_LARGE) return new ExecHostError('invalid_request', 'The request body is too large.');
  if (status === HttpStatus.BAD_REQUEST) return new ExecHostError('invalid_request', 'The request body must be valid JSON.');
  return new ExecHostError('internal', 'The exec-host failed to handle this request.');
}

/** The one mapping from coded errors to HTTP: a status, a code, a sentence and a correlation id. */
@Catch()
export class ErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('exec-host');

  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const req = host.switchToHttp().getRequest<Request>();
    const requestId = (req.headers['x-request-id'] as string | undefined) ?? randomUUID();
    let error: ExecHostError;
    if (exception instanceof ExecHostError) error = exception;
    else if (exception instanceof HttpException) {
      error = fromHttpException(exception);
      if (exception.getStatus() === HttpStatus.NOT_FOUND) {
        res.status(HttpStatus.NOT_FOUND).json({ code: error.code, message: error.message, requestId } satisfies ErrorBody);
        return;
      }
    } else {
      this.logger.error(`${req.method} ${req.url} [${requestId}]: ${(exception as Error)?.stack ?? String(exception)}`);
      error = new ExecHostError('internal', 'The exec-host failed to handle this request; the details are in its log.');
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    const body: ErrorBody = { code: error.code, message: error.message, requestId, ...(error.details !== undefined && error.code !== 'unauthorized' ? { details: error.details } : {}) };
    res.status(statusFor(error.code)).json(body);
  }
}
