import { bearerToken, tokenMatches } from '../../../src/http/token';

describe('tokenMatches', () => {
  const secret = 'correct-horse-battery-staple';

  it('accepts the exact token', () => {
    expect(tokenMatches(secret, secret)).toBe(true);
  });

  it.each([['correct-horse-battery-stapl'], ['correct-horse-battery-staple '], [''], ['x'.repeat(10_000)], ['CORRECT-HORSE-BATTERY-STAPLE']])('refuses %p', (presented) => {
    expect(tokenMatches(presented, secret)).toBe(false);
  });

  it('refuses a missing token and never matches an empty expected token', () => {
    expect(tokenMatches(undefined, secret)).toBe(false);
    expect(tokenMatches('', '')).toBe(false);
  });
});

describe('bearerToken', () => {
  it('reads only the Bearer scheme', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeUndefined();
    expect(bearerToken('Bearer')).toBeUndefined();
    expect(bearerToken('Bearer a b')).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
    expect(bearerToken(['Bearer abc'])).toBeUndefined();
  });
});
