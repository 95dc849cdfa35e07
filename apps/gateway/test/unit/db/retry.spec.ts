import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseUnavailableError, TRANSIENT_DRIVER_MESSAGES, TRANSIENT_SOCKET_CODES, describeFailure, isTransientDbError, transientReason } from '../../../src/db/errors';
import { DB_RETRY_MAX_DELAY_MS, DB_RETRY_WINDOW_MS, retryDelay, withDbRetry } from '../../../src/db/retry';

// Every SQLSTATE PostgreSQL 15 defines (its own errcodes.txt), so the classification is checked
// against the whole list rather than the codes someone thought of.
const ERRCODES = readFileSync(join(__dirname, '../../support/fixtures/postgresql-15-errcodes.txt'), 'utf8')
  .split('\n')
  .map((line) => /^([0-9A-Z]{5})\s+[EWS]\s+\S+\s+(\S+)?/.exec(line))
  .filter((m): m is RegExpExecArray => m !== null)
  .map((m) => ({ code: m[1]!, name: m[2] ?? '' }));

/** The promise: the server went away or is coming back (class 08, 57P01–57P03), or it rolled back a conflict. */
const expectedTransient = (code: string) => code.startsWith('08') || ['57P01', '57P02', '57P03', '40001', '40P01'].includes(code);

/** A server error as `pg` raises it, wrapped the way Drizzle wraps it, with the SQL in the wrapper. */
function serverError(code: string, name = 'error'): Error {
  const pgError = Object.assign(new Error(`${name} happened`), { code, severity: code.startsWith('57') ? 'FATAL' : 'ERROR' });
  return Object.assign(new Error('Failed query: insert into "audit_log" ("seq", "payload") values ($1, $2)\nparams: 7,{"secret":"s3cr3t"}', { cause: pgError }), { name: 'DrizzleQueryError' });
}

/** A clock and a sleep that only move when the retry sleeps. */
function fakeTime() {
  let now = 0;
  const sleeps: number[] = [];
  return { now: () => now, sleep: async (ms: number) => void (sleeps.push(ms), (now += ms)), sleeps };
}

async function attemptsUntil<T>(error: Error, failures: number): Promise<{ attempts: number; result?: T; thrown?: unknown }> {
  const time = fakeTime();
  let attempts = 0;
  try {
    const result = await withDbRetry(async () => {
      attempts++;
      if (attempts <= failures) throw error;
      return 'done' as T;
    }, time);
    return { attempts, result };
  } catch (thrown) {
    return { attempts, thrown };
  }
}

describe('transient database errors', () => {
  it(`classifies each of the ${ERRCODES.length} SQLSTATEs of PostgreSQL 15`, () => {
    expect(ERRCODES.length).toBeGreaterThan(200);
    const transient = ERRCODES.filter((e) => expectedTransient(e.code)).map((e) => e.code);
    console.log(`${ERRCODES.length} SQLSTATEs: ${transient.length} transient (${transient.join(' ')}), ${ERRCODES.length - transient.length} permanent`);
    for (const { code, name } of ERRCODES) {
      expect([code, isTransientDbError(serverError(code, name))]).toEqual([code, expectedTransient(code)]);
    }
  });

  it.each(ERRCODES.map((e) => [e.code, e.name, expectedTransient(e.code)] as const))('%s %s: retried = %s', async (code, name, transient) => {
    const outcome = await attemptsUntil(serverError(code, name), 3);
    if (transient) {
      expect(outcome).toEqual({ attempts: 4, result: 'done' });
    } else {
      expect(outcome.attempts).toBe(1);
      expect((outcome.thrown as Error).message).toContain('Failed query');
    }
  });

  it.each([...TRANSIENT_SOCKET_CODES])('socket error %s is retried, and told without its code', async (code) => {
    const error = Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, errno: -111, syscall: 'connect' });
    expect(await attemptsUntil(error, 2)).toEqual({ attempts: 3, result: 'done' });
    // Node reports a refused dual-stack connect as an AggregateError of one error per address.
    expect(transientReason(new AggregateError([error, error]))).toBe(code);
    expect(describeFailure(new Error('Failed query: select 1', { cause: error }))).toBe('The gateway lost its connection to the database; the work was stopped rather than recorded incompletely.');
  });

  it.each(['Connection terminated unexpectedly', 'Connection terminated', 'Client has encountered a connection error and is not queryable', 'timeout exceeded when trying to connect'])(
    'driver message "%s" is retried',
    async (message) => {
      expect(TRANSIENT_DRIVER_MESSAGES.some((m) => m.test(message))).toBe(true);
      expect(await attemptsUntil(new Error('Failed query: select 1', { cause: new Error(message) }), 2)).toEqual({ attempts: 3, result: 'done' });
    },
  );

  it.each(['ENOENT', 'EACCES', 'EPERM', 'ERR_INVALID_ARG_TYPE', 'EEXIST'])('Node error %s is not retried', async (code) => {
    expect((await attemptsUntil(Object.assign(new Error(code), { code }), 2)).attempts).toBe(1);
  });

  it('does not retry errors that merely mention a connection, nor non-errors', async () => {
    for (const error of [new Error('the connection string is invalid'), new TypeError("Cannot read properties of undefined (reading 'id')"), new Error('boom')]) {
      expect((await attemptsUntil(error, 1)).attempts).toBe(1);
    }
    expect(isTransientDbError('ECONNREFUSED')).toBe(false);
    expect(isTransientDbError(undefined)).toBe(false);
  });

  it('lets a server error decide over its wrapper', () => {
    // A unique violation reported on a connection that then broke is still a unique violation.
    const unique = Object.assign(new Error('duplicate key'), { code: '23505', severity: 'ERROR' });
    expect(isTransientDbError(Object.assign(new Error('Connection terminated'), { cause: unique, code: '23505', severity: 'ERROR' }))).toBe(false);
  });
});

