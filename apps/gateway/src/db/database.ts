// One way to reach the database whatever runs it: PostgreSQL through `pg` when a URL is given,
// PGlite (PostgreSQL compiled to WASM, in-process, zero setup) otherwise. Both speak the same SQL,
// so the schema, the migrations and every repository are shared.
import { PGlite } from '@electric-sql/pglite';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Pool, Client, type PoolConfig } from 'pg';
import { applyMigrations, DEFAULT_MIGRATIONS_DIR, MigrationError, readMigrations, type MigrationReport, type MigrationTarget } from './migrate';
import { forDrizzle, TEXT_KEPT_PARSERS } from './pglite-parsers';
import * as schema from './schema';

export type Schema = typeof schema;
/** The Drizzle handle every repository uses; the same type on PGlite and on PostgreSQL. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;
export type DatabaseKind = 'pglite' | 'postgres';

/** The least-privileged role created by the migrations (INSERT/SELECT only on audit_log). */
export const APP_ROLE = 'lemniscate_app';
/** `dataDir` value for a throw-away PGlite database held in memory. */
export const IN_MEMORY = 'memory://';
const LOCK_FILE = 'lemniscate.lock';

export interface DatabaseOptions {
  /** A PostgreSQL URL. When absent, PGlite is used. */
  url?: string;
  /** PGlite's directory (ignored with `url`); `memory://` for an in-memory database. */
  dataDir?: string;
  /** Apply pending migrations before returning (default true). */
  migrate?: boolean;
  migrationsDir?: string;
  /**
   * The role the connections switch to after migrating, so the running gateway cannot UPDATE or
   * DELETE the audit log even if its login could. `null` keeps the login's own role.
   */
  appRole?: string | null;
  /** PostgreSQL only: the most connections held open at once (default 10). */
  poolSize?: number;
}

export interface Database {
  readonly db: Db;
  readonly kind: DatabaseKind;
  /** The role connections run as after start-up (null when the login's role is kept). */
  readonly role: string | null;
  /** What this open applied (empty when migrations were skipped or already there). */
  readonly migrations: MigrationReport;
  /** The underlying driver, for what Drizzle does not cover (LISTEN/NOTIFY, tests). */
  readonly driver: { kind: 'pglite'; client: PGlite } | { kind: 'postgres'; pool: Pool; url: string };
  /** Answers when the database answers a trivial query (for /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export class DatabaseError extends Error {
  override readonly name = 'DatabaseError';
}

/** Where PGlite keeps its files when nothing says otherwise. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  return env['LEMNISCATE_DATA_DIR'] || path.join(os.homedir(), '.lemniscate', 'data');
}

/** The options the gateway runs with, read from its environment (DATABASE_URL, LEMNISCATE_DATA_DIR). */
export function databaseOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): DatabaseOptions {
  const url = env['DATABASE_URL']?.trim();
  return url ? { url } : { dataDir: defaultDataDir(env) };
}

export async function openDatabase(options: DatabaseOptions = {}): Promise<Database> {
  return options.url ? openPostgres(options.url, options) : openPglite(options);
}

/** `lemni-gateway migrate`: applies pending migrations with the login's own rights, then closes. */
export async function migrate(options: DatabaseOptions = databaseOptionsFromEnv()): Promise<MigrationReport> {
  const database = await openDatabase({ ...options, migrate: true, appRole: null });
  try {
    return database.migrations;
  } finally {
    await database.close();
  }
}

async function runMigrations(target: MigrationTarget, options: DatabaseOptions): Promise<MigrationReport> {
  if (options.migrate === false) return { applied: [], total: 0 };
  const files = await readMigrations(options.migrationsDir ?? DEFAULT_MIGRATIONS_DIR);
  return applyMigrations(target, files);
}

function pgliteDirectory(options: DatabaseOptions): string | undefined {
  const dir = options.dataDir ?? defaultDataDir();
  return dir === IN_MEMORY ? undefined : path.join(dir, 'pglite');
}

async function openPglite(options: DatabaseOptions): Promise<Database> {
  const dir = pgliteDirectory(options);
  let release: () => Promise<void> = async () => undefined;
  if (dir) {
    // The database holds password hashes and the audit log: readable by the gateway's user only.
    await mkdir(dir, { recursive: true, mode: 0o700 });
    release = await lockDirectory(dir);
  }
  let client: PGlite;
  try {
    // Dates and times kept as text by the database itself, as Drizzle wants them (pglite-parsers.ts).
    client = await PGlite.create({ ...(dir ? { dataDir: dir } : {}), parsers: TEXT_KEPT_PARSERS });
  } catch (error) {
    await release();
    throw new DatabaseError(`The embedded database in ${dir ?? 'memory'} could not be opened: ${(error as Error).message}`);
  }
  try {
    const migrations = await runMigrations(
      {
        transaction: (fn) =>
          client.transaction((tx) =>
            fn({
              query: async <T>(text: string, params?: unknown[]) => (await tx.query<T>(text, params)).rows,
              exec: async (script: string) => {
                await tx.exec(script);
              },
            }),
          ),
      },
      options,
    );
    const role = await adoptRole(options.appRole === undefined ? APP_ROLE : options.appRole, async (text, params) => (await client.query<{ ok: boolean }>(text, params)).rows);
    if (role) await client.exec(`SET ROLE ${quoteIdent(role)}`);
    const db = drizzlePglite({ client: forDrizzle(client), schema }) as unknown as Db;
    return {
      db,
      kind: 'pglite',
      role,
      migrations,
      driver: { kind: 'pglite', client },
      ping: async () => {
        await client.query('SELECT 1');
      },
      close: async () => {
        if (!client.closed) await client.close();
        await release();
      },
    };
  } catch (error) {
    await client.close();
    await release();
    throw error;
  }
}

