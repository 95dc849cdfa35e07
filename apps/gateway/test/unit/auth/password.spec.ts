import { hashPassword, hashSecret, newSecret, safeEqual, verifyPassword } from '../../../src/auth/password';

describe('passwords', () => {
  it('hashes with scrypt and a fresh salt, and verifies only the right password', async () => {
    const a = await hashPassword('correct horse battery staple');
    const b = await hashPassword('correct horse battery staple');
    expect(a).toMatch(/^scrypt\$131072\$8\$1\$/);
    expect(a).not.toBe(b);
    await expect(verifyPassword('correct horse battery staple', a)).resolves.toBe(true);
    await expect(verifyPassword('correct horse battery stapler', a)).resolves.toBe(false);
  });

  it('refuses a missing or malformed hash', async () => {
    await expect(verifyPassword('anything', null)).resolves.toBe(false);
    await expect(verifyPassword('anything', 'md5$abc')).resolves.toBe(false);
  });
});

describe('secrets', () => {
  it('are random, prefixed and stored as a hash', () => {
    const s = newSecret('lemni_');
    expect(s).toMatch(/^lemni_[A-Za-z0-9_-]{43}$/);
    expect(newSecret('lemni_')).not.toBe(s);
    expect(hashSecret(s)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashSecret(s)).not.toContain(s);
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('abc', 'abcd')).toBe(false);
  });
});
