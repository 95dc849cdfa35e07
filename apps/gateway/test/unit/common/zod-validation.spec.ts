import { CreateUserRequest, IdParams } from '@lemniscate/contracts';
import { AppError, ErrorCode } from '../../../src/common/errors';
import { nulPaths, ZodValidationPipe } from '../../../src/common/zod-validation';

function failure(fn: () => unknown): AppError {
  try {
    fn();
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
  throw new Error('expected a validation failure');
}

describe('ZodValidationPipe', () => {
  it('returns the parsed value with defaults filled in', () => {
    const pipe = new ZodValidationPipe(CreateUserRequest, 'body');
    const out = pipe.transform({ email: 'a@b.test', displayName: 'A', role: 'developer', password: 'twelve chars!!' });
    expect(out.projectIds).toEqual([]);
  });

  it('names every bad field, and the part of the request it came from', () => {
    const e = failure(() => new ZodValidationPipe(CreateUserRequest, 'body').transform({ email: 'nope', displayName: '', role: 'root', password: 'x' }));
    expect(e.code).toBe(ErrorCode.ValidationFailed);
    expect(e.message).toMatch(/^The request is invalid: /);
    for (const field of ['body.email', 'body.displayName', 'body.role', 'body.password']) expect(e.message).toContain(field);
  });

  it('says "is required" for a missing field and lists unknown fields by name', () => {
    const e = failure(() => new ZodValidationPipe(CreateUserRequest, 'body').transform({ displayName: 'A', role: 'admin', password: 'twelve chars!!', isRoot: true }));
    expect(e.message).toContain('body.email: is required');
    expect(e.message).toContain('unknown field "isRoot"');
  });

  it('refuses a NUL character in any string or key before the schema is read, naming each place', () => {
    const e = failure(() => new ZodValidationPipe(CreateUserRequest, 'body').transform({ email: 'a@b.test', displayName: 'A\u0000', role: 'developer', password: 'twelve chars!!' }));
    expect(e.message).toBe('The request is invalid: body.displayName: contains a NUL character (\\u0000), which no text field may hold.');
    expect(nulPaths({ a: ['x', 'y\u0000'], ['k\u0000']: 1, b: { c: '\u0000' }, n: 5, z: null }, ['body'])).toEqual(['body.a.1', 'body."k\\u0000"', 'body.b.c']);
    expect(nulPaths('clean', ['query'])).toEqual([]);
  });

  it('refuses a missing body instead of treating it as empty', () => {
    const e = failure(() => new ZodValidationPipe(CreateUserRequest, 'body').transform(undefined));
    expect(e.message).toContain('body: is required');
  });

  it('refuses path-like ids in params', () => {
    const e = failure(() => new ZodValidationPipe(IdParams, 'params').transform({ id: '../etc' }));
    expect(e.message).toContain('params.id');
  });
});
