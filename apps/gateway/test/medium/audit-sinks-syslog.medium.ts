// Audit sinks to a real rsyslog (Debian's rsyslogd, started by the test): RFC 5424 over TCP and over
// TLS, every entry once and in order across a receiver restart, and a receiver whose certificate the
// configured CA did not sign gets nothing.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AuditService } from '../../src/audit/audit.service';
import { makeTestCerts, type TestCerts } from '../../../../test/support/certs';
import { rsyslogAvailable, startRsyslog, type Rsyslog } from '../support/rsyslog';
import { until } from '../support/until';
import { withTestDatabases } from '../support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(120_000);

const FAST = { leaseMs: 1_500, idlePollMs: 100, statusPollMs: 200, backoffFirstMs: 100, backoffMaxMs: 500 };

interface SinkState {
  name: string;
  state: string;
  cursor: number;
  lastError: string | null;
}

async function view(gw: Gateway, token: string): Promise<{ head: number; sinks: SinkState[] }> {
  const res = await gw.http().get('/api/v1/audit/sinks').set(bearer(token));
  if (res.status !== 200) throw new Error(`GET /audit/sinks: ${res.status}`);
  return res.body as { head: number; sinks: SinkState[] };
}

function recordSeq(line: string): number {
  const r = JSON.parse(line) as { seq?: number; metadata?: { sequence: number } };
  return r.seq ?? r.metadata!.sequence;
}

async function appendMany(gw: Gateway, n: number, tag: string): Promise<void> {
  const audit = gw.app.get(AuditService);
  for (let i = 0; i < n; i++) await audit.append({ actor: 'system', kind: 'session.configured', payload: { tag, i, note: 'ünïcode and a\nnew line' } });
}

describe('rsyslogd is installed (npm test installs it)', () => {
  it(`${'/usr/sbin/rsyslogd'} exists`, () => {
    expect(rsyslogAvailable()).toBe(true);
  });
});

withTestDatabases(
  (db) => {
    let certs: TestCerts;
    let dir: string;
    let plain: Rsyslog;
    let secure: Rsyslog;
    let impostor: Rsyslog;
    beforeAll(async () => {
      certs = makeTestCerts(['syslog']);
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-syslog-'));
      plain = await startRsyslog();
      const good = certs.good.hosts.syslog!;
      secure = await startRsyslog({ ca: certs.good.ca, cert: good.cert, key: good.key });
      // Same names, another CA: what someone who can make certificates but not ours has.
      const foreign = certs.foreign.hosts.syslog!;
      impostor = await startRsyslog({ ca: certs.foreign.ca, cert: foreign.cert, key: foreign.key });
    });
    afterAll(async () => {
      await Promise.all([plain?.remove(), secure?.remove(), impostor?.remove()]);
      certs?.remove();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('TCP and TLS: every entry once and in order, across a receiver stopped and started again; an impostor receiver gets nothing', async () => {
      const file = path.join(dir, 'sinks.json');
      fs.writeFileSync(
        file,
        JSON.stringify({
          sinks: [
            { name: 'tcp', type: 'syslog', url: `tcp://127.0.0.1:${plain.port}` },
            { name: 'tls', type: 'syslog', url: `tls://localhost:${secure.port}`, caFile: certs.good.ca, format: 'ocsf' },
            { name: 'impostor', type: 'syslog', url: `tls://localhost:${impostor.port}`, caFile: certs.good.ca },
          ],
        }),
      );
      const gw = await startGateway(db(), { LEMNISCATE_AUDIT_SINKS_FILE: file }, undefined, { auditSinkTiming: FAST });
      try {
        const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
        await appendMany(gw, 40, 'before');
        const caughtUp = (names: string[]) => async () => {
          const v = await view(gw, admin);
          return v.sinks.filter((s) => names.includes(s.name)).every((s) => s.state === 'up_to_date' && s.cursor === v.head) ? v : undefined;
        };
        let v = await until('tcp and tls caught up', caughtUp(['tcp', 'tls']));
        await until('rsyslog wrote them', () => plain.lines().length >= v.head && secure.lines().length >= v.head);

        // The receiver goes away: the sink fails with why, entries wait, and arrive once it is back.
        await plain.stop();
        await appendMany(gw, 25, 'while-down');
        const failing = await until('tcp failing', async () => (await view(gw, admin)).sinks.find((s) => s.name === 'tcp' && s.state === 'failing'));
        expect(failing.lastError).toMatch(/ECONNREFUSED|closed the connection/);
        await plain.start();
        await appendMany(gw, 5, 'after');
        v = await until('tcp caught up again', caughtUp(['tcp', 'tls']));
        await until('rsyslog wrote them', () => plain.lines().length >= v.head && secure.lines().length >= v.head);

        const expected = Array.from({ length: v.head }, (_, i) => i + 1);
        expect(plain.lines().map(recordSeq)).toEqual(expected);
        expect(secure.lines().map(recordSeq)).toEqual(expected);
        // RFC 5424 as rsyslog parsed it: facility 13 (log audit), MSGID the kind, the seq as structured data.
        const raw = plain.raw();
        expect(raw[raw.length - 1]).toMatch(new RegExp(`^110 session\\.configured \\[lemniscate@32473 seq="${v.head}"\\] lemniscate `));
        const line = JSON.parse(plain.lines().find((l) => l.includes('while-down'))!) as { payload: { note: string }; hash: string };
        expect(line.payload.note).toBe('ünïcode and a\nnew line');
        expect(line.hash).toMatch(/^[0-9a-f]{64}$/);
        const ocsf = JSON.parse(secure.lines()[secure.lines().length - 1]!) as Record<string, unknown>;
        expect(ocsf).toMatchObject({ class_uid: 6003, metadata: { sequence: v.head, version: '1.1.0' } });

        // The impostor: a TLS receiver with the right names but another CA's certificate.
        const impostorView = (await view(gw, admin)).sinks.find((s) => s.name === 'impostor')!;
        expect(impostorView).toMatchObject({ state: 'failing', cursor: 0 });
        expect(impostorView.lastError).toMatch(/certificate|self.signed|unable to (verify|get)/i);
        expect(impostor.lines()).toEqual([]);
      } finally {
        await gw.close();
      }
    });
  },
  ['postgres'],
);
