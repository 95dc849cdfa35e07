// Audit retention (T2) on the real gateway and database, proven with the real CLI: entries past the
// retention are archived to signed JSON lines, removed through audit_prune() only, the chain verifies
// from the archive's end, each archive verifies offline and continues the one before, and every way
// of forging, changing or cutting an archive — or of removing entries around the function — fails.
import { execFileSync } from 'node:child_process';
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { sql } from 'drizzle-orm';
import { auditArchiveManifestText } from '@lemniscate/contracts';
import { buildCli, lemni } from '../../apps/cli/test/support/run-bin';
import { AuditService } from '../../apps/gateway/src/audit/audit.service';
import { AuditRetentionService } from '../../apps/gateway/src/audit-retention/audit-retention.service';
import { withTestDatabases } from '../../apps/gateway/test/support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, startGateway, tokenFor, type Gateway } from '../../apps/gateway/test/support/harness';

jest.setTimeout(180_000);

beforeAll(() => buildCli());

async function appendMany(gw: Gateway, n: number, tag: string): Promise<void> {
  const audit = gw.app.get(AuditService);
  for (let i = 0; i < n; i++) await audit.append({ actor: 'system', kind: 'session.configured', payload: { tag, i } });
}

withTestDatabases((db) => {
  let dir: string;
  let archives: string;
  let gw: Gateway;
  let admin: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-retention-'));
    archives = path.join(dir, 'archives');
    gw = await startGateway(db(), { LEMNISCATE_AUDIT_RETENTION_ENTRIES: '20', LEMNISCATE_AUDIT_ARCHIVE_DIR: archives, LEMNISCATE_AUDIT_ARCHIVE_MIN_ENTRIES: '10' });
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    env = { LEMNISCATE_GATEWAY: gw.baseUrl, LEMNISCATE_TOKEN: admin };
  });
  afterAll(async () => {
    await gw?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const retention = () => gw.app.get(AuditRetentionService);
  const verifyFile = (file: string, ...more: string[]) => lemni(['audit', 'verify', '--file', file, ...more], { env });
  const pub = () => path.join(archives, 'archive-signing-key.pub.pem');

  it('archives what is past the retention to a signed file, removes it, and the chain verifies from the archive on', async () => {
    await appendMany(gw, 100, 'first');
    expect(await retention().run()).toHaveLength(1);
    // Its own entry (audit.archived) and the next few are fewer than the minimum: no new archive.
    expect(await retention().run()).toEqual([]);
    const files = fs.readdirSync(archives).filter((f) => f.endsWith('.jsonl'));
    expect(files).toHaveLength(1);
    const manifest = JSON.parse(fs.readFileSync(path.join(archives, `${files[0]}.sig.json`), 'utf8')) as { firstSeq: number; lastSeq: number; lastHash: string; entries: number };
    expect(manifest.firstSeq).toBe(1);
    expect(fs.statSync(path.join(archives, files[0]!)).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.join(archives, 'archive-signing-key.pem')).mode & 0o777).toBe(0o600);

    const verify = await gw.http().get('/api/v1/audit/verify').set(bearer(admin));
    expect(verify.body).toMatchObject({ ok: true, archivedThrough: { seq: manifest.lastSeq, hash: manifest.lastHash, file: files[0] } });
    const remaining = (await gw.http().get('/api/v1/audit?order=asc&limit=1').set(bearer(admin))).body as Array<{ seq: number }>;
    expect(remaining[0]?.seq).toBe(manifest.lastSeq + 1);
    const archived = (await gw.http().get('/api/v1/audit?kind=audit.archived').set(bearer(admin))).body as Array<{ payload: Record<string, unknown> }>;
    expect(archived[0]?.payload).toMatchObject({ firstSeq: 1, lastSeq: manifest.lastSeq, file: files[0], entries: manifest.entries });

    const online = await lemni(['audit', 'verify'], { env });
    expect(online.code).toBe(0);
    expect(online.stdout).toContain(`Entries 1 to ${manifest.lastSeq} were archived by the retention and removed from the database`);

    const offline = await verifyFile(path.join(archives, files[0]!), '--public-key', pub());
    expect(offline.stdout).toContain(`is intact: ${manifest.entries} entries (entries 1 to ${manifest.lastSeq})`);
    expect(offline.stdout).toContain('(the key you gave)');
    expect(offline.code).toBe(0);
  });

  it('the next archive continues the one before, and an export continues the last archive', async () => {
    await appendMany(gw, 50, 'second');
    const [made] = await retention().run();
    expect(made).toBeDefined();
    const files = fs
      .readdirSync(archives)
      .filter((f) => f.endsWith('.jsonl'))
      .sort();
    expect(files).toHaveLength(2);
    const first = JSON.parse(fs.readFileSync(path.join(archives, `${files[0]}.sig.json`), 'utf8')) as { lastSeq: number; lastHash: string };
    expect(made!.manifest).toMatchObject({ firstSeq: first.lastSeq + 1, firstPrevHash: first.lastHash });
    const second = await verifyFile(made!.file, '--public-key', pub());
    expect(second.stdout).toContain(`continuing the chain after entry ${first.lastSeq}`);
    expect(second.code).toBe(0);
    // Given the wrong link, it says so.
    const wrong = await verifyFile(made!.file, '--after', `${first.lastSeq}:${'0'.repeat(64)}`);
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toContain(`The archive starts after entry ${first.lastSeq}`);
    // An export of what remains continues the last archive.
    const out = path.join(dir, 'rest.jsonl');
    expect((await lemni(['audit', 'export', '-o', out], { env })).code).toBe(0);
    const alone = await verifyFile(out);
    expect(alone.code).toBe(1);
    expect(alone.stdout).toContain('is the first in the file');
    const continued = await verifyFile(out, '--after', `${made!.manifest.lastSeq}:${made!.manifest.lastHash}`);
    expect(continued.stdout).toContain(`continuing the chain after entry ${made!.manifest.lastSeq}`);
    expect(continued.code).toBe(0);
  });

  it('a changed, cut, extended, re-signed or renamed archive fails, each with what is wrong', async () => {
    const file = fs
      .readdirSync(archives)
      .filter((f) => f.endsWith('.jsonl'))
      .sort()[0]!;
    const original = fs.readFileSync(path.join(archives, file), 'utf8');
    const manifestText = fs.readFileSync(path.join(archives, `${file}.sig.json`), 'utf8');
    const copy = (name: string, body: string, manifest = manifestText) => {
      const d = fs.mkdtempSync(path.join(dir, 'forged-'));
      fs.writeFileSync(path.join(d, name), body);
      fs.writeFileSync(path.join(d, `${name}.sig.json`), manifest);
      return path.join(d, name);
    };
    const lines = original.split('\n').filter(Boolean);
    const cases: Array<[string, string, RegExp, string[]?]> = [
      ['a payload changed', copy(file, original.replace('{"i":3,"tag":"first"}', '{"i":4,"tag":"first"}')), /is not the file that was signed: its SHA-256 differs/],
      ['the last entry cut', copy(file, `${lines.slice(0, -1).join('\n')}\n`), /SHA-256 differs/],
      ['an entry added', copy(file, `${original}${lines[lines.length - 1]}\n`), /SHA-256 differs/],
      ['renamed', copy('lemniscate-audit-renamed.jsonl', original), /The manifest signs the archive lemniscate-audit-/],
      ['the manifest changed after signing', copy(file, original, manifestText.replace(/"headSeq": \d+/, '"headSeq": 1')), /does not match its manifest: the manifest was changed after it was signed/],
    ];
    // Someone with their own key rewrites an entry, re-hashes the file and signs it all again.
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const forged = JSON.parse(manifestText) as Record<string, unknown>;
    const body = original;
    forged.publicKey = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    forged.keyId = createHash('sha256')
      .update(publicKey.export({ type: 'spki', format: 'der' }))
      .digest('hex');
    forged.sha256 = createHash('sha256').update(body).digest('hex');
    delete forged.signature;
    forged.signature = sign(null, Buffer.from(auditArchiveManifestText(forged as never), 'utf8'), privateKey).toString('base64');
    cases.push(['signed by another key', copy(file, body, JSON.stringify(forged)), /was signed by key .*, not by the key you gave/, ['--public-key', pub()]]);
    for (const [what, forgedFile, message, more] of cases) {
      const r = await verifyFile(forgedFile, ...(more ?? ['--public-key', pub()]));
      expect([what, r.code, r.stdout]).toEqual([what, 1, expect.stringMatching(message)]);
    }
    // Without --public-key, the signature is checked with the manifest's own key, and the CLI says so.
    const unpinned = await verifyFile(path.join(archives, file));
    expect(unpinned.code).toBe(0);
    expect(unpinned.stderr).toContain('pass --public-key');
  });

  it('the database removes entries only through audit_prune(): a prefix, never past the head, never twice, never around it', async () => {
    const head = (await gw.http().get('/api/v1/audit/verify').set(bearer(admin))).body as { lastSeq: number; archivedThrough: { seq: number } };
    const refusals: Array<[string, () => Promise<unknown>, RegExp]> = [
      ['beyond the head', () => db().db.execute(sql`SELECT audit_prune(${head.lastSeq + 5}, 'x.jsonl', ${'0'.repeat(64)})`), /beyond the chain head/],
      ['already archived', () => db().db.execute(sql`SELECT audit_prune(${head.archivedThrough.seq}, 'x.jsonl', ${'0'.repeat(64)})`), /already archived/],
      ['a DELETE as the gateway', () => db().db.execute(sql`DELETE FROM audit_log WHERE seq = ${head.lastSeq}`), /permission denied|append-only/],
      [
        'a DELETE with the bound set by hand',
        () => db().db.execute(sql`SELECT set_config('lemniscate.audit_prune_through', '0', false); DELETE FROM audit_log WHERE seq = ${head.lastSeq}`),
        /permission denied|append-only|cannot insert multiple commands/,
      ],
      ['an archive row removed', () => db().db.execute(sql`DELETE FROM audit_archives`), /permission denied|append-only/],
    ];
    for (const [what, attempt, message] of refusals) {
      await expect([
        what,
        await attempt().then(
          () => 'done',
          (e: Error) => `${e.message} ${(e as { cause?: Error }).cause?.message ?? ''}`,
        ),
      ]).toEqual([what, expect.stringMatching(message)]);
    }
    // Nothing was removed: the chain is whole, the archive bound unchanged, and the only entry since is the first verify's own.
    const after = (await gw.http().get('/api/v1/audit/verify').set(bearer(admin))).body as { ok: boolean; lastSeq: number };
    expect(after).toMatchObject({ ok: true, lastSeq: head.lastSeq + 1, archivedThrough: { seq: head.archivedThrough.seq } });
  });

  it('after archiving, tampering with what remains is still named exactly', async () => {
    const v = (await gw.http().get('/api/v1/audit/verify').set(bearer(admin))).body as { archivedThrough: { seq: number } };
    const target = v.archivedThrough.seq + 2;
    const [row] = await db().superuser<{ payload: string }>(`SELECT payload FROM audit_log WHERE seq = ${target}`);
    const original = row!.payload;
    await db().superuser('ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete');
    try {
      await db().superuser(`UPDATE audit_log SET payload = '{"forged":true}' WHERE seq = ${target}`);
    } finally {
      await db().superuser('ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update_delete');
    }
    const broken = (await gw.http().get('/api/v1/audit/verify').set(bearer(admin))).body as Record<string, unknown>;
    expect(broken).toMatchObject({ ok: false, seq: target, problem: 'altered' });
    // Put back as it was, so the next case starts from an intact chain.
    await db().superuser('ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete');
    try {
      await db().superuser(`UPDATE audit_log SET payload = $1 WHERE seq = ${target}`, [original]);
    } finally {
      await db().superuser('ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update_delete');
    }
    expect((await gw.http().get('/api/v1/audit/verify').set(bearer(admin))).body).toMatchObject({ ok: true });
  });

  it('never archives away what an audit sink has not taken yet', async () => {
    const sinks = path.join(dir, 'sinks.json');
    // A sink nobody listens on: its cursor stays where the log was when it was added.
    fs.writeFileSync(sinks, JSON.stringify({ sinks: [{ name: 'waiting-siem', type: 'syslog', url: 'tcp://127.0.0.1:9', from: 'now' }] }));
    const held = await startGateway(db(), {
      LEMNISCATE_AUDIT_SINKS_FILE: sinks,
      LEMNISCATE_AUDIT_RETENTION_ENTRIES: '1',
      LEMNISCATE_AUDIT_ARCHIVE_DIR: path.join(dir, 'held'),
      LEMNISCATE_AUDIT_ARCHIVE_MIN_ENTRIES: '1',
    });
    try {
      const cursor = ((await held.http().get('/api/v1/audit/sinks').set(bearer(admin))).body as { sinks: Array<{ cursor: number }> }).sinks[0]!.cursor;
      await appendMany(held, 30, 'held');
      const made = await held.app.get(AuditRetentionService).run();
      const through = made.at(-1)?.manifest.lastSeq ?? ((await held.http().get('/api/v1/audit/verify').set(bearer(admin))).body as { archivedThrough: { seq: number } }).archivedThrough.seq;
      expect(through).toBeLessThanOrEqual(cursor);
      const first = ((await held.http().get('/api/v1/audit?order=asc&limit=1').set(bearer(admin))).body as Array<{ seq: number }>)[0]!.seq;
      expect(first).toBeLessThanOrEqual(cursor + 1);
    } finally {
      await held.close();
    }
  });

  it('by age: entries older than the retention in days go, younger ones stay', async () => {
    const byAge = await startGateway(db(), { LEMNISCATE_AUDIT_RETENTION_DAYS: '30', LEMNISCATE_AUDIT_ARCHIVE_DIR: path.join(dir, 'by-age'), LEMNISCATE_AUDIT_ARCHIVE_MIN_ENTRIES: '1' });
    try {
      const service = byAge.app.get(AuditRetentionService);
      const day = 86_400_000;
      expect(await service.run(new Date(Date.now() + 29 * day))).toEqual([]);
      const head = ((await byAge.http().get('/api/v1/audit/verify').set(bearer(admin))).body as { lastSeq: number }).lastSeq;
      const [made] = await service.run(new Date(Date.now() + 31 * day));
      expect(made?.manifest.lastSeq).toBeGreaterThanOrEqual(head);
      const v = (await byAge.http().get('/api/v1/audit/verify').set(bearer(admin))).body as { ok: boolean; archivedThrough: { seq: number } };
      expect(v).toMatchObject({ ok: true, archivedThrough: { seq: made!.manifest.lastSeq } });
      expect((await verifyFile(made!.file)).code).toBe(0);
    } finally {
      await byAge.close();
    }
  });
});

