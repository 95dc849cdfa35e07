// Audit sinks (T2) against real receivers: a webhook that fails and recovers, a JSON-lines file,
// gateways sharing a sink, a file a gateway died writing, and the refusal mode. rsyslog over TCP and
// TLS is in audit-sinks-syslog.medium.ts.
import { createHmac } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { sql } from 'drizzle-orm';
import { AuditService } from '../../src/audit/audit.service';
import { until } from '../support/until';
import { withTestDatabases, type TestDatabase } from '../support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createUser, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(120_000);

const SECRET = 'a webhook secret of more than thirty-two bytes';
const FAST = { leaseMs: 1_500, idlePollMs: 100, statusPollMs: 200, backoffFirstMs: 100, backoffMaxMs: 400 };

interface Delivery {
  headers: http.IncomingHttpHeaders;
  body: string;
  records: Array<Record<string, unknown>>;
}

/** A webhook receiver: answers `failing` requests with 503 first, then 200; keeps every accepted body. */
async function receiver(): Promise<{ url: string; accepted: Delivery[]; refused: number; failNext(n: number): void; failAlways(on: boolean): void; close(): Promise<void> }> {
  const accepted: Delivery[] = [];
  let fail = 0;
  let always = false;
  const state = { refused: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      if (always || fail > 0) {
        fail = Math.max(0, fail - 1);
        state.refused += 1;
        res.writeHead(503, { 'content-type': 'text/plain' }).end('receiver is down for maintenance');
        return;
      }
      accepted.push({ headers: req.headers, body, records: (JSON.parse(body) as { records: Array<Record<string, unknown>> }).records });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/audit`,
    accepted,
    get refused() {
      return state.refused;
    },
    failNext: (n) => (fail = n),
    failAlways: (on) => (always = on),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function sinksFile(dir: string, doc: unknown): string {
  const secret = path.join(dir, 'hook.secret');
  fs.writeFileSync(secret, SECRET);
  const file = path.join(dir, 'sinks.json');
  fs.writeFileSync(file, JSON.stringify(doc));
  return file;
}

interface SinksView {
  head: number;
  recording: boolean;
  onUnrecorded: string;
  sinks: Array<{ name: string; state: string; lag: number; cursor: number; lastError: string | null; failingSince: string | null; target: string }>;
}

async function sinks(gw: Gateway, token: string): Promise<SinksView> {
  const res = await gw.http().get('/api/v1/audit/sinks').set(bearer(token));
  if (res.status !== 200) throw new Error(`GET /audit/sinks: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as SinksView;
}

const allDelivered = (gw: Gateway, token: string) => () => sinks(gw, token).then((v) => (v.sinks.every((s) => s.state === 'up_to_date' && s.cursor === v.head) ? v : undefined));

function seqs(records: Array<Record<string, unknown>>): number[] {
  return records.map((r) => (typeof r.seq === 'number' ? r.seq : (r.metadata as { sequence: number }).sequence));
}

async function appendMany(gw: Gateway, n: number, tag: string): Promise<void> {
  const audit = gw.app.get(AuditService);
  await Promise.all(Array.from({ length: n }, (_, i) => audit.append({ actor: 'system', kind: 'session.configured', payload: { tag, i, text: 'ünïcode \u0000 and "quotes"' } })));
}

withTestDatabases((db, kind) => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-sinks-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a webhook that fails then recovers and a JSON-lines file each get every entry once, in order, the file exactly as the export', async () => {
    const hook = await receiver();
    hook.failAlways(true);
    const file = path.join(dir, 'audit.jsonl');
    const config = sinksFile(dir, {
      sinks: [
        { name: 'hook', type: 'webhook', url: hook.url, secretFile: path.join(dir, 'hook.secret'), batch: 7 },
        { name: 'local-1', type: 'file', path: file },
        { name: 'hook-ocsf', type: 'webhook', url: hook.url.replace('/audit', '/ocsf'), secretFile: path.join(dir, 'hook.secret'), format: 'ocsf' },
      ],
    });
    const gw = await startGateway(db(), { LEMNISCATE_AUDIT_SINKS_FILE: config }, undefined, { auditSinkTiming: FAST });
    try {
      const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
      // While the receiver refuses: the sink is failing, with the receiver's words, and lags.
      const failing = await until('the webhook sink failing', () => sinks(gw, admin).then((v) => (v.sinks.find((s) => s.name === 'hook')?.state === 'failing' ? v : undefined)));
      const hookView = failing.sinks.find((s) => s.name === 'hook')!;
      expect(hookView.lastError).toContain('answered 503: receiver is down for maintenance');
      expect(hookView.target).toBe(hook.url);
      expect(JSON.stringify(failing)).not.toContain(SECRET);
      await appendMany(gw, 120, 'first');
      hook.failAlways(false);
      hook.failNext(2);
      await createUser(gw, admin, `officer-${kind}@example.test`, 'security_officer', []);
      await gw
        .http()
        .post('/api/v1/auth/login')
        .send({ email: `officer-${kind}@example.test`, password: 'not the password' });
      const done = await until('every sink up to date', allDelivered(gw, admin));
      expect(hook.refused).toBeGreaterThanOrEqual(3);
      const head = done.head;
      expect(head).toBeGreaterThan(120);
      const expected = Array.from({ length: head }, (_, i) => i + 1);

      const plain = hook.accepted.filter((d) => JSON.parse(d.body).sink === 'hook');
      expect(seqs(plain.flatMap((d) => d.records))).toEqual(expected);
      expect(Math.max(...plain.map((d) => d.records.length))).toBeLessThanOrEqual(7);
      for (const d of plain) {
        const ts = String(d.headers['x-lemniscate-timestamp']);
        expect(d.headers['x-lemniscate-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(`${ts}.${d.body}`).digest('hex')}`);
        const s = seqs(d.records);
        expect(d.headers['x-lemniscate-delivery']).toBe(`${s[0]}-${s[s.length - 1]}`);
      }
      const ocsf = hook.accepted.filter((d) => JSON.parse(d.body).sink === 'hook-ocsf').flatMap((d) => d.records);
      expect(seqs(ocsf)).toEqual(expected);
      const failedLogin = ocsf.find((r) => (r.unmapped as { kind: string }).kind === 'auth.login_failed')!;
      expect(failedLogin).toMatchObject({ class_uid: 3002, activity_id: 1, type_uid: 300201, status_id: 2, metadata: { version: '1.1.0', product: { name: 'Lemniscate' } } });
      const created = ocsf.find((r) => (r.unmapped as { kind: string }).kind === 'user.create')!;
      expect(created).toMatchObject({ class_uid: 6003, activity_id: 1, api: { operation: 'user.create' }, actor: { user: { email_addr: ADMIN_EMAIL } } });

      // The file holds the export's JSON lines byte for byte (payload as hashed, hashes, who the actor is).
      const exported = await gw
        .http()
        .get('/api/v1/audit/export?format=jsonl')
        .set(bearer(admin))
        .buffer(true)
        .parse((res, cb) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString('utf8')));
          res.on('end', () => cb(null, text));
        });
      const exportLines = (exported.body as string).split('\n').filter(Boolean);
      const fileLines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
      expect(fileLines.slice(0, head)).toEqual(exportLines.slice(0, head));
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);

      // The metrics say the same.
      const metrics = await gw.http().get('/metrics');
      expect(metrics.text).toMatch(/lemniscate_audit_sink_failing\{sink="hook"\} 0/);
      expect(metrics.text).toMatch(/lemniscate_audit_sink_failures_total\{sink="hook"\} [3-9]/);
      expect(metrics.text).toMatch(/lemniscate_audit_sink_delivered_total\{sink="local-1"\} \d+/);
    } finally {
      await gw.close();
      await hook.close();
    }
  });

  it('refuse mode: while no sink can record, audited actions are refused with the reason; once one records, they are allowed again and nothing is lost', async () => {
    const hook = await receiver();
    hook.failAlways(true);
    const config = sinksFile(dir, { onUnrecorded: 'refuse', sinks: [{ name: 'siem', type: 'webhook', url: hook.url, secretFile: path.join(dir, 'hook.secret') }] });
    // The start itself is audited (the first administrator); the sink has not failed yet then.
    const gw = await startGateway(db(), { LEMNISCATE_AUDIT_SINKS_FILE: config }, undefined, { auditSinkTiming: FAST });
    try {
      const before = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD).catch(() => undefined))?.token;
      await until('the sink failing', async () => gw.app.get(AuditService).refusal() ?? undefined);
      const refused = await gw.http().post('/api/v1/auth/login').send({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ code: 'audit_unrecorded' });
      expect(refused.body.message).toMatch(
        /^This action is refused because no audit sink can record it right now \(siem: .*answered 503: receiver is down for maintenance\), and this deployment refuses what cannot be recorded\./,
      );
      if (before) {
        // Reading where the sinks stand is not an audited action: an administrator can still see why.
        const view = await sinks(gw, before);
        expect(view).toMatchObject({ onUnrecorded: 'refuse', recording: false, sinks: [{ name: 'siem', state: 'failing' }] });
        const create = await gw
          .http()
          .post('/api/v1/users')
          .set(bearer(before))
          .send({ email: 'nobody@example.test', displayName: 'nobody', password: 'a password long enough 123', role: 'developer', projectIds: [] });
        expect(create.status).toBe(503);
      }
      hook.failAlways(false);
      const admin = await until('sign-in allowed again', async () => {
        const res = await gw.http().post('/api/v1/auth/login').send({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
        return res.status === 200 ? res : undefined;
      });
      expect(admin.status).toBe(200);
      const token = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
      const done = await until('delivered', allDelivered(gw, token));
      expect(seqs(hook.accepted.flatMap((d) => d.records))).toEqual(Array.from({ length: done.head }, (_, i) => i + 1));
      // A refused action was not done: no user, no entry.
      expect(hook.accepted.map((d) => d.body).join('\n')).not.toContain('nobody@example.test');
      const users = await gw.http().get('/api/v1/users').set(bearer(token));
      expect((users.body as Array<{ email: string }>).map((u) => u.email)).not.toContain('nobody@example.test');
    } finally {
      await gw.close();
      await hook.close();
    }
  });

  it('a file the gateway died writing: the partial line is cut and what the file holds is not written again', async () => {
    const file = path.join(dir, 'audit.jsonl');
    const config = sinksFile(dir, { sinks: [{ name: 'local-crash', type: 'file', path: file }] });
    const first = await startGateway(db(), { LEMNISCATE_AUDIT_SINKS_FILE: config }, undefined, { auditSinkTiming: FAST });
    let admin = (await tokenFor(first, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    const delivered = await until('delivered', allDelivered(first, admin));
    await first.close();
    const database = db() as TestDatabase;
    // As if the gateway had written two more entries and died before moving the cursor, the last one half written.
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
    const base = delivered.head;
    await appendRaw(database, 3);
    const extra = (await exportLines(database, base)).slice(0, 2);
    fs.appendFileSync(file, `${extra[0]}\n${extra[1]!.slice(0, 40)}`);
    const second = await startGateway(db(), { LEMNISCATE_AUDIT_SINKS_FILE: config }, undefined, { auditSinkTiming: FAST });
    try {
      admin = (await tokenFor(second, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
      const done = await until('delivered', allDelivered(second, admin));
      const now = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
      expect(now.slice(0, lines.length)).toEqual(lines);
      const nums = now.map((l) => (JSON.parse(l) as { seq: number }).seq);
      expect(nums).toEqual(Array.from({ length: done.head }, (_, i) => i + 1));
    } finally {
      await second.close();
    }
  });

  if (kind === 'postgres') {
    it('two gateways share a sink: one sends at a time, every entry once and in order, and a sink whose holder died is taken over from its cursor', async () => {
      const hook = await receiver();
      const config = sinksFile(dir, { sinks: [{ name: 'shared', type: 'webhook', url: hook.url, secretFile: path.join(dir, 'hook.secret'), batch: 5 }] });
      const a = await startGateway(db(), { LEMNISCATE_AUDIT_SINKS_FILE: config }, undefined, { auditSinkTiming: FAST });
      const b = await startGateway(db(), { LEMNISCATE_AUDIT_SINKS_FILE: config }, undefined, { auditSinkTiming: FAST });
      try {
        const admin = (await tokenFor(a, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
        await Promise.all([appendMany(a, 60, 'a'), appendMany(b, 60, 'b')]);
        let done = await until('delivered', allDelivered(a, admin));
        expect(seqs(hook.accepted.flatMap((d) => d.records))).toEqual(Array.from({ length: done.head }, (_, i) => i + 1));
        // The holder dies without giving the lease up: a stranger's lease that has lapsed.
        await (db() as TestDatabase).db.execute(sql`UPDATE audit_sink_cursors SET holder = 'dead-gateway:1:0', lease_until = now() - interval '1 second' WHERE name = 'shared'`);
        await appendMany(b, 30, 'after');
        done = await until('delivered after the takeover', allDelivered(b, admin));
        expect(seqs(hook.accepted.flatMap((d) => d.records))).toEqual(Array.from({ length: done.head }, (_, i) => i + 1));
        // A live holder's lease is respected: nobody else sends while it renews.
        const holders = await (db() as TestDatabase).db.execute(sql`SELECT holder FROM audit_sink_cursors WHERE name = 'shared'`);
        expect(String((holders as unknown as { rows: Array<{ holder: string }> }).rows[0]?.holder)).not.toBe('dead-gateway:1:0');
      } finally {
        await a.close();
        await b.close();
        await hook.close();
      }
    });
  }
});

async function appendRaw(database: TestDatabase, n: number): Promise<void> {
  const { AuditLogRepository } = await import('../../src/db/repositories/audit-log.repository');
  const audit = new AuditService(new AuditLogRepository(database.db));
  for (let i = 0; i < n; i++) await audit.append({ actor: 'system', kind: 'session.configured', payload: { raw: i } });
}

async function exportLines(database: TestDatabase, after: number): Promise<string[]> {
  const { AuditLogRepository } = await import('../../src/db/repositories/audit-log.repository');
  const audit = new AuditService(new AuditLogRepository(database.db));
  const out: string[] = [];
  for await (const chunk of audit.export({}, 'jsonl', async () => new Map(), after)) out.push(...String(chunk).split('\n').filter(Boolean));
  return out;
}
