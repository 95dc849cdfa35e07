// Drizzle wraps driver errors ("Failed query: …") and keeps the PostgreSQL error as `cause`. Services
// need its SQLSTATE and constraint to turn a duplicate into a 409 with a sentence, not a 500.

interface PgErrorInfo {
  /** SQLSTATE, e.g. 23505 (unique), 23503 (foreign key), 23514 (check). */
  code: string;
  constraint: string | undefined;
  message: string;
}

const PG_UNIQUE_VIOLATION = '23505';

/** The PostgreSQL error behind `error` (PGlite or pg, wrapped or not), if there is one. */
export function pgErrorOf(error: unknown): PgErrorInfo | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (typeof current !== 'object') return undefined;
    const candidate = current as { code?: unknown; severity?: unknown; constraint?: unknown; message?: unknown; cause?: unknown };
    // `severity` tells a server error from a Node one with a five-letter code (EPIPE, EPERM).
    if (typeof candidate.code === 'string' && /^[0-9A-Z]{5}$/.test(candidate.code) && typeof candidate.severity === 'string') {
      return {
        code: candidate.code,
        constraint: typeof candidate.constraint === 'string' ? candidate.constraint : undefined,
        message: typeof candidate.message === 'string' ? candidate.message : '',
      };
    }
    current = candidate.cause;
  }
  return undefined;
}

/** True when `error` is a unique violation (of `constraint`, when given). */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const info = pgErrorOf(error);
  return info?.code === PG_UNIQUE_VIOLATION && (constraint === undefined || info.constraint === constraint);
}

/**
 * SQLSTATEs after which the same statement may succeed if sent again: the server went away or is
 * coming back (class 08, 57P01–57P03), or it rolled the transaction back to resolve a conflict
 * (40001, 40P01). Everything else (a constraint, a syntax error, a missing table) fails the same way
 * every time and is not retried.
 */
export const TRANSIENT_SQLSTATES: Readonly<Record<string, string>> = {
  '08000': 'connection_exception',
  '08001': 'sqlclient_unable_to_establish_sqlconnection',
  '08003': 'connection_does_not_exist',
  '08004': 'sqlserver_rejected_establishment_of_sqlconnection',
  '08006': 'connection_failure',
  '08007': 'transaction_resolution_unknown',
  '08P01': 'protocol_violation',
  '57P01': 'admin_shutdown',
  '57P02': 'crash_shutdown',
  '57P03': 'cannot_connect_now',
  '40001': 'serialization_failure',
  '40P01': 'deadlock_detected',
};

/** Socket errors of Node's net module that mean "the server is not there right now". */
export const TRANSIENT_SOCKET_CODES: readonly string[] = ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED'];

/**
 * What `pg` says, without a code, when the connection under a query or a pooled client died, and
 * when no pooled connection could be opened in time.
 */
export const TRANSIENT_DRIVER_MESSAGES: readonly RegExp[] = [
  /^Connection terminated\b/,
  /^Client has encountered a connection error and is not queryable$/,
  /^Client was closed and is not queryable$/,
  /^timeout exceeded when trying to connect$/,
  /^Connection terminated due to connection timeout$/,
];

/** Why `error` is worth retrying (`admin_shutdown`, `ECONNREFUSED`, `connection_terminated`…), or undefined. */
export function transientReason(error: unknown): string | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (typeof current !== 'object') return undefined;
    const candidate = current as { code?: unknown; severity?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
    if (typeof candidate.code === 'string') {
      if (typeof candidate.severity === 'string' && /^[0-9A-Z]{5}$/.test(candidate.code)) {
        // A server error decides: a constraint behind a wrapper is permanent whatever the wrapper says.
        return TRANSIENT_SQLSTATES[candidate.code] ?? (candidate.code.startsWith('08') ? 'connection_exception' : undefined);
      }
      if (TRANSIENT_SOCKET_CODES.includes(candidate.code)) return candidate.code;
    }
    if (typeof candidate.message === 'string' && TRANSIENT_DRIVER_MESSAGES.some((m) => m.test(candidate.message as string))) return 'connection_terminated';
    // Node reports a refused dual-stack connect as an AggregateError of one error per address.
    if (Array.isArray(candidate.errors) && candidate.errors.length > 0 && candidate.errors.every((e) => transientReason(e) !== undefined)) return transientReason(candidate.errors[0]);
    current = candidate.cause;
  }
  return undefined;
}

/** True when sending the same statement again, a moment later, may succeed. */
export function isTransientDbError(error: unknown): boolean {
  return transientReason(error) !== undefined;
}

/** True when `error` came from the database or its driver (its message may quote SQL). */
export function isDatabaseError(error: unknown): boolean {
  if (error instanceof DatabaseUnavailableError) return true;
  if (pgErrorOf(error) !== undefined || isTransientDbError(error)) return true;
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (typeof current !== 'object') return false;
    const candidate = current as { name?: unknown; message?: unknown; cause?: unknown };
    if (candidate.name === 'DrizzleQueryError' || (typeof candidate.message === 'string' && candidate.message.startsWith('Failed query:'))) return true;
    current = candidate.cause;
  }
  return false;
}

/**
 * The database stayed unreachable for the whole retry window. The message is for people (a session
 * summary, an API answer): it never quotes SQL. The driver's error is kept as `cause` for the log.
 */
export class DatabaseUnavailableError extends Error {
  override readonly name = 'DatabaseUnavailableError';
  constructor(
    readonly reason: string,
    readonly waitedMs: number,
    options?: { cause?: unknown },
  ) {
    super(`The gateway's database did not answer for ${Math.max(1, Math.round(waitedMs / 1000))} s; the work was stopped rather than recorded incompletely.`, options);
  }
}

/**
 * A sentence about a failure, fit for a person: a database error becomes a plain statement (with
 * the SQLSTATE of a refusal; the SQL, its parameters and the driver's error stay in the gateway's
 * log); anything else keeps its message.
 */
export function describeFailure(error: unknown): string {
  if (error instanceof DatabaseUnavailableError) return error.message;
  if (isDatabaseError(error)) {
    const reason = transientReason(error);
    if (reason) return 'The gateway lost its connection to the database; the work was stopped rather than recorded incompletely.';
    const info = pgErrorOf(error);
    return `The gateway's database refused to record this${info ? ` (SQLSTATE ${info.code})` : ''}; the gateway's log has the details.`;
  }
  return error instanceof Error ? error.message : String(error);
}