describe('retention settings', () => {
  it('a retention without an archive directory, or a relative one, stops the gateway with a sentence', () => {
    const node = process.execPath;
    const run = (vars: Record<string, string>) => {
      try {
        execFileSync(node, ['-e', "require('./apps/gateway/dist/config/config.js').loadConfig(process.env)"], {
          env: { PATH: process.env.PATH ?? '', ...vars },
          cwd: path.resolve(__dirname, '../..'),
          stdio: 'pipe',
        });
        return '';
      } catch (e) {
        return String((e as { stderr: Buffer }).stderr);
      }
    };
    expect(run({ LEMNISCATE_AUDIT_RETENTION_DAYS: '90' })).toContain('set LEMNISCATE_AUDIT_ARCHIVE_DIR to the directory that keeps the archives');
    expect(run({ LEMNISCATE_AUDIT_RETENTION_DAYS: '90', LEMNISCATE_AUDIT_ARCHIVE_DIR: 'archives' })).toContain('LEMNISCATE_AUDIT_ARCHIVE_DIR must be an absolute path');
    expect(run({ LEMNISCATE_AUDIT_RETENTION_DAYS: '0', LEMNISCATE_AUDIT_ARCHIVE_DIR: '/tmp/a' })).toContain('LEMNISCATE_AUDIT_RETENTION_DAYS: must be at least 1 day');
    expect(run({ LEMNISCATE_AUDIT_ARCHIVE_DIR: '/tmp/a' })).toContain('apply to a retention');
  });
});
