// Medium-test support (STYLE.md §8): each test file gets a fresh, migrated database on PGlite (in
// memory) and on the machine's PostgreSQL (a new database with a random name, dropped afterwards).
// The databases run as the application role, exactly as the gateway does; `superuser` reaches past it
// for the tests that must tamper with data on purpose.
import { afterAll, beforeAll, describe } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { IN_MEMORY, openDatabase, type Database, type DatabaseKind, type DatabaseOptions } from './database';

export const DEFAULT_TEST_PG_URL = 'postgres://postgres@/postgres?host=/var/run/postgresql';
// Opening PGlite compiles its WASM; on a loaded machine that alone can pass Jest's 5 s default.
const HOOK_TIMEOUT_MS = 60_000;
export const TEST_DATABASE_KINDS: readonly DatabaseKind[] = ['pglite', 'postgres'];

export interface TestDatabase extends Database {
  /** Runs one statement with the rights of the login that created the database (a superuser). */
  superuser<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
}

/** The server the medium tests use: `LEMNISCATE_TEST_PG_URL`, else the local socket. */
export function testPostgresUrl(env: NodeJS.ProcessEnv = process.env): string {
  return env['LEMNISCATE_TEST_PG_URL']?.trim() || DEFAULT_TEST_PG_URL;
}

/** Replaces the database name in a PostgreSQL URL, keeping credentials and query (socket host). */
export function withDatabaseName(url: string, name: string): string {
  const match = /^(postgres(?:ql)?:\/\/[^/?]*)(?:\/([^?]*))?(\?.*)?$/.exec(url);
  if (!match) throw new Error(`Not a PostgreSQL URL: ${url}`);
  return `${match[1]}/${encodeURIComponent(name)}${match[3] ?? ''}`;
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
    throw new Error(
      `The medium tests need PostgreSQL at ${adminUrl} (set LEMNISCATE_TEST_PG_URL, or start it with \`pg_ctlcluster 15 main start\`): ${(error as Error).message}`,
    );
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

/**
 * A TCP proxy between the gateway and PostgreSQL that can take the database away the way a restart
 * does, without restarting the server other tests share: `cut(ms)` resets every open connection and
 * refuses new ones for `ms`; `loseNextCommitReply()` lets the next COMMIT reach the server, waits for
 * the server's answer, and breaks the connection instead of passing it on (the commit landed; the
 * client cannot know).
 */
export interface PgProxy {
  /** `url` with its host and port replaced by the proxy's. */
  url: string;
  port: number;
  /** Connections accepted so far, and those reset by cuts. */
  readonly stats: { accepted: number; reset: number; commitRepliesLost: number };
  cut(ms: number): Promise<void>;
  /** Takes the database away until `restore()`. */
  down(): Promise<void>;
  restore(): Promise<void>;
  loseNextCommitReply(): void;
  /** The same for the next statement whose text matches `pattern` (an autocommit INSERT). */
  loseNextReplyTo(pattern: RegExp): void;
  close(): Promise<void>;
}

export async function startPgProxy(url: string, port = 0): Promise<PgProxy> {
  const target = new URL(url);
  const targetHost = target.hostname || '127.0.0.1';
  const targetPort = Number(target.port || 5432);
  const { createServer, connect } = await import('node:net');
  const pairs = new Set<{ client: import('node:net').Socket; server: import('node:net').Socket }>();
  const stats = { accepted: 0, reset: 0, commitRepliesLost: 0 };
  let lose: RegExp | null = null;
  const COMMIT = /\bcommit\0/i;

  const server = createServer((client) => {
    stats.accepted++;
    const upstream = connect(targetPort, targetHost);
    const pair = { client, server: upstream };
    pairs.add(pair);
    let swallowing = false;
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (lose && lose.test(chunk.toString('latin1'))) {
        lose = null;
        swallowing = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (swallowing) {
        // The server has answered the COMMIT: it is durable. The client never hears of it.
        stats.commitRepliesLost++;
        client.resetAndDestroy();
        drop();
        return;
      }
      client.write(chunk);
    });
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
  });
  const listen = (p: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(p, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as { port: number }).port);
      });
    });
  const actualPort = await listen(port);
  let listening = true;
  const down = async () => {
    if (listening) {
      listening = false;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const pair of [...pairs]) {
        stats.reset++;
        pair.client.resetAndDestroy();
        pair.server.destroy();
        pairs.delete(pair);
      }
      await closed;
    }
  };
  const restore = async () => {
    if (!listening) {
      await listen(actualPort);
      listening = true;
    }
  };
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(actualPort);
  proxied.searchParams.delete('host');
  return {
    url: proxied.toString(),
    port: actualPort,
    stats,
    down,
    restore,
    async cut(ms) {
      await down();
      await new Promise((r) => setTimeout(r, ms));
      await restore();
    },
    loseNextCommitReply() {
      lose = COMMIT;
    },
    loseNextReplyTo(pattern) {
      lose = pattern;
    },
    async close() {
      await down();
    },
  };
}
