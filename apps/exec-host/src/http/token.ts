import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Compares a presented bearer token with the expected one in constant time: both are hashed first so
 * the compared buffers always have the same length and the comparison leaks neither content nor length.
 */
export function tokenMatches(presented: string | undefined, expected: string): boolean {
  if (typeof presented !== 'string' || expected.length === 0) return false;
  const a = createHash('sha256').update(presented, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const m = /^Bearer ([^\s]+)$/.exec(header.trim());
  return m?.[1];
}
