import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSecretKey, parseSecretKey, SecretBox, SecretBoxError } from '../../../src/secrets/secret-box';

const key = randomBytes(32);
const box = new SecretBox(key);
const context = 'repository-credential:prj_1:https';
const secret = JSON.stringify({ kind: 'https', username: 'ci', password: 'ghp_SECRET_TOKEN_123' });

function failure(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof SecretBoxError) return e.reason;
    throw e;
  }
  return 'opened';
}

describe('SecretBox', () => {
  it('opens what it sealed, and the sealed text carries nothing of the secret', () => {
    const sealed = box.seal(secret, context);
    expect(box.open(sealed, context)).toBe(secret);
    expect(sealed).not.toContain('SECRET');
    expect(Buffer.from(sealed.split('.')[4]!, 'base64url').toString('latin1')).not.toContain('SECRET');
  });

  it('seals the same secret differently every time (a fresh nonce)', () => {
    const seen = new Set(Array.from({ length: 50 }, () => box.seal(secret, context)));
    expect(seen.size).toBe(50);
  });

  // A byte of every part changed in turn (decoded, so no change hides in base64's unused bits):
  // nothing opens, and each is reported as tampering, an unreadable form, or another key when the
  // key id itself was changed.
  const sealed = box.seal(secret, context);
  const parts = sealed.split('.');
  const cases: [string, number, number][] = [];
  parts.forEach((part, p) => {
    const length = p <= 1 ? part.length : Buffer.from(part, 'base64url').length;
    for (let i = 0; i < length; i += Math.max(1, Math.floor(length / 12))) cases.push([`part ${p} position ${i}`, p, i]);
  });
  it.each(cases)('refuses a value changed at %s', (_name, p, i) => {
    const changed = [...parts];
    const part = changed[p]!;
    if (p <= 1) {
      changed[p] = part.slice(0, i) + (part[i] === 'a' ? 'b' : 'a') + part.slice(i + 1);
    } else {
      const bytes = Buffer.from(part, 'base64url');
      bytes[i] = bytes[i]! ^ 0x01;
      changed[p] = bytes.toString('base64url');
    }
    const reason = failure(() => box.open(changed.join('.'), context));
    expect(reason).toBe(p === 0 ? 'format' : p === 1 ? 'other_key' : 'tampered');
  });

  it.each([
    ['another project', 'repository-credential:prj_2:https'],
    ['another kind', 'repository-credential:prj_1:ssh'],
    ['an empty context', ''],
  ])('does not open under %s (the context is authenticated)', (_name, other) => {
    expect(failure(() => box.open(sealed, other))).toBe('tampered');
  });

  it('says another key sealed it, with both key ids, rather than reporting tampering', () => {
    const other = new SecretBox(randomBytes(32));
    let message = '';
    try {
      other.open(sealed, context);
    } catch (e) {
      message = (e as Error).message;
      expect((e as SecretBoxError).reason).toBe('other_key');
    }
    expect(message).toContain(box.keyId);
    expect(message).toContain(other.keyId);
    expect(message).toContain('LEMNISCATE_SECRET_KEY');
  });

  it.each(['', 'v1', 'v2.a.b.c.d', 'v1.a.b.c', 'v1.a.b.c.d.e', sealed.replace(/^v1/, 'v0')])('refuses an unreadable form %j', (value) => {
    expect(failure(() => box.open(value, context))).toBe('format');
  });

  it('refuses keys that are not 32 bytes', () => {
    for (const n of [0, 16, 31, 33, 64]) expect(() => new SecretBox(randomBytes(n))).toThrow(/32 bytes/);
  });
});

describe('parseSecretKey', () => {
  it.each([
    ['base64', key.toString('base64')],
    ['base64 without padding', key.toString('base64').replace(/=$/, '')],
    ['base64url', key.toString('base64url')],
    ['hex', key.toString('hex')],
    ['hex with a newline', `${key.toString('hex')}\n`],
  ])('reads %s', (_name, text) => {
    expect(parseSecretKey(text, 'X').equals(key)).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['too short', randomBytes(16).toString('base64')],
    ['too long', randomBytes(48).toString('base64')],
    ['hex of 31 bytes', randomBytes(31).toString('hex')],
    ['a passphrase', 'correct horse battery staple'],
  ])('refuses %s with a sentence naming where it came from', (_name, text) => {
    expect(() => parseSecretKey(text, 'LEMNISCATE_SECRET_KEY')).toThrow(/^LEMNISCATE_SECRET_KEY must hold a 32-byte key/);
  });
});

describe('loadSecretKey', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'secret-key-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('makes a key file readable by its owner only, and reads the same key afterwards', () => {
    const path = join(dir, 'data', 'secret.key');
    const first = loadSecretKey({ kind: 'file', path, createIfMissing: true });
    expect(first.created).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const second = loadSecretKey({ kind: 'file', path, createIfMissing: true });
    expect(second.created).toBe(false);
    expect(second.key.equals(first.key)).toBe(true);
  });

  it('never makes a file it was told to read (LEMNISCATE_SECRET_KEY_FILE)', () => {
    expect(() => loadSecretKey({ kind: 'file', path: join(dir, 'missing.key'), createIfMissing: false })).toThrow(/ENOENT/);
  });

  it('refuses a key file that does not hold a key', () => {
    const path = join(dir, 'secret.key');
    writeFileSync(path, 'not a key\n');
    expect(() => loadSecretKey({ kind: 'file', path, createIfMissing: true })).toThrow(/must hold a 32-byte key/);
    expect(readFileSync(path, 'utf8')).toBe('not a key\n');
  });

  it('many starts at once on one data directory end with one key', async () => {
    const path = join(dir, 'secret.key');
    const keys = await Promise.all(Array.from({ length: 20 }, async () => loadSecretKey({ kind: 'file', path, createIfMissing: true }).key.toString('hex')));
    expect(new Set(keys).size).toBe(1);
  });
});