async function openPostgres(url: string, options: DatabaseOptions): Promise<Database> {
  // Migrations run on their own connection with the login's rights; the pool then runs as the app role.
  const owner = new Client({ connectionString: url });
  try {
    await owner.connect();
  } catch (error) {
    throw new DatabaseError(`PostgreSQL at ${redactUrl(url)} could not be reached: ${(error as Error).message}`);
  }
  let migrations: MigrationReport;
  let role: string | null;
  try {
    migrations = await runMigrations(
      {
        transaction: async (fn) => {
          await owner.query('BEGIN');
          try {
            const result = await fn({
              query: async <T>(text: string, params?: unknown[]) => (await owner.query(text, params)).rows as T[],
              exec: async (script: string) => {
                await owner.query(script);
              },
            });
            await owner.query('COMMIT');
            return result;
          } catch (error) {
            await owner.query('ROLLBACK');
            throw error;
          }
        },
      },
      options,
    );
    role = await adoptRole(options.appRole === undefined ? APP_ROLE : options.appRole, async (text, params) => (await owner.query(text, params)).rows as { ok: boolean }[]);
  } catch (error) {
    if (error instanceof MigrationError) throw error;
    throw new DatabaseError(`PostgreSQL at ${redactUrl(url)} could not be prepared: ${(error as Error).message}`);
  } finally {
    await owner.end();
  }
  // A server that does not answer a connect within 10 s counts as down (the retry window then
  // decides, db/retry.ts) instead of holding the caller forever; keep-alive notices a dead peer.
  const config: PoolConfig = { connectionString: url, max: options.poolSize ?? 10, connectionTimeoutMillis: 10_000, keepAlive: true };
  // A startup parameter rather than a query after connect: no connection is ever handed out unswitched.
  if (role) config.options = `-c role=${role}`;
  const pool = new Pool(config);
  // An idle connection dropped by the server (a restart) must not crash the process: the pool
  // discards it, and discards a checked-out one that broke when it is released (pg-pool checks
  // `_queryable`), so the next query opens a fresh connection once the server is back.
  pool.on('error', () => undefined);
  // A checked-out connection that breaks between two statements of a transaction reports it as an
  // 'error' event, which would crash the process unheard; its next statement fails (a transient
  // error the caller retries) and the pool drops it on release.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = drizzlePg({ client: pool, schema }) as unknown as Db;
  return {
    db,
    kind: 'postgres',
    role,
    migrations,
    driver: { kind: 'postgres', pool, url },
    ping: async () => {
      await pool.query('SELECT 1');
    },
    close: async () => {
      await pool.end();
    },
  };
}

/**
 * PGlite is one process's database: two processes writing the same directory corrupt it. A lock
 * file holding the owner's pid refuses a second opener while the first is alive, and is taken over
 * when its process is gone (a crash leaves it behind).
 */
async function lockDirectory(dir: string): Promise<() => Promise<void>> {
  const file = path.join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return async () => {
        const holder = await readFile(file, 'utf8').catch(() => '');
        if (Number.parseInt(holder, 10) === process.pid) await unlink(file).catch(() => undefined);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new DatabaseError(`The lock file ${file} cannot be created: ${(error as Error).message}`);
    }
    const holder = Number.parseInt(await readFile(file, 'utf8').catch(() => ''), 10);
    if (Number.isInteger(holder) && holder > 0 && isAlive(holder)) {
      const who = holder === process.pid ? 'this process' : `process ${holder}`;
      throw new DatabaseError(`The embedded database in ${dir} is already open in ${who}. Stop that gateway first, or set DATABASE_URL to a PostgreSQL server to run several.`);
    }
    await unlink(file).catch(() => undefined);
  }
  throw new DatabaseError(`The lock file ${file} keeps reappearing; another process is opening the embedded database at the same time.`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Returns the role to switch to, or null when there is none this login may use. */
async function adoptRole(role: string | null, query: (text: string, params: unknown[]) => Promise<{ ok: boolean }[]>): Promise<string | null> {
  if (!role) return null;
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(role)) {
    throw new DatabaseError(`The database role name "${role}" is not a plain lower-case identifier.`);
  }
  const rows = await query(`SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AND pg_has_role(current_user, (SELECT oid FROM pg_roles WHERE rolname = $1), 'MEMBER') AS ok`, [role]);
  return rows[0]?.ok ? role : null;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** A URL fit for a log line or an error message: no password. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]+):[^@/]*@/, '$1:***@');
}
