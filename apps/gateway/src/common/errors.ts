/**
 * Coded errors (STYLE.md §4). Domain code throws `AppError` with one of these codes and a sentence
 * a person understands; `AppErrorFilter` is the only place that turns a code into an HTTP status.
 */
export enum ErrorCode {
  ValidationFailed = 'validation_failed',
  Unauthenticated = 'unauthenticated',
  CsrfMismatch = 'csrf_mismatch',
  Forbidden = 'forbidden',
  NotFound = 'not_found',
  RouteNotFound = 'route_not_found',
  Conflict = 'conflict',
  ApprovalAlreadyAnswered = 'approval_already_answered',
  SessionEnded = 'session_ended',
  PolicyInvalid = 'policy_invalid',
  RateLimited = 'rate_limited',
  ExecHostUnavailable = 'exec_host_unavailable',
  /** The project's environment is not prepared for its current inputs (preparing, failed, or never prepared). */
  EnvironmentNotReady = 'environment_not_ready',
  /** The repository's devcontainer cannot be used (unreadable, an image not on the exec-host, a build that fails). */
  EnvironmentInvalid = 'environment_invalid',
  DatabaseUnavailable = 'database_unavailable',
  /** The deployment refuses actions no audit sink can record (audit sinks, `onUnrecorded: refuse`). */
  AuditUnrecorded = 'audit_unrecorded',
  Internal = 'internal',
}

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    /** Seconds a client should wait before retrying, when the code is about pacing. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'AppError';
  }
}
