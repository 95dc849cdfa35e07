import { mkdtemp, rm, writeFile, copyFile, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { is } from 'drizzle-orm';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import { APP_ROLE, migrate, openDatabase } from '../../src/db/database';
import { DEFAULT_MIGRATIONS_DIR, MigrationError, readMigrations } from '../../src/db/migrate';
import * as schema from '../../src/db/schema';
import { freshDatabase, withTestDatabases } from '../support/db';

// Jest reads testTimeout only from the root configuration, not from a project: set it here.
jest.setTimeout(120_000);

const tables = (Object.values(schema) as unknown[]).filter((value): value is PgTable => is(value, PgTable));

withTestDatabases((database, kind) => {
  it('applies every migration file once and records it', async () => {
    const files = await readMigrations();
    expect(database().migrations.applied).toEqual(files.map((f) => f.name));
    const rows = await database().superuser<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name');
    expect(rows.map((r) => r.name)).toEqual(files.map((f) => f.name));
  });

  it('runs the gateway as the least-privileged application role', async () => {
    expect(database().role).toBe(APP_ROLE);
    const rows = await database().superuser<{ has: boolean }>(`SELECT has_table_privilege($1, 'audit_log', 'UPDATE') OR has_table_privilege($1, 'audit_log', 'DELETE') AS has`, [APP_ROLE]);
    expect(rows[0]?.has).toBe(false);
  });

  it('creates exactly the columns the Drizzle schema declares, with the same nullability', async () => {
    const columns = await database().superuser<{ table_name: string; column_name: string; is_nullable: string }>(
      `SELECT table_name, column_name, is_nullable FROM information_schema.columns WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'`,
    );
    const actual = columns.map((c) => `${c.table_name}.${c.column_name}${c.is_nullable === 'YES' ? '?' : ''}`).sort();
    const declared = tables
      .flatMap((table) => {
        const config = getTableConfig(table);
        return config.columns.map((c) => `${config.name}.${c.name}${c.notNull ? '' : '?'}`);
      })
      .sort();
    expect(actual).toEqual(declared);
  });

  if (kind === 'pglite') {
    it('keeps an on-disk database across a reopen and applies nothing the second time', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'lemniscate-db-'));
      try {
        const first = await migrate({ dataDir: dir });
        expect(first.applied.length).toBeGreaterThan(0);
        const second = await migrate({ dataDir: dir });
        expect(second).toEqual({ applied: [], total: first.total });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
});

describe('migration safety', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'lemniscate-migrations-'));
    for (const name of await readdir(DEFAULT_MIGRATIONS_DIR)) {
      await copyFile(path.join(DEFAULT_MIGRATIONS_DIR, name), path.join(dir, name));
    }
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a file that is not named NNNN_words.sql', async () => {
    await writeFile(path.join(dir, 'add-things.sql'), 'SELECT 1;');
    await expect(readMigrations(dir)).rejects.toThrow(/add-things\.sql is not named NNNN_words\.sql/);
  });

  it('refuses two files with the same number', async () => {
    await writeFile(path.join(dir, '0001_again.sql'), 'SELECT 1;');
    await expect(readMigrations(dir)).rejects.toThrow(/share the number 0001/);
  });

  it('refuses an empty folder with a sentence naming it', async () => {
    const empty = await mkdtemp(path.join(os.tmpdir(), 'lemniscate-empty-'));
    try {
      await expect(readMigrations(empty)).rejects.toThrow(`No migration files were found in ${empty}.`);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it('on postgres, a failing migration is refused with its name', async () => {
    await writeFile(path.join(dir, '9999_broken.sql'), 'CREATE TABLE half_done (id int);\nSELECT no_such_function();');
    const failing = freshDatabase('postgres', { migrationsDir: dir });
    await expect(failing).rejects.toThrow(MigrationError);
    await expect(failing).rejects.toThrow(/Migration 9999_broken\.sql failed, nothing was applied/);
  });

  it('on pglite, a failing migration leaves nothing behind', async () => {
    await writeFile(path.join(dir, '9999_broken.sql'), 'CREATE TABLE half_done (id int);\nSELECT no_such_function();');
    const data = await mkdtemp(path.join(os.tmpdir(), 'lemniscate-db-'));
    try {
      await expect(migrate({ dataDir: data, migrationsDir: dir })).rejects.toThrow(/Migration 9999_broken\.sql failed, nothing was applied/);
      const db = await openDatabase({ dataDir: data, migrate: false, appRole: null });
      try {
        if (db.driver.kind !== 'pglite') throw new Error('expected PGlite');
        const rows = await db.driver.client.query<{ users: string | null; half: string | null; log: string | null }>(
          `SELECT to_regclass('users')::text AS users, to_regclass('half_done')::text AS half, to_regclass('schema_migrations')::text AS log`,
        );
        expect(rows.rows[0]).toEqual({ users: null, half: null, log: null });
      } finally {
        await db.close();
      }
    } finally {
      await rm(data, { recursive: true, force: true });
    }
  });

  it('on pglite, refuses a migration edited after it was applied, and one the code does not know', async () => {
    const data = await mkdtemp(path.join(os.tmpdir(), 'lemniscate-db-'));
    try {
      await migrate({ dataDir: data, migrationsDir: dir });
      await writeFile(path.join(dir, '0001_initial.sql'), '-- edited\n', { flag: 'a' });
      await expect(migrate({ dataDir: data, migrationsDir: dir })).rejects.toThrow(/Migration 0001_initial\.sql was changed after it was applied/);

      const db = await openDatabase({ dataDir: data, migrate: false, appRole: null });
      try {
        if (db.driver.kind !== 'pglite') throw new Error('expected PGlite');
        await db.driver.client.query(`INSERT INTO schema_migrations (name, checksum) VALUES ('9000_future.sql', 'x')`);
      } finally {
        await db.close();
      }
      await expect(migrate({ dataDir: data })).rejects.toThrow(/has migration 9000_future\.sql, which this gateway does not know/);
    } finally {
      await rm(data, { recursive: true, force: true });
    }
  });

  it('on postgres, a login with only the application role starts when nothing is pending, and is told who must migrate otherwise', async () => {
    const owner = await freshDatabase('postgres');
    try {
      if (owner.driver.kind !== 'postgres') throw new Error('expected PostgreSQL');
      const url = `${owner.driver.url}${owner.driver.url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c role=${APP_ROLE}`)}`;
      const restricted = await openDatabase({ url });
      expect(restricted.migrations.applied).toEqual([]);
      await restricted.close();
      await writeFile(path.join(dir, '9999_more.sql'), 'CREATE TABLE more (id int);');
      await expect(openDatabase({ url, migrationsDir: dir })).rejects.toThrow(
        'Migration 9999_more.sql failed, nothing was applied: permission denied for schema public. Run `lemni-gateway migrate` with the login that owns the database.',
      );
    } finally {
      await owner.close();
    }
  });

  it('says which server it could not reach', async () => {
    await expect(openDatabase({ url: 'postgres://nobody:secret@127.0.0.1:1/none' })).rejects.toThrow(/^PostgreSQL at postgres:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none could not be reached/);
  });
});
