import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DatabaseError, databaseOptionsFromEnv, defaultDataDir, openDatabase, redactUrl } from '../../src/db/database';

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
