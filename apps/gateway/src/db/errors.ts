// Drizzle wraps driver errors ("Failed query: …") and keeps the PostgreSQL error as `cause`. Services
// need its SQLSTATE and constraint to turn a duplicate into a 409 with a sentence, not a 500.

export interface PgErrorInfo {
  /** SQLSTATE, e.g. 23505 (unique), 23503 (foreign key), 23514 (check). */
  code: string;
  constraint: string | undefined;
  message: string;
}

export const PG_UNIQUE_VIOLATION = '23505';
export const PG_FOREIGN_KEY_VIOLATION = '23503';
export const PG_CHECK_VIOLATION = '23514';

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
