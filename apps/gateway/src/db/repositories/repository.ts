import type { Db } from '../database';

/**
 * What every repository shares: a Drizzle handle, and a way to run the same methods inside a
 * transaction someone else opened, so a service can write several tables all or nothing.
 */
export abstract class Repository {
  constructor(protected readonly db: Db) {}

  /** This repository, bound to `tx` (from `Transactions.run`). */
  withTx(tx: Db): this {
    const bound = Object.create(this) as this;
    Object.defineProperty(bound, 'db', { value: tx });
    return bound;
  }
}

/** Page sizes are bounded: a caller cannot ask the database for everything at once. */
export function pageSize(limit: number | undefined, fallback = 100, max = 1000): number {
  if (limit === undefined) return fallback;
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`A page size must be a positive whole number, not ${limit}.`);
  return Math.min(limit, max);
}
