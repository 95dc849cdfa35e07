// Drizzle's PGlite driver hands PGlite, with every statement, parsers that keep dates, times,
// intervals and their arrays as text (Drizzle converts them itself). PGlite copies its whole table
// of parsers (about 300 types) into every statement that brings parsers of its own: tens of
// microseconds of the gateway's one thread per statement, on every statement it makes. Those same
// parsers are instead set once on the database, and a statement's own are dropped when they are
// exactly those (`forDrizzle`), so the result is the same and nothing is copied.
import { types, type PGlite, type Transaction } from '@electric-sql/pglite';
import { PreparedStatements } from './pglite-prepared';

/** The types Drizzle keeps as text: timestamp, timestamptz, interval, date, and numeric[], timestamp[], timestamptz[], interval[], date[]. */
export const TEXT_KEPT_TYPES: readonly number[] = [types.TIMESTAMP, types.TIMESTAMPTZ, types.INTERVAL, types.DATE, 1231, 1115, 1185, 1187, 1182];

const asText = (value: string): string => value;

/** PGlite's `parsers` option: those types as text, for every statement of the database. */
export const TEXT_KEPT_PARSERS: Record<number, (value: string) => string> = Object.fromEntries(TEXT_KEPT_TYPES.map((type) => [type, asText]));

/** What a parser is given to find out whether it keeps its text. */
const PROBE = '2000-01-01 00:00:00+00';

interface QueryOptionsLike {
  parsers?: Record<number, (value: string) => unknown>;
}

/**
 * The options without their `parsers` when these only keep some of TEXT_KEPT_TYPES as text (which
 * the database then does already); otherwise unchanged. Drizzle's parsers are functions of its own,
 * so they are recognised by what they do: a parser that returns its text unchanged.
 */
export function withoutTextParsers<T extends QueryOptionsLike | undefined>(options: T): T {
  const parsers = options?.parsers;
  if (!parsers) return options;
  for (const key of Object.keys(parsers)) {
    const type = Number(key);
    if (!TEXT_KEPT_TYPES.includes(type)) return options;
    const parse = parsers[type] as (value: string) => unknown;
    if (parse(PROBE) !== PROBE) return options;
  }
  return { ...options, parsers: undefined };
}

/**
 * The database as Drizzle is given it: its statements prepared once and run in one crossing
 * (pglite-prepared.ts), in transactions too, each statement's parsers dropped when the database's
 * own already do the same (see above). Everything else is the database itself. Only for a database
 * opened with `parsers: TEXT_KEPT_PARSERS`.
 */
export function forDrizzle(client: PGlite): PGlite {
  const statements = new PreparedStatements(client);
  const inTransaction = (tx: Transaction): Transaction => withQuery(tx, (text, params, options) => statements.queryIn(tx, text, params, withoutTextParsers(options)));
  return withQuery(client, (text, params, options) => statements.query(text, params, withoutTextParsers(options)), {
    transaction: <R>(callback: (tx: Transaction) => Promise<R>) => client.transaction((tx) => callback(inTransaction(tx))),
  });
}

/** `target` with its `query` (and any of `others`) replaced; every other member its own, methods bound to it. */
function withQuery<T extends object>(target: T, query: (text: string, params?: unknown[], options?: QueryOptionsLike) => unknown, others: Record<string, unknown> = {}): T {
  const replaced: Record<string, unknown> = { ...others, query };
  return new Proxy(target, {
    get(object, property) {
      if (typeof property === 'string' && property in replaced) return replaced[property];
      const value: unknown = Reflect.get(object, property, object);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
    },
  });
}
