import { createHash, createPublicKey, verify } from 'node:crypto';
import { createReadStream, readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { auditArchiveManifestText, type AuditArchiveManifest } from '@lemniscate/contracts';

/**
 * An audit archive's manifest (`<archive>.sig.json`, written by the gateway's retention) checked
 * offline: its Ed25519 signature over the manifest, the key against one the reader trusts when given,
 * and the archive file's name and SHA-256 against what was signed. The entries themselves are then
 * checked like an export (verify-export.ts), continuing the chain from the manifest's first link.
 */
export interface ArchiveCheck {
  ok: boolean;
  manifest: AuditArchiveManifest | null;
  /** True: signed by the key given; false: another key; null: no key given to compare with. */
  keyTrusted: boolean | null;
  problem: string | null;
}

const HEX64 = /^[0-9a-f]{64}$/;

export async function checkArchiveManifest(file: string, manifestFile: string, trustedKeyPem?: string): Promise<ArchiveCheck> {
  const fail = (problem: string, manifest: AuditArchiveManifest | null = null): ArchiveCheck => ({ ok: false, manifest, keyTrusted: null, problem });
  let doc: AuditArchiveManifest & { signature?: unknown };
  try {
    doc = JSON.parse(readFileSync(manifestFile, 'utf8')) as typeof doc;
  } catch (e) {
    return fail(`The signature file ${manifestFile} cannot be read as JSON (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}).`);
  }
  const m = doc;
  const shapeOk =
    m?.format === 'lemniscate-audit-archive/1' &&
    typeof m.file === 'string' &&
    typeof m.sha256 === 'string' &&
    HEX64.test(m.sha256) &&
    [m.entries, m.firstSeq, m.lastSeq, m.headSeq].every((n) => Number.isSafeInteger(n) && n >= 0) &&
    [m.firstPrevHash, m.lastHash, m.headHash, m.keyId].every((h) => typeof h === 'string' && HEX64.test(h)) &&
    typeof m.publicKey === 'string' &&
    typeof m.archivedAt === 'string' &&
    typeof doc.signature === 'string';
  if (!shapeOk) return fail(`The signature file ${manifestFile} is not an audit archive manifest (lemniscate-audit-archive/1).`);
  const { signature, ...manifest } = doc as AuditArchiveManifest & { signature: string };
  let publicKey;
  try {
    publicKey = createPublicKey(manifest.publicKey);
  } catch {
    return fail(`The signature file ${manifestFile} carries no readable public key.`, manifest);
  }
  const keyId = createHash('sha256')
    .update(publicKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');
  if (keyId !== manifest.keyId) return fail(`The signature file ${manifestFile} names key ${manifest.keyId.slice(0, 16)}… but carries another key.`, manifest);
  if (!verify(null, Buffer.from(auditArchiveManifestText(manifest), 'utf8'), publicKey, Buffer.from(signature, 'base64'))) {
    return fail(`The signature in ${manifestFile} does not match its manifest: the manifest was changed after it was signed.`, manifest);
  }
  let keyTrusted: boolean | null = null;
  if (trustedKeyPem !== undefined) {
    let trusted;
    try {
      trusted = createPublicKey(trustedKeyPem);
    } catch {
      return fail('The public key given (--public-key) is not a public key in PEM.', manifest);
    }
    keyTrusted =
      createHash('sha256')
        .update(trusted.export({ type: 'spki', format: 'der' }))
        .digest('hex') === keyId;
    if (!keyTrusted)
      return { ok: false, manifest, keyTrusted, problem: `The archive was signed by key ${keyId.slice(0, 16)}…, not by the key you gave: someone else made this archive and its signature.` };
  }
  if (basename(file) !== manifest.file) return fail(`The manifest signs the archive ${manifest.file}, not ${basename(file)}.`, manifest);
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  if (hash.digest('hex') !== manifest.sha256)
    return { ok: false, manifest, keyTrusted, problem: `The archive ${basename(file)} is not the file that was signed: its SHA-256 differs (it was changed, cut or extended).` };
  return { ok: true, manifest, keyTrusted, problem: null };
}
