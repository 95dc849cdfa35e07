import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap } from '@nestjs/common';
import { AUDIT_GENESIS_HASH, auditArchiveManifestText, type AuditArchiveManifest } from '@lemniscate/contracts';
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import * as path from 'node:path';
import { jsonlLine } from '../audit/audit-export';
import { actorIdentities } from '../audit/actor-identities';
import { AuditService } from '../audit/audit.service';
import { GATEWAY_CONFIG, type AuditRetentionConfig, type GatewayConfig } from '../config/config';
import { AuditLogRepository } from '../db/repositories/audit-log.repository';
import { AuditSinkCursorsRepository } from '../db/repositories/audit-sink-cursors.repository';
import { UsersRepository } from '../db/repositories/users.repository';
import type { AuditLogRow } from '../db/schema';

/** How often a gateway looks for entries past the retention. */
const RETENTION_INTERVAL_MS = 60 * 60 * 1000;
/** The most entries one archive file holds; a larger backlog is several files. */
const ARCHIVE_MAX_ENTRIES = 100_000;
const READ_PAGE = 2_000;

export interface ArchiveMade {
  file: string;
  manifest: AuditArchiveManifest;
  removed: number;
}

/**
 * Audit retention (T2): entries older than the deployment's retention (days, or beyond the newest N)
 * are written to a JSON-lines archive (the export's lines: every hash, the payload as hashed), signed
 * with the deployment's Ed25519 key in a manifest beside it (`<archive>.sig.json`: the file's SHA-256,
 * the range, the links at both ends, the chain's head), and only then removed from the database
 * through `audit_prune()`, which removes a prefix of the chain and records where it ended, so
 * `verify()` goes on from there. `lemni audit verify --file` proves an archive offline. Entries an
 * audit sink has not taken yet are never archived away.
 */
