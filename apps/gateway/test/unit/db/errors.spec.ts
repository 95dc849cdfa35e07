import { isUniqueViolation, pgErrorOf } from '../../../src/db/errors';

const unique = Object.assign(new Error('duplicate key value violates unique constraint "projects_name_key"'), { code: '23505', severity: 'ERROR', constraint: 'projects_name_key' });

describe('pgErrorOf', () => {
  it('finds the PostgreSQL error behind a wrapper, as Drizzle reports it', () => {
    const wrapped = new Error('Failed query: insert into "projects" …', { cause: unique });
    expect(pgErrorOf(wrapped)).toEqual({ code: '23505', constraint: 'projects_name_key', message: unique.message });
    expect(isUniqueViolation(wrapped)).toBe(true);
    expect(isUniqueViolation(wrapped, 'projects_name_key')).toBe(true);
    expect(isUniqueViolation(wrapped, 'users_email_lower_key')).toBe(false);
  });

  it('ignores errors that are not from the database', () => {
    expect(pgErrorOf(new Error('boom'))).toBeUndefined();
    expect(pgErrorOf(Object.assign(new Error('fs'), { code: 'ENOENT' }))).toBeUndefined();
    expect(pgErrorOf(Object.assign(new Error('socket'), { code: 'EPIPE' }))).toBeUndefined();
    expect(pgErrorOf('a string')).toBeUndefined();
    expect(pgErrorOf(undefined)).toBeUndefined();
    expect(isUniqueViolation(new Error('x'))).toBe(false);
  });

  it('stops on a cause chain that loops', () => {
    const a: Error & { cause?: unknown } = new Error('a');
    const b = new Error('b', { cause: a });
    a.cause = b;
    expect(pgErrorOf(a)).toBeUndefined();
  });
});