describe('the back-off', () => {
  it('is bounded: pauses double up to the cap, and the whole wait never passes the window', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 10, max: 120_000 }), fc.integer({ min: 0, max: 400 }), fc.double({ min: 0, max: 1, noNaN: true }), async (windowMs, attemptMs, jitter) => {
        let now = 0;
        const sleeps: number[] = [];
        let attempts = 0;
        const thrown = await withDbRetry(
          async () => {
            attempts++;
            now += attemptMs;
            throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', severity: 'FATAL' });
          },
          { windowMs, now: () => now, sleep: async (ms) => void (sleeps.push(ms), (now += ms)), random: () => jitter },
        ).catch((e: unknown) => e);
        expect(thrown).toBeInstanceOf(DatabaseUnavailableError);
        expect((thrown as DatabaseUnavailableError).reason).toBe('admin_shutdown');
        expect((thrown as Error).cause).toMatchObject({ code: '57P01' });
        expect(sleeps.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(windowMs);
        for (const ms of sleeps) expect(ms).toBeLessThanOrEqual(DB_RETRY_MAX_DELAY_MS);
        // Time spent is the window plus at most one attempt beyond it.
        expect(now).toBeLessThanOrEqual(windowMs + attemptMs);
        expect(attempts).toBe(sleeps.length + 1);
      }),
      { numRuns: 300 },
    );
  });

  it(`waits about ${DB_RETRY_WINDOW_MS / 1000} s by default, with a few dozen attempts`, async () => {
    const time = fakeTime();
    let attempts = 0;
    await expect(
      withDbRetry(
        async () => {
          attempts++;
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
        },
        { ...time, random: () => 1 },
      ),
    ).rejects.toBeInstanceOf(DatabaseUnavailableError);
    expect(time.now()).toBe(DB_RETRY_WINDOW_MS);
    expect(time.sleeps.slice(0, 6)).toEqual([50, 100, 200, 400, 800, 1600]);
    expect(attempts).toBeLessThan(30);
  });

  it('doubles from the first pause and keeps jitter within [½, 1] of it', () => {
    for (let attempt = 1; attempt <= 40; attempt++) {
      const base = Math.min(DB_RETRY_MAX_DELAY_MS, 50 * 2 ** (attempt - 1));
      expect(retryDelay(attempt, { random: () => 0 })).toBe(Math.round(base / 2));
      expect(retryDelay(attempt, { random: () => 1 })).toBe(base);
    }
  });

  it('stops at once when the caller is aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const error = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    let attempts = 0;
    await expect(
      withDbRetry(
        async () => {
          attempts++;
          throw error;
        },
        { signal: controller.signal, ...fakeTime() },
      ),
    ).rejects.toBe(error);
    expect(attempts).toBe(1);
  });
});

describe('what a person is told', () => {
  // Nor the driver's words: a person is told what happened, the log says how.
  const SQL = /insert into|select |update |delete from|Failed query|params:|\$1|audit_log|s3cr3t|ECONN|EPIPE|_shutdown|terminated/i;

  it.each(ERRCODES.map((e) => [e.code, e.name] as const))('%s %s: a sentence without SQL', (code, name) => {
    const text = describeFailure(serverError(code, name));
    expect(text).not.toMatch(SQL);
    expect(text).toMatch(/database/);
    expect(text).toMatch(/\.$/);
  });

  it('names the wait when the window ran out', () => {
    const text = describeFailure(new DatabaseUnavailableError('admin_shutdown', 30_000, { cause: serverError('57P01') }));
    expect(text).toBe("The gateway's database did not answer for 30 s; the work was stopped rather than recorded incompletely.");
  });

  it('keeps the message of an error that is not the database', () => {
    expect(describeFailure(new Error('The approval expired.'))).toBe('The approval expired.');
    expect(describeFailure('plain')).toBe('plain');
  });
});
