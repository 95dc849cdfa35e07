import { Inject, Injectable } from '@nestjs/common';
import type { Db } from '../database';
import { DB } from '../tokens';

/**
 * Runs a function in one transaction: `transactions.run(async (tx) => { await a.withTx(tx).x();
 * await b.withTx(tx).y(); })`. On PGlite there is a single connection, so inside `run` use only the
 * `tx`-bound repositories: a call through the plain handle would wait for the transaction to end.
 */
@Injectable()
export class Transactions {
  constructor(@Inject(DB) private readonly db: Db) {}

  run<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    return this.db.transaction((tx) => fn(tx as unknown as Db));
  }
}
