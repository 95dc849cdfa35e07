// Medium-test support (STYLE.md §8): each test file gets a fresh, migrated database on PGlite (in
// memory) and on the machine's PostgreSQL (a new database with a random name, dropped afterwards).
// The databases run as the application role, exactly as the gateway does; `superuser` reaches past it
// for the tests that must tamper with data on purpose.
import { afterAll, beforeAll, describe } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { IN_MEMORY, openDatabase, type Database, type DatabaseKind, type DatabaseOptions } from '../../src/db/database';
import { testPostgresUrl, withDatabaseName } from './pg-server';

export { DEFAULT_TEST_PG_URL, startPgProxy, testPostgresUrl, withDatabaseName, type PgProxy } from './pg-server';

// Opening PGlite compiles its WASM; on a loaded machine that alone can pass Jest's 5 s default.
const HOOK_TIMEOUT_MS = 60_000;
export const TEST_DATABASE_KINDS: readonly DatabaseKind[] = ['pglite', 'postgres'];

export interface TestDatabase extends Database {
  /** Runs one statement with the rights of the login that created the database (a superuser). */
  superuser<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
}

export async function freshDatabase(kind: DatabaseKind, options: Omit<DatabaseOptions, 'url' | 'dataDir'> = {}): Promise<TestDatabase> {
  return kind === 'pglite' ? freshPglite(options) : freshPostgres(options);
}

async function freshPglite(options: Omit<DatabaseOptions, 'url' | 'dataDir'>): Promise<TestDatabase> {
  const database = await openDatabase({ ...options, dataDir: IN_MEMORY });
  if (database.driver.kind !== 'pglite') throw new Error('expected PGlite');
  const client = database.driver.client;
  const role = database.role;
  return Object.assign(database, {
    // PGlite is one connection: step out of the application role for one statement, then back in.
    superuser: async <T>(text: string, params?: unknown[]) => {
      if (!role) return (await client.query<T>(text, params)).rows;
      return client.transaction(async (tx) => {
        await tx.exec('SET LOCAL ROLE NONE');
        return (await tx.query<T>(text, params)).rows;
      });
    },
  });
}

async function freshPostgres(options: Omit<DatabaseOptions, 'url' | 'dataDir'>): Promise<TestDatabase> {
  const adminUrl = testPostgresUrl();
  const name = `lemniscate_test_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: adminUrl });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(`The medium tests need PostgreSQL at ${adminUrl} (set LEMNISCATE_TEST_PG_URL, or start it with \`pg_ctlcluster 15 main start\`): ${(error as Error).message}`);
  }
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = withDatabaseName(adminUrl, name);
  let database: Database;
  try {
    database = await openDatabase({ ...options, url });
  } catch (error) {
    await dropDatabase(adminUrl, name);
    throw error;
  }
  const owner = new Client({ connectionString: url });
  await owner.connect();
  const close = database.close;
  return Object.assign(database, {
    superuser: async <T>(text: string, params?: unknown[]) => (await owner.query(text, params)).rows as T[],
    close: async () => {
      await close();
      await owner.end();
      await dropDatabase(adminUrl, name);
    },
  });
}

async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/**
 * Declares the enclosed tests once per database kind, each kind with its own fresh database for
 * the file: `withTestDatabases((db) => { it('…', async () => { await repo(db()).… }) })`.
 */
export function withTestDatabases(
  fn: (database: () => TestDatabase, kind: DatabaseKind) => void,
  kinds: readonly DatabaseKind[] = TEST_DATABASE_KINDS,
  options: Omit<DatabaseOptions, 'url' | 'dataDir'> = {},
): void {
  describe.each(kinds.map((kind) => [kind]))('on %s', (kind) => {
    let current: TestDatabase | undefined;
    beforeAll(async () => {
      current = await freshDatabase(kind, options);
    }, HOOK_TIMEOUT_MS);
    afterAll(async () => {
      await current?.close();
    }, HOOK_TIMEOUT_MS);
    fn(() => {
      if (!current) throw new Error(`The ${kind} test database is not open (its beforeAll failed).`);
      return current;
    }, kind);
  });
}
