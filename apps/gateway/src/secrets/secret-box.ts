import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { closeSync, constants, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

const VERSION = 'v1';
const KEY_BYTES = 32;

export type SecretBoxFailure = 'format' | 'other_key' | 'tampered';

/** A sealed secret that cannot be opened, with the reason as a code and as a sentence. */
export class SecretBoxError extends Error {
  constructor(
    readonly reason: SecretBoxFailure,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Secrets at rest (ADR 0012): AES-256-GCM under the gateways' secret key, with a fresh 96-bit nonce
 * per seal. The context (what the secret belongs to, e.g. "repository-credential:<project>:https")
 * is authenticated, so a sealed value copied into another project's row, or read as another kind,
 * does not open. The key's id travels with the value so a gateway with another key says so rather
 * than reporting tampering.
 */
export class SecretBox {
  readonly keyId: string;

  constructor(private readonly key: Buffer) {
    if (key.length !== KEY_BYTES) throw new Error(`A secret key is ${KEY_BYTES} bytes, not ${key.length}.`);
    this.keyId = createHash('sha256').update('lemniscate-secret-key\0').update(key).digest('hex').slice(0, 16);
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(`${VERSION}\0${context}`));
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, this.keyId, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
  }

  open(sealed: string, context: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 5 || parts[0] !== VERSION) throw new SecretBoxError('format', 'The stored secret is not in a form this gateway reads.');
    const [, keyId, iv, tag, data] = parts as [string, string, string, string, string];
    if (keyId !== this.keyId) {
      throw new SecretBoxError(
        'other_key',
        `The stored secret was sealed with another secret key (id ${keyId}; this gateway's is ${this.keyId}): every gateway of one database needs the same LEMNISCATE_SECRET_KEY.`,
      );
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(`${VERSION}\0${context}`));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretBoxError('tampered', 'The stored secret does not open: it was changed, or belongs to something else.');
    }
  }
}

/** Where the gateway's secret key comes from (config.ts): given, in a file, or made on first start. */
export type SecretKeySource = { kind: 'value'; key: Buffer } | { kind: 'file'; path: string; createIfMissing: boolean };

/** The 32-byte key as base64 (44 characters) or hex (64), with a sentence when it is neither. */
export function parseSecretKey(text: string, where: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : /^[A-Za-z0-9+/_-]{43}=?$/.test(t) ? Buffer.from(t.replace(/-/g, '+').replace(/_/g, '/'), 'base64') : null;
  if (!key || key.length !== KEY_BYTES) {
    throw new Error(`${where} must hold a 32-byte key as base64 (openssl rand -base64 32) or 64 hex digits.`);
  }
  return key;
}

/**
 * The key, read once at start. A file that does not exist yet is created (mode 0600; two gateways
 * starting at once on one data directory end with the same key).
 */
export function loadSecretKey(source: SecretKeySource): { key: Buffer; created: boolean } {
  if (source.kind === 'value') return { key: source.key, created: false };
  try {
    return { key: parseSecretKey(readFileSync(source.path, 'utf8'), source.path), created: false };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || !source.createIfMissing) throw e;
  }
  mkdirSync(dirname(source.path), { recursive: true, mode: 0o700 });
  // Written whole to a private file first, then linked into place: link fails if another gateway
  // got there first, and nobody ever reads a half-written key.
  const key = randomBytes(KEY_BYTES);
  const temporary = `${source.path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    writeSync(fd, `${key.toString('base64')}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temporary, source.path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return { key: parseSecretKey(readFileSync(source.path, 'utf8'), source.path), created: false };
    throw e;
  } finally {
    unlinkSync(temporary);
  }
  return { key, created: true };
}

/** The injection token of the gateway's SecretBox (secret-box.provider.ts). */
export const SECRET_BOX = Symbol('SECRET_BOX');
