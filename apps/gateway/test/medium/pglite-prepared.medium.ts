import { PGlite } from '@electric-sql/pglite';
import { TEXT_KEPT_PARSERS } from '../../src/db/pglite-parsers';
import { MAX_PREPARED, PreparedStatements } from '../../src/db/pglite-prepared';

jest.setTimeout(120_000);

/**
 * The embedded database's statements prepared once (pglite-prepared.ts): every answer the same as
 * PGlite's own `query` gives, for every column type the schema uses, with and without a value, in
 * both row modes; a text prepared once and kept within a bound; refusals as PGlite's, leaving the
 * database usable; a plan whose table changed prepared again; and a statement outside a transaction
 * never run inside it.
 */
describe('statements prepared once on the embedded database', () => {
  let pg: PGlite;
  let statements: PreparedStatements;
  beforeAll(async () => {
    pg = await PGlite.create({ parsers: TEXT_KEPT_PARSERS });
    statements = new PreparedStatements(pg);
  });
  afterAll(async () => {
    await pg?.close();
  });

  // Every type the gateway's tables use, with a value of it, as Drizzle sends parameters.
  const columns: [type: string, value: unknown][] = [
    ['int4', 42],
    ['int8', '9007199254740993'],
    ['numeric', '12.50'],
    ['bool', true],
    ['text', 'héllo\u0000'.replace('\u0000', ' ') + '"quoted" \\ back'],
    ['uuid', '6f1c1f7e-3b7a-4c55-9d0e-2f4b7b8f9a10'],
    ['jsonb', JSON.stringify({ a: [1, 'two', null], b: { c: true } })],
    ['json', JSON.stringify({ z: 1, a: 2 })],
    ['timestamptz', '2026-12-07T18:00:00.123Z'],
    ['timestamptz', new Date('2026-12-07T18:00:00.123Z')],
    ['int8', 9007199254740993n],
    ['timestamp', '2026-12-07 18:00:00.5'],
    ['date', '2026-12-07'],
    ['interval', '1 day 02:00:00'],
    ['bytea', Buffer.from([0, 1, 2, 255])],
    ['text[]', ['a', 'b,c', 'd"e', null]],
    ['int8[]', [1, 2, 3]],
    ['timestamptz[]', ['2026-12-07T18:00:00.000Z']],
  ];

  const cases = columns.flatMap(([type, value]) => [value, null].flatMap((v) => (['object', 'array'] as const).map((rowMode) => [type, v, rowMode] as const)));
  it.each(cases.map((c, i) => [...c, i] as const))('a %s column written with %p and read in %s mode answers as PGlite does', async (type, value, rowMode, i) => {
    const table = `t_${i}`;
    await pg.exec(`CREATE TABLE ${table} (id serial PRIMARY KEY, v ${type})`);
    const insert = `INSERT INTO ${table} (v) VALUES ($1) RETURNING id, v`;
    const mine = await statements.query(insert, [value], { rowMode });
    const theirs = await pg.query(insert, [value], { rowMode });
    // Rows 1 and 2: the ids differ, everything else is the same.
    const strip = (rows: unknown[]) => rows.map((r) => (Array.isArray(r) ? r.slice(1) : { ...(r as object), id: undefined }));
    expect({ ...mine, rows: strip(mine.rows) }).toEqual({ ...theirs, rows: strip(theirs.rows) });
    const select = `SELECT v, v IS NULL AS missing, $1::${type} AS given FROM ${table} ORDER BY id`;
    expect(await statements.query(select, [value], { rowMode })).toEqual(await pg.query(select, [value], { rowMode }));
    // A run again of the same texts.
    expect(await statements.query(select, [value], { rowMode })).toEqual(await pg.query(select, [value], { rowMode }));
  });

  it('prepares a text once, and runs texts beyond its bound through PGlite unprepared', async () => {
    const fresh = new PreparedStatements(pg);
    for (let i = 0; i < 3; i++) expect((await fresh.query('SELECT $1::int + 1 AS n', [i])).rows).toEqual([{ n: i + 1 }]);
    expect(fresh.size).toBe(1);
    for (let i = 1; i < MAX_PREPARED; i++) await fresh.query(`SELECT ${i} AS n`);
    expect(fresh.size).toBe(MAX_PREPARED);
    const query = jest.spyOn(pg, 'query');
    try {
      expect((await fresh.query('SELECT $1::text AS beyond', ['yes'])).rows).toEqual([{ beyond: 'yes' }]);
      expect(query).toHaveBeenCalledTimes(1);
      expect(fresh.size).toBe(MAX_PREPARED);
      // A kept text is still run prepared.
      expect((await fresh.query('SELECT $1::int + 1 AS n', [9])).rows).toEqual([{ n: 10 }]);
      expect(query).toHaveBeenCalledTimes(1);
    } finally {
      query.mockRestore();
    }
  });

  it.each([
    ['a duplicate key', 'INSERT INTO refusals (k) VALUES ($1)', ['one'], '23505'],
    ['a value of the wrong type', 'INSERT INTO refusals (k, n) VALUES ($1, $2)', ['two', 'not a number'], '22P02'],
    ['a syntax error', 'INSERT INTO refusals (k VALUES ($1)', ['three'], '42601'],
    ['an unknown table', 'SELECT * FROM no_such_table WHERE k = $1', ['four'], '42P01'],
  ])('refuses %s as PGlite does, keeps nothing it could not prepare, and answers the next statement', async (_what, text, params, code) => {
    await pg.exec('CREATE TABLE IF NOT EXISTS refusals (k text PRIMARY KEY, n int)');
    await pg.query("INSERT INTO refusals (k) VALUES ('one') ON CONFLICT DO NOTHING");
    const before = statements.size;
    const mine = (await statements.query(text, params).catch((e: unknown) => e)) as Error & { code?: string; query?: string };
    const theirs = (await pg.query(text, params).catch((e: unknown) => e)) as Error & { code?: string };
    expect({ code: mine.code, message: mine.message, query: mine.query }).toEqual({ code, message: theirs.message, query: text });
    // Prepared only when the text itself was sound (the refusal came from its values).
    expect(statements.size).toBe(code === '42601' || code === '42P01' ? before : before + 1);
    expect((await statements.query('SELECT count(*)::int AS n FROM refusals WHERE k = $1', ['one'])).rows).toEqual([{ n: 1 }]);
  });

  it('prepares again a statement whose table changed under it', async () => {
    await pg.exec('CREATE TABLE changing (a int)');
    await pg.exec('INSERT INTO changing VALUES (1)');
    const text = 'SELECT * FROM changing WHERE a = $1';
    expect((await statements.query(text, [1])).rows).toEqual([{ a: 1 }]);
    await pg.exec('ALTER TABLE changing ADD COLUMN b text DEFAULT $$x$$');
    // PostgreSQL may refuse the kept plan once ("cached plan must not change result type"); the text is then prepared again.
    const first = await statements.query(text, [1]).catch((e: unknown) => e as { code: string });
    if ('code' in first) expect(first.code).toBe('0A000');
    else expect(first.rows).toEqual([{ a: 1, b: 'x' }]);
    expect((await statements.query(text, [1])).rows).toEqual([{ a: 1, b: 'x' }]);
  });

  it('runs a statement inside its transaction, and one from outside after the transaction, never in it', async () => {
    await pg.exec('CREATE TABLE turns (who text)');
    let outside: Promise<unknown> | undefined;
    let outsideDone = false;
    await pg
      .transaction(async (tx) => {
        await statements.queryIn(tx, 'INSERT INTO turns VALUES ($1)', ['inside']);
        // Seen inside, before its commit.
        expect((await statements.queryIn(tx, 'SELECT who FROM turns WHERE who = $1', ['inside'])).rows).toEqual([{ who: 'inside' }]);
        outside = statements.query('INSERT INTO turns VALUES ($1)', ['outside']).then(() => (outsideDone = true));
        await new Promise((r) => setTimeout(r, 100));
        expect(outsideDone).toBe(false);
        throw new Error('rolled back');
      })
      .catch((e: Error) => expect(e.message).toBe('rolled back'));
    await outside;
    // The outside statement waited for the transaction, and its roll-back did not take it along.
    expect((await statements.query('SELECT who FROM turns ORDER BY who', [])).rows).toEqual([{ who: 'outside' }]);
  });
});
