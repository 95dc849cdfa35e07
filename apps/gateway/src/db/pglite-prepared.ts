// The embedded database's statements, prepared once. PGlite's `query` parses and plans every
// statement anew and crosses into its WebAssembly build six times for it (parse, describe the
// statement, bind, describe the portal, execute, sync), on the gateway's one thread. Here a statement
// text is parsed once under a name and its parameter types read then; each later run is one crossing
// (bind, describe, execute, sync) of the plan PostgreSQL keeps for it. The answer is read by PGlite's
// own result parser, so rows, fields and counts are what `query` gives.
import { parse, protocol, type PGlite, type Results, type Transaction } from '@electric-sql/pglite';

/** Statement texts kept prepared per database; beyond this, a new text runs through `query` unprepared. */
export const MAX_PREPARED = 500;

/** Names are unique in the process: two sets of statements on one database never take each other's. */
let named = 0;

/** PostgreSQL's answer when a kept plan's result columns changed under it (a table altered since). */
const PLAN_CHANGED = '0A000';

interface QueryOptions {
  rowMode?: 'array' | 'object';
  parsers?: Record<number, (value: string, typeId?: number) => unknown>;
  blob?: unknown;
  paramTypes?: number[];
}

interface Prepared {
  name: string;
  /** The type of each parameter, as PostgreSQL inferred it when the text was parsed. */
  types: number[];
}

/** PGlite's members this relies on beside its public API (pinned by package-lock.json; pglite-prepared.medium.ts uses every one). */
interface PgliteInternals {
  _runExclusiveTransaction<T>(fn: () => Promise<T>): Promise<T>;
  _runExclusiveQuery<T>(fn: () => Promise<T>): Promise<T>;
  serializers: Record<number, (value: unknown) => string>;
  parsers: Parameters<typeof parse.parseResults>[1];
}

/** Statements prepared on one embedded database (its only connection). */
export class PreparedStatements {
  private readonly prepared = new Map<string, Prepared>();

  constructor(private readonly pg: PGlite) {}

  /** How many statement texts are prepared now. */
  get size(): number {
    return this.prepared.size;
  }

  /** As `PGlite.query`, outside any transaction. */
  query<T>(text: string, params: unknown[] = [], options?: QueryOptions): Promise<Results<T>> {
    if (!this.eligible(text, options)) return this.pg.query<T>(text, params, options as never);
    const pg = this.pg as unknown as PgliteInternals;
    return pg._runExclusiveTransaction(() => pg._runExclusiveQuery(() => this.run<T>(text, params, options, false)));
  }

  /** As `tx.query` inside `transaction`, whose callback holds the transaction's turn already. */
  queryIn<T>(tx: Transaction, text: string, params: unknown[] = [], options?: QueryOptions): Promise<Results<T>> {
    if (tx.closed || !this.eligible(text, options)) return tx.query<T>(text, params, options as never);
    const pg = this.pg as unknown as PgliteInternals;
    return pg._runExclusiveQuery(() => this.run<T>(text, params, options, true));
  }

  private eligible(text: string, options: QueryOptions | undefined): boolean {
    // A blob (COPY) or types given by the caller take PGlite's own path; so does a new text once the cache is full.
    return !options?.blob && !options?.paramTypes && (this.prepared.has(text) || this.prepared.size < MAX_PREPARED);
  }

  private async run<T>(text: string, params: unknown[], options: QueryOptions | undefined, inTransaction: boolean): Promise<Results<T>> {
    const pg = this.pg as unknown as PgliteInternals;
    let statement = this.prepared.get(text);
    try {
      if (!statement) {
        const name = `lemniscate_${++named}`;
        const described = await this.exchange([protocol.serialize.parse({ name, text }), protocol.serialize.describe({ type: 'S', name }), protocol.serialize.sync()]);
        statement = { name, types: parse.parseDescribeStatementResults(described) };
        this.prepared.set(text, statement);
      }
      const { name, types } = statement;
      const values = params.map((value, i) => {
        if (value === null || value === undefined) return null;
        const serialize = pg.serializers[types[i] as number];
        return serialize ? serialize(value) : String(value);
      });
      const messages = await this.exchange([
        protocol.serialize.bind({ statement: name, values }),
        protocol.serialize.describe({ type: 'P' }),
        protocol.serialize.execute({}),
        protocol.serialize.sync(),
      ]);
      if (!inTransaction) await this.pg.syncToFs();
      return this.answer<T>(messages, options);
    } catch (error) {
      if ((error as { code?: string }).code === PLAN_CHANGED && statement) {
        // Prepared again on its next run.
        this.prepared.delete(text);
        await this.exchange([protocol.serialize.close({ type: 'S', name: statement.name }), protocol.serialize.sync()]).catch(() => undefined);
      }
      throw Object.assign(error as object, { query: text, params, queryOptions: options });
    }
  }

  /** The statement's answer, read by PGlite's own parser with the database's parsers and the statement's options. */
  answer<T>(messages: Parameters<typeof parse.parseResults>[0], options: QueryOptions | undefined): Results<T> {
    return parse.parseResults(messages, (this.pg as unknown as PgliteInternals).parsers, options as never)[0] as Results<T>;
  }

  /** One crossing into the database: the messages given, its answers back (a refusal thrown once it is ready again). */
  private async exchange(messages: Uint8Array[]): Promise<Parameters<typeof parse.parseResults>[0]> {
    return (await this.pg.execProtocol(Buffer.concat(messages), { syncToFs: false })).messages;
  }
}