@Injectable()
export class AuditRetentionService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('AuditRetention');
  private readonly config: AuditRetentionConfig | null;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<ArchiveMade[]> | undefined;
  private key: { privateKey: KeyObject; publicPem: string; keyId: string } | undefined;

  constructor(
    @Inject(GATEWAY_CONFIG) gateway: GatewayConfig,
    private readonly audit: AuditService,
    private readonly log: AuditLogRepository,
    private readonly cursors: AuditSinkCursorsRepository,
    private readonly users: UsersRepository,
  ) {
    this.config = gateway.auditRetention ?? null;
    this.sinkNames = (gateway.auditSinks?.sinks ?? []).map((s) => s.name);
  }

  private readonly sinkNames: string[];

  async onApplicationBootstrap(): Promise<void> {
    if (!this.config) return;
    await fs.mkdir(this.config.archiveDir, { recursive: true, mode: 0o700 });
    this.key = await loadOrCreateKey(this.config.keyFile);
    this.logger.log(`audit retention: ${describe(this.config)}; archives in ${this.config.archiveDir}, signed by key ${this.key.keyId.slice(0, 16)}…`);
    this.timer = setInterval(() => void this.run().catch((e: unknown) => this.logger.warn(`audit retention: ${(e as Error).message}; the next run tries again`)), RETENTION_INTERVAL_MS);
    this.timer.unref();
    void this.run().catch((e: unknown) => this.logger.warn(`audit retention: ${(e as Error).message}; the next run tries again`));
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** Archives and removes everything past the retention now; one run at a time. */
  run(now: Date = new Date()): Promise<ArchiveMade[]> {
    this.running ??= this.archiveAll(now).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** The last seq the retention lets go, bounded by what every sink has taken; 0 for nothing. */
  private async limit(now: Date): Promise<number> {
    const config = this.config!;
    const head = await this.log.head();
    let through = 0;
    if (config.entries !== undefined) through = Math.max(through, head.seq - config.entries);
    if (config.days !== undefined) {
      const before = new Date(now.getTime() - config.days * 86_400_000);
      through = Math.max(through, await this.lastBefore(before, head.seq));
    }
    if (this.sinkNames.length > 0) {
      const rows = await this.cursors.list(this.sinkNames);
      const taken = this.sinkNames.map((name) => rows.find((r) => r.name === name)?.seq ?? 0);
      through = Math.min(through, ...taken);
    }
    return Math.min(through, head.seq);
  }

  /** The last entry chained before `before` (entries' times never decrease along seq). */
  private async lastBefore(before: Date, headSeq: number): Promise<number> {
    let lo = (await this.log.lastArchive())?.throughSeq ?? 0;
    let hi = headSeq;
    // Binary search on seq: `at` is the database clock when the entry joined the chain.
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      const [row] = await this.log.range(mid - 1, mid, 1);
      if (row && row.at < before) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  private async archiveAll(now: Date): Promise<ArchiveMade[]> {
    if (!this.config || !this.key) return [];
    const made: ArchiveMade[] = [];
    // The target is fixed once: each archive appends its own entry, which must not move it.
    const target = await this.limit(now);
    const first = await this.log.lastArchive();
    if (target - (first?.throughSeq ?? 0) < this.config.minEntries) return made;
    for (;;) {
      const archived = await this.log.lastArchive();
      const from = archived?.throughSeq ?? 0;
      const through = Math.min(target, from + ARCHIVE_MAX_ENTRIES);
      if (through <= from) return made;
      made.push(await this.archive(from, archived?.throughHash ?? AUDIT_GENESIS_HASH, through));
    }
  }

  /** Writes entries (from, through] to a signed archive, then removes them from the database. */
  private async archive(from: number, prevHash: string, through: number): Promise<ArchiveMade> {
    const config = this.config!;
    const key = this.key!;
    const name = `lemniscate-audit-${String(from + 1).padStart(12, '0')}-${String(through).padStart(12, '0')}.jsonl`;
    const file = path.join(config.archiveDir, name);
    const partial = `${file}.partial`;
    const hash = createHash('sha256');
    let entries = 0;
    let last: AuditLogRow | undefined;
    const handle = await fs.open(partial, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
    try {
      let after = from;
      while (after < through) {
        const rows = await this.log.range(after, through, READ_PAGE);
        if (rows.length === 0) break;
        const people = await actorIdentities(
          this.users,
          rows.map((r) => r.actor),
        );
        const text = rows.map((r) => jsonlLine(r, people.get(r.actor) ?? null)).join('');
        hash.update(text, 'utf8');
        await handle.write(text);
        entries += rows.length;
        last = rows[rows.length - 1];
        after = last!.seq;
      }
      await handle.datasync();
    } finally {
      await handle.close();
    }
    if (!last || last.seq !== through || entries !== through - from) {
      await fs.rm(partial, { force: true });
      throw new Error(`entries ${from + 1} to ${through} could not all be read for the archive (found ${entries}); nothing was removed`);
    }
    const head = await this.log.head();
    const manifest: AuditArchiveManifest = {
      format: 'lemniscate-audit-archive/1',
      file: name,
      sha256: hash.digest('hex'),
      entries,
      firstSeq: from + 1,
      firstPrevHash: prevHash,
      lastSeq: through,
      lastHash: last.hash,
      headSeq: head.seq,
      headHash: head.hash,
      archivedAt: new Date().toISOString(),
      keyId: key.keyId,
      publicKey: key.publicPem,
    };
    const signature = sign(null, Buffer.from(auditArchiveManifestText(manifest), 'utf8'), key.privateKey).toString('base64');
    const sigFile = `${file}.sig.json`;
    await fs.writeFile(`${sigFile}.partial`, `${JSON.stringify({ ...manifest, signature }, null, 2)}\n`, { mode: 0o600, flag: 'w' });
    await fs.rename(partial, file);
    await fs.rename(`${sigFile}.partial`, sigFile);
    let removed: number;
    try {
      removed = await this.log.prune(through, name, manifest.sha256);
    } catch (e) {
      // Another gateway archived this range first, or the log changed: this file is not the record.
      await Promise.all([fs.rm(file, { force: true }), fs.rm(sigFile, { force: true })]);
      throw new Error(`the database refused to remove entries ${from + 1} to ${through} (${(e as Error).message}); this archive was discarded`);
    }
    await this.audit.record({
      actor: 'system',
      kind: 'audit.archived',
      payload: { file: name, sha256: manifest.sha256, firstSeq: manifest.firstSeq, lastSeq: through, lastHash: last.hash, entries, removed, keyId: key.keyId },
    });
    this.logger.log(`audit retention: entries ${from + 1} to ${through} archived to ${file} and removed from the database`);
    return { file, manifest, removed };
  }
}

function describe(config: AuditRetentionConfig): string {
  const parts = [config.days !== undefined ? `entries older than ${config.days} days` : null, config.entries !== undefined ? `beyond the newest ${config.entries}` : null].filter(Boolean);
  return `archives ${parts.join(' and ')}`;
}

/** The archive signing key: read, or created (Ed25519, mode 0600) with its public half beside it. */
export async function loadOrCreateKey(file: string): Promise<{ privateKey: KeyObject; publicPem: string; keyId: string }> {
  let pem: string;
  try {
    pem = await fs.readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`The archive signing key ${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}).`);
    const { privateKey } = generateKeyPairSync('ed25519');
    pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    await fs.writeFile(file, pem, { mode: 0o600, flag: 'wx' });
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch (e) {
    throw new Error(`The archive signing key ${file} is not a private key in PEM (${(e as Error).message}).`);
  }
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new Error(`The archive signing key ${file} is ${privateKey.asymmetricKeyType ?? 'not'} an Ed25519 key; archives are signed with Ed25519.`);
  const publicKey = createPublicKey(privateKey);
  const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const keyId = createHash('sha256')
    .update(publicKey.export({ type: 'spki', format: 'der' }))
    .digest('hex');
  await fs.writeFile(`${file.replace(/\.pem$/, '')}.pub.pem`, publicPem, { mode: 0o644 }).catch(() => undefined);
  return { privateKey, publicPem, keyId };
}
