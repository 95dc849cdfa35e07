// Bounded retry of database work across a short outage (a PostgreSQL restart, a failover, a dropped
// connection): transient errors are retried with exponential back-off until a fixed window has
// passed; permanent ones are thrown at once. The window is the most a caller waits, documented in
// docs/operator-guide.md ("Database outages").
import { DatabaseUnavailableError, transientReason } from './errors';

/** The longest a piece of database work waits for the database to come back, in milliseconds. */
export const DB_RETRY_WINDOW_MS = 30_000;
/** The first pause; each further pause doubles, up to DB_RETRY_MAX_DELAY_MS. */
const DB_RETRY_FIRST_DELAY_MS = 50;
export const DB_RETRY_MAX_DELAY_MS = 2_000;

interface RetryOptions {
  /** Total time allowed from the first attempt, pauses included (default DB_RETRY_WINDOW_MS). */
  windowMs?: number;
  firstDelayMs?: number;
  maxDelayMs?: number;
  /** Called before each pause: for a log line. */
  onRetry?: (info: { attempt: number; reason: string; delayMs: number; error: unknown }) => void;
  /** Stops waiting when aborted; the last error is thrown. */
  signal?: AbortSignal;
  /** Clock and sleep, replaceable in unit tests. */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

/** The pause before attempt `attempt + 1` (attempt counts from 1): doubling, capped, with jitter in [½, 1]. */
export function retryDelay(attempt: number, options: Pick<RetryOptions, 'firstDelayMs' | 'maxDelayMs' | 'random'> = {}): number {
  const first = options.firstDelayMs ?? DB_RETRY_FIRST_DELAY_MS;
  const max = options.maxDelayMs ?? DB_RETRY_MAX_DELAY_MS;
  const base = Math.min(max, first * 2 ** Math.min(30, attempt - 1));
  return Math.round(base * (0.5 + 0.5 * (options.random ?? Math.random)()));
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `work` and runs it again after a transient database error, pausing longer each time, until it
 * succeeds, fails permanently (thrown as is), or the window is spent (a DatabaseUnavailableError
 * whose cause is the last error). `work` receives the attempt number; anything it must not do twice
 * (an insert whose commit may have landed before the connection broke) it checks for itself.
 */
export async function withDbRetry<T>(work: (attempt: number) => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? defaultSleep;
  const windowMs = options.windowMs ?? DB_RETRY_WINDOW_MS;
  const started = now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(attempt);
    } catch (error) {
      const reason = transientReason(error);
      if (reason === undefined || options.signal?.aborted) throw error;
      const elapsed = now() - started;
      const delayMs = Math.min(retryDelay(attempt, options), Math.max(0, windowMs - elapsed));
      if (delayMs <= 0) throw new DatabaseUnavailableError(reason, elapsed, { cause: error });
      options.onRetry?.({ attempt, reason, delayMs, error });
      await sleep(delayMs);
    }
  }
}
