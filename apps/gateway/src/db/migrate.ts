// Plain SQL migrations applied by TypeScript (DESIGN.md: no executable fetched at install time).
// All pending files are applied in one transaction under an advisory lock, so two gateways starting
// together apply them once, and a failing file leaves the database exactly as it was.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/** The statements a migration needs: parameterised queries and multi-statement scripts. */
interface SqlSession {
  query<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  exec(script: string): Promise<void>;
}

/** A connection that can run a function inside one transaction. */
export interface MigrationTarget {
  transaction<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
}

interface MigrationFile {
  name: string;
  sql: string;
  checksum: string;
}

export interface MigrationReport {
  /** Files applied by this call, in order. */
  applied: string[];
  /** Every migration the database now carries. */
  total: number;
}

export class MigrationError extends Error {
  override readonly name = 'MigrationError';
}

export const DEFAULT_MIGRATIONS_DIR = path.resolve(__dirname, '..', '..', 'migrations');

const FILE_NAME = /^(\d{4})_[a-z0-9_]+\.sql$/;
// Arbitrary but fixed: every gateway on this database contends for the same lock.
const MIGRATION_LOCK_KEY = 7_341_205_118;

export async function readMigrations(dir: string = DEFAULT_MIGRATIONS_DIR): Promise<MigrationFile[]> {
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (error) {
    throw new MigrationError(`The migrations folder ${dir} cannot be read: ${(error as Error).message}`);
  }
  const files = entries.filter((name) => name.endsWith('.sql')).sort();
  const seen = new Set<string>();
  const migrations: MigrationFile[] = [];
  for (const name of files) {
    const match = FILE_NAME.exec(name);
    if (!match) {
      throw new MigrationError(`The migration file ${name} is not named NNNN_words.sql (four digits, then lower-case words).`);
    }
    const number = match[1] as string;
    if (seen.has(number)) {
      throw new MigrationError(`Two migration files share the number ${number}; each number must be used once.`);
    }
    seen.add(number);
    const sql = await readFile(path.join(dir, name), 'utf8');
    migrations.push({ name, sql, checksum: createHash('sha256').update(sql).digest('hex') });
  }
  if (migrations.length === 0) {
    throw new MigrationError(`No migration files were found in ${dir}.`);
  }
  return migrations;
}

export async function applyMigrations(target: MigrationTarget, migrations: MigrationFile[]): Promise<MigrationReport> {
  return target.transaction(async (session) => {
    await session.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    // Checked before creating: a login without CREATE on the schema (the gateway running as the
    // application role) must still be able to start when there is nothing to apply.
    const [exists] = await session.query<{ found: boolean }>(`SELECT to_regclass('schema_migrations') IS NOT NULL AS found`);
    if (!exists?.found) {
      await session.exec(
        `CREATE TABLE schema_migrations (
           name text PRIMARY KEY,
           checksum text NOT NULL,
           applied_at timestamptz NOT NULL DEFAULT now()
         )`,
      );
    }
    const rows = await session.query<{ name: string; checksum: string }>('SELECT name, checksum FROM schema_migrations ORDER BY name');
    const known = new Map(migrations.map((m) => [m.name, m]));
    for (const row of rows) {
      const file = known.get(row.name);
      if (!file) {
        throw new MigrationError(`The database has migration ${row.name}, which this gateway does not know: the database was migrated by a newer version. Upgrade the gateway.`);
      }
      if (file.checksum !== row.checksum) {
        throw new MigrationError(
          `Migration ${row.name} was changed after it was applied (checksum ${row.checksum.slice(0, 12)}… in the database, ${file.checksum.slice(0, 12)}… on disk). Applied migrations are never edited; add a new one.`,
        );
      }
    }
    const done = new Set(rows.map((r) => r.name));
    const applied: string[] = [];
    for (const migration of migrations) {
      if (done.has(migration.name)) continue;
      try {
        await session.exec(migration.sql);
      } catch (error) {
        const message = (error as Error).message;
        const hint = /permission denied|must be owner/.test(message) ? ' Run `lemni-gateway migrate` with the login that owns the database.' : '';
        throw new MigrationError(`Migration ${migration.name} failed, nothing was applied: ${message}.${hint}`);
      }
      await session.query('INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)', [migration.name, migration.checksum]);
      applied.push(migration.name);
    }
    return { applied, total: done.size + applied.length };
  });
}
