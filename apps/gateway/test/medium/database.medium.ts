import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { types } from '@electric-sql/pglite';
import { eq, sql } from 'drizzle-orm';
import { DatabaseError, databaseOptionsFromEnv, defaultDataDir, IN_MEMORY, openDatabase, redactUrl, type Database } from '../../src/db/database';
import { TEXT_KEPT_TYPES, withoutTextParsers } from '../../src/db/pglite-parsers';
import { PreparedStatements } from '../../src/db/pglite-prepared';
import { users } from '../../src/db/schema';

// Jest reads testTimeout only from the root configuration, not from a project: set it here.
jest.setTimeout(120_000);

describe('the embedded database on disk', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'lemniscate-data-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is private to the gateway user and refuses a second opener while the first is open', async () => {
    const first = await openDatabase({ dataDir: dir });
    try {
      expect((await stat(path.join(dir, 'pglite'))).mode & 0o777).toBe(0o700);
      await expect(readFile(path.join(dir, 'pglite', 'lemniscate.lock'), 'utf8')).resolves.toBe(`${process.pid}\n`);
      const second = openDatabase({ dataDir: dir });
      await expect(second).rejects.toThrow(DatabaseError);
      await expect(second).rejects.toThrow(`The embedded database in ${path.join(dir, 'pglite')} is already open in this process.`);
    } finally {
      await first.close();
    }
    const again = await openDatabase({ dataDir: dir });
    await again.close();
  });

  it('takes over the lock a crashed process left behind', async () => {
    const gone = spawn(process.execPath, ['-e', '']);
    const pid = gone.pid as number;
    await new Promise((resolve) => gone.on('exit', resolve));
    await openDatabase({ dataDir: dir, migrate: false }).then((db) => db.close());
    await writeFile(path.join(dir, 'pglite', 'lemniscate.lock'), `${pid}\n`);
    const db = await openDatabase({ dataDir: dir });
    await expect(db.ping()).resolves.toBeUndefined();
    await db.close();
  });
});

describe('configuration', () => {
  it('uses PostgreSQL when DATABASE_URL is set, else PGlite in LEMNISCATE_DATA_DIR or ~/.lemniscate/data', () => {
    expect(databaseOptionsFromEnv({ DATABASE_URL: ' postgres://db/x ' })).toEqual({ url: 'postgres://db/x' });
    expect(databaseOptionsFromEnv({ DATABASE_URL: '', LEMNISCATE_DATA_DIR: '/srv/lemniscate' })).toEqual({ dataDir: '/srv/lemniscate' });
    expect(defaultDataDir({})).toBe(path.join(os.homedir(), '.lemniscate', 'data'));
  });

  it('never shows a password in a message', () => {
    expect(redactUrl('postgres://app:s3cr3t@db.internal:5432/lemniscate')).toBe('postgres://app:***@db.internal:5432/lemniscate');
    expect(redactUrl('postgres://postgres@/postgres?host=/var/run/postgresql')).toBe('postgres://postgres@/postgres?host=/var/run/postgresql');
  });
});

describe("the embedded database and Drizzle's parsers", () => {
  let database: Database;
  beforeAll(async () => {
    database = await openDatabase({ dataDir: IN_MEMORY });
  });
  afterAll(async () => {
    await database?.close();
  });
  // The options each statement's answer is read with (pglite-prepared.ts hands them to PGlite's parser).
  const optionsOf = (spy: jest.SpyInstance) => spy.mock.calls.map((call) => call[1] as { rowMode?: string; parsers?: unknown } | undefined);

  it("gives PGlite Drizzle's statements without parsers of their own, and Drizzle still reads dates as before", async () => {
    const results = jest.spyOn(PreparedStatements.prototype, 'answer');
    try {
      const [user] = await database.db.insert(users).values({ email: 'parsers@example.test', displayName: 'Parsers', role: 'developer' }).returning();
      const [read] = await database.db
        .select()
        .from(users)
        .where(eq(users.id, (user as { id: string }).id));
      const raw = await database.db.execute(sql`SELECT created_at, created_at::text AS text FROM users WHERE id = ${(user as { id: string }).id}`);
      expect(optionsOf(results).length).toBe(3);
      for (const options of optionsOf(results)) {
        expect(options?.rowMode).toBeDefined();
        expect(options?.parsers).toBeUndefined();
      }
      expect(read?.createdAt).toBeInstanceOf(Date);
      expect(read?.createdAt.getTime()).toBe(user?.createdAt.getTime());
      // The database's text for it, as Drizzle's raw statements have always given it back.
      const row = (raw as unknown as { rows: { created_at: unknown; text: string }[] }).rows[0];
      expect(row?.created_at).toBe(row?.text);
      expect(new Date(row?.text as string).getTime()).toBe(read?.createdAt.getTime());
    } finally {
      results.mockRestore();
    }
  });

  it('does the same inside a transaction', async () => {
    const results = jest.spyOn(PreparedStatements.prototype, 'answer');
    try {
      const read = await database.db.transaction(async (tx) => {
        await tx.insert(users).values({ email: 'parsers-tx@example.test', displayName: 'Parsers', role: 'developer' });
        return tx.select().from(users).where(eq(users.email, 'parsers-tx@example.test'));
      });
      expect(read[0]?.createdAt).toBeInstanceOf(Date);
      expect(Number.isNaN(read[0]?.createdAt.getTime())).toBe(false);
      expect(optionsOf(results).length).toBe(2);
      for (const options of optionsOf(results)) expect(options?.parsers).toBeUndefined();
    } finally {
      results.mockRestore();
    }
  });

  const keepText = (value: string) => value;
  const others = [types.INT4, types.INT8, types.BOOL, types.JSON, types.JSONB, types.TEXT, types.UUID];
  it.each(TEXT_KEPT_TYPES.flatMap((type) => others.map((other) => [type, other] as const)))(
    'drops a parser keeping type %p as text, and keeps it beside one for type %p or one that changes the value',
    (type, other) => {
      expect(withoutTextParsers({ parsers: { [type]: keepText } })).toEqual({ parsers: undefined });
      const beside = { parsers: { [type]: keepText, [other]: keepText } };
      expect(withoutTextParsers(beside)).toBe(beside);
      const changing = { parsers: { [type]: (value: string) => `${value}!` } };
      expect(withoutTextParsers(changing)).toBe(changing);
    },
  );

  it('keeps parsers that do anything else than keep the text of a date or time', () => {
    const keep = (value: string) => value;
    const other = { rowMode: 'array' as const, parsers: { [types.INT4]: keep } };
    const changing = { rowMode: 'array' as const, parsers: { [types.TIMESTAMPTZ]: (value: string) => new Date(value) } };
    const mixed = { rowMode: 'array' as const, parsers: { [types.TIMESTAMPTZ]: keep, [types.JSON]: keep } };
    expect(withoutTextParsers(other)).toBe(other);
    expect(withoutTextParsers(changing)).toBe(changing);
    expect(withoutTextParsers(mixed)).toBe(mixed);
    expect(withoutTextParsers(undefined)).toBeUndefined();
    expect(withoutTextParsers({ rowMode: 'object' as const, parsers: Object.fromEntries(TEXT_KEPT_TYPES.map((type) => [type, keep])) })).toEqual({ rowMode: 'object', parsers: undefined });
  });
});
