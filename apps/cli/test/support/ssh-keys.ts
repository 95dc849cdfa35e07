import { generateKeyPairSync, randomBytes } from 'node:crypto';

/**
 * OpenSSH private keys made in the test (no ssh-keygen needed), in the format `ssh-keygen -t ed25519`
 * writes (PROTOCOL.key: "openssh-key-v1"). A passphrase-protected one carries the header ssh-keygen
 * writes (aes256-ctr, bcrypt) over bytes nobody can open: what the CLI and the gateway read first.
 */
export interface TestSshKey {
  /** The private key file's text. */
  privateKey: string;
  /** The key's public blob (`ssh-ed25519` + the key), whose SHA256 `ssh-keygen -lf` prints. */
  publicBlob: Buffer;
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const sshString = (value: Buffer | string) => {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'latin1') : value;
  return Buffer.concat([u32(bytes.length), bytes]);
};

function armour(blob: Buffer): string {
  const lines = blob.toString('base64').match(/.{1,70}/g) ?? [];
  return `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines.join('\n')}\n-----END OPENSSH PRIVATE KEY-----\n`;
}

export function openSshKey(options: { passphrase?: boolean; comment?: string } = {}): TestSshKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const jwkPublic = publicKey.export({ format: 'jwk' });
  const jwkPrivate = privateKey.export({ format: 'jwk' });
  const pub = Buffer.from(jwkPublic.x as string, 'base64url');
  const seed = Buffer.from(jwkPrivate.d as string, 'base64url');
  const publicBlob = Buffer.concat([sshString('ssh-ed25519'), sshString(pub)]);
  const check = randomBytes(4);
  let section = Buffer.concat([check, check, sshString('ssh-ed25519'), sshString(pub), sshString(Buffer.concat([seed, pub])), sshString(options.comment ?? 'deploy@lemniscate-test')]);
  const block = options.passphrase ? 16 : 8;
  const padding: number[] = [];
  for (let i = 1; (section.length + padding.length) % block !== 0; i++) padding.push(i);
  section = Buffer.concat([section, Buffer.from(padding)]);
  const header = options.passphrase
    ? [sshString('aes256-ctr'), sshString('bcrypt'), sshString(Buffer.concat([sshString(randomBytes(16)), u32(16)]))]
    : [sshString('none'), sshString('none'), sshString('')];
  const blob = Buffer.concat([Buffer.from('openssh-key-v1\0', 'latin1'), ...header, u32(1), sshString(publicBlob), sshString(options.passphrase ? randomBytes(section.length) : section)]);
  return { privateKey: armour(blob), publicBlob };
}

/** The lines of a private key's body: none of them may appear in anything the CLI prints. */
export function keyBodyLines(privateKey: string): string[] {
  return privateKey.split('\n').filter((l) => l !== '' && !l.startsWith('-----'));
}
