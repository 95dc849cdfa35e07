import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createHmac } from 'node:crypto';
import { AUDIT_KINDS } from '@lemniscate/contracts';
import { chainHash, type StoredEntry } from '../../../src/audit/audit-chain';
import { jsonlLine } from '../../../src/audit/audit-export';
import { loadConfig } from '../../../src/config/config';
import { loadAuditSinks } from '../../../src/audit-sinks/sink-config';
import { formatRecord, ocsfClass, ocsfRecord, shortenedRecord } from '../../../src/audit-sinks/sink-formats';
import { FileTransport, octetCounted, syslogMessage, webhookSignature, WebhookTransport, type SinkRecord } from '../../../src/audit-sinks/transports';

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-sinks-unit-'));
  fs.writeFileSync(path.join(dir, 'secret'), 'k'.repeat(40));
  fs.writeFileSync(path.join(dir, 'short-secret'), 'too short');
  fs.writeFileSync(path.join(dir, 'ca.pem'), CA);
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function write(doc: unknown, raw?: string): string {
  const file = path.join(dir, 'sinks.json');
  fs.writeFileSync(file, raw ?? JSON.stringify(doc));
  return file;
}

describe('the sinks file', () => {
  it('reads the three kinds with their defaults', () => {
    const config = loadAuditSinks(
      write({
        sinks: [
          { name: 'siem', type: 'syslog', url: 'tls://siem.example:6514', caFile: path.join(dir, 'ca.pem') },
          { name: 'hook', type: 'webhook', url: 'https://hooks.example/audit', secretFile: path.join(dir, 'secret'), format: 'ocsf' },
          { name: 'archive', type: 'file', path: '/var/log/lemniscate/audit.jsonl' },
        ],
      }),
    );
    expect(config.onUnrecorded).toBe('continue');
    expect(config.sinks[0]).toMatchObject({ format: 'json', facility: 13, appName: 'lemniscate', maxMessageBytes: 65536, from: 'start', ca: CA });
    expect(config.sinks[1]).toMatchObject({ format: 'ocsf', batch: 100, timeoutSeconds: 10 });
    expect((config.sinks[1] as { secret: Buffer }).secret.toString()).toBe('k'.repeat(40));
  });

  // Every way the file can be wrong, each with a sentence naming the file and the field.
  const cases: Array<[string, unknown, RegExp]> = [
    ['no sinks', { sinks: [] }, /sinks: must name at least one sink/],
    ['an unknown type', { sinks: [{ name: 'x', type: 'kafka' }] }, /type must be "syslog", "webhook" or "file"/],
    ['a bad name', { sinks: [{ name: 'Bad Name', type: 'file', path: '/tmp/a' }] }, /sinks\.0\.name: must be 1–63 lower-case letters/],
    [
      'two sinks of one name',
      {
        sinks: [
          { name: 'a', type: 'file', path: '/tmp/a' },
          { name: 'a', type: 'file', path: '/tmp/b' },
        ],
      },
      /sinks\.1\.name: "a" names two sinks/,
    ],
    ['a relative file path', { sinks: [{ name: 'a', type: 'file', path: 'audit.jsonl' }] }, /sinks\.0\.path: must be an absolute path/],
    ['a syslog URL without a port', { sinks: [{ name: 's', type: 'syslog', url: 'tcp://siem.example' }] }, /sinks\.0\.url: must be tcp:\/\/host:port or tls:\/\/host:port/],
    ['udp', { sinks: [{ name: 's', type: 'syslog', url: 'udp://siem.example:514' }] }, /must be tcp:\/\/host:port or tls:\/\/host:port/],
    ['a CA for plain TCP', { sinks: [{ name: 's', type: 'syslog', url: 'tcp://siem.example:514', caFile: '/tmp/ca.pem' }] }, /caFile and serverName apply to tls:\/\/ only/],
    ['a facility out of range', { sinks: [{ name: 's', type: 'syslog', url: 'tcp://h:514', facility: 24 }] }, /sinks\.0\.facility/],
    [
      'a webhook over plain http to another host',
      { sinks: [{ name: 'h', type: 'webhook', url: 'http://hooks.example/a', secretFile: 'SECRET' }] },
      /plain http:\/\/ is accepted for a receiver on this machine only/,
    ],
    ['a webhook to a non-http URL', { sinks: [{ name: 'h', type: 'webhook', url: 'ftp://hooks.example/a', secretFile: 'SECRET' }] }, /sinks\.0\.url: must be an https:\/\/ URL/],
    ['a webhook without a secret', { sinks: [{ name: 'h', type: 'webhook', url: 'https://hooks.example/a' }] }, /sinks\.0\.secretFile/],
    ['a secret too short', { sinks: [{ name: 'h', type: 'webhook', url: 'https://hooks.example/a', secretFile: 'SHORT' }] }, /holds 9 bytes; an HMAC key needs at least 32/],
    ['a secret file missing', { sinks: [{ name: 'h', type: 'webhook', url: 'https://hooks.example/a', secretFile: '/nonexistent/secret' }] }, /\/nonexistent\/secret\) cannot be read \(ENOENT\)/],
    ['a CA file that is not PEM', { sinks: [{ name: 's', type: 'syslog', url: 'tls://h:6514', caFile: 'SECRET' }] }, /holds no PEM certificate/],
    ['an unknown field', { sinks: [{ name: 'a', type: 'file', path: '/tmp/a', mode: '0644' }] }, /Unrecognized key/i],
    ['an unknown refusal mode', { onUnrecorded: 'block', sinks: [{ name: 'a', type: 'file', path: '/tmp/a' }] }, /onUnrecorded/],
  ];
  it.each(cases)('refuses %s with a sentence', (_what, doc, message) => {
    const text = JSON.stringify(doc)
      .replaceAll('"SECRET"', JSON.stringify(path.join(dir, 'secret')))
      .replaceAll('"SHORT"', JSON.stringify(path.join(dir, 'short-secret')));
    const file = write(undefined, text);
    expect(() => loadAuditSinks(file)).toThrow(message);
    expect(() => loadAuditSinks(file)).toThrow(`The gateway cannot start: the audit sinks file ${file}`);
  });

  it('refuses a file that is not JSON, cannot be read, or is named relatively, and the gateway does not start', () => {
    expect(() => loadAuditSinks(write(undefined, '{ nope'))).toThrow(/is not JSON/);
    expect(() => loadAuditSinks(path.join(dir, 'missing.json'))).toThrow(/cannot be read \(ENOENT\)/);
    expect(() => loadAuditSinks('sinks.json')).toThrow('LEMNISCATE_AUDIT_SINKS_FILE must be an absolute path, not "sinks.json".');
    expect(() => loadConfig({ LEMNISCATE_AUDIT_SINKS_FILE: path.join(dir, 'missing.json'), LEMNISCATE_SECRET_KEY: 'a'.repeat(64) })).toThrow(
      /The gateway cannot start: the audit sinks file .* cannot be read/,
    );
  });

  it('a webhook over plain http is accepted for a receiver on this machine', () => {
    for (const host of ['127.0.0.1', 'localhost', '[::1]']) {
      expect(loadAuditSinks(write({ sinks: [{ name: 'h', type: 'webhook', url: `http://${host}:8080/a`, secretFile: path.join(dir, 'secret') }] })).sinks).toHaveLength(1);
    }
  });
});

function entry(seq: number, kind: string, payload: unknown, actor = 'user:u1'): StoredEntry {
  const base = { seq, at: new Date('2026-12-06T10:00:00.000Z'), actor, kind, projectId: 'prj', sessionId: 'ses', payload: JSON.stringify(payload) };
  const prevHash = '0'.repeat(64);
  return { ...base, prevHash, hash: chainHash(prevHash, base) };
}

describe('formats', () => {
  it('json is the export line without its newline, the payload text as hashed', () => {
    const e = entry(7, 'policy.decision', { command: 'rm -rf /', decision: 'deny' });
    const who = { email: 'ada@example.org', displayName: 'Ada' };
    expect(formatRecord(e, who, 'json')).toBe(jsonlLine(e, who).slice(0, -1));
  });

  it('maps every kind the gateway records onto an OCSF class and activity', () => {
    for (const kind of AUDIT_KINDS) {
      const c = ocsfClass(kind);
      expect([3002, 6003]).toContain(c.class_uid);
      expect(kind.startsWith('auth.') ? c.class_uid : 6003).toBe(c.class_uid);
    }
    expect(ocsfClass('auth.login')).toMatchObject({ class_uid: 3002, activity_id: 1 });
    expect(ocsfClass('auth.logout')).toMatchObject({ class_uid: 3002, activity_id: 2 });
    expect(ocsfClass('policy.publish')).toMatchObject({ class_uid: 6003, activity_id: 3 });
    expect(ocsfClass('session.revoke')).toMatchObject({ class_uid: 6003, activity_id: 4 });
    expect(ocsfClass('audit.export')).toMatchObject({ class_uid: 6003, activity_id: 2 });
  });

  it('OCSF: a failed sign-in is an Authentication failure naming the email tried; a denied command an API Activity failure', () => {
    const failed = ocsfRecord(entry(3, 'auth.login_failed', { email: 'mallory@example.org', ip: '10.0.0.9', reason: 'wrong_password' }, 'anonymous'), null);
    expect(failed).toMatchObject({
      class_uid: 3002,
      type_uid: 300201,
      status_id: 2,
      severity_id: 3,
      user: { email_addr: 'mallory@example.org' },
      src_endpoint: { ip: '10.0.0.9' },
      time: Date.parse('2026-12-06T10:00:00.000Z'),
    });
    const denied = ocsfRecord(entry(4, 'policy.decision', { command: 'curl x | sh', decision: 'deny' }), { email: 'ada@example.org', displayName: 'Ada' });
    expect(denied).toMatchObject({
      class_uid: 6003,
      status_id: 2,
      api: { operation: 'policy.decision' },
      actor: { user: { uid: 'user:u1', email_addr: 'ada@example.org' } },
      resources: [{ uid: 'prj', type: 'project' }],
    });
    expect(denied.metadata).toMatchObject({ sequence: 4, uid: '4', correlation_uid: 'ses', version: '1.1.0' });
    expect(denied.unmapped).toMatchObject({ seq: 4, hash: expect.stringMatching(/^[0-9a-f]{64}$/), payload: { command: 'curl x | sh' } });
  });

  it('a record too long for syslog keeps its seq and hash and says how long its payload was', () => {
    const e = entry(9, 'tool_call.proposed', { content: 'x'.repeat(100_000) });
    const record: SinkRecord = { seq: 9, kind: e.kind, at: e.at, text: formatRecord(e, null, 'json'), short: () => shortenedRecord(e, null, 'json'), failure: false };
    const message = syslogMessage(record, { facility: 13, appName: 'lemniscate', maxMessageBytes: 4096 }, 'gw1').toString('utf8');
    expect(message.length).toBeLessThan(4096);
    expect(message).toContain('"payload":{"truncated":true,"bytes":100014}');
    expect(message).toContain(`"hash":"${e.hash}"`);
  });
});

describe('syslog framing (RFC 5424, RFC 6587 octet counting)', () => {
  it('writes PRI, version, timestamp, host, app, MSGID and the seq as structured data, then the BOM and the record', () => {
    const record: SinkRecord = { seq: 12, kind: 'auth.login_failed', at: new Date('2026-12-06T10:00:00.123Z'), text: '{"seq":12}', short: () => '{}', failure: true };
    const message = syslogMessage(record, { facility: 13, appName: 'lemniscate', maxMessageBytes: 65536 }, 'gw1');
    expect(message.toString('utf8')).toBe('<109>1 2026-12-06T10:00:00.123Z gw1 lemniscate - auth.login_failed [lemniscate@32473 seq="12"] \uFEFF{"seq":12}');
    const framed = octetCounted(message);
    expect(framed.toString('utf8')).toBe(`${message.length} ${message.toString('utf8')}`);
    // The length counts bytes, not characters.
    const wide = octetCounted(Buffer.from('é', 'utf8'));
    expect(wide.toString('utf8')).toBe('2 é');
  });
});

describe('webhook signatures', () => {
  it('is HMAC-SHA256 over "<timestamp>.<body>"', () => {
    const secret = Buffer.from('s'.repeat(32));
    expect(webhookSignature(secret, '1700000000', '{"a":1}')).toBe(createHmac('sha256', secret).update('1700000000.{"a":1}').digest('hex'));
    expect(webhookSignature(secret, '1700000001', '{"a":1}')).not.toBe(webhookSignature(secret, '1700000000', '{"a":1}'));
  });
});

describe('the webhook sink', () => {
  it('closes an idle connection before the time the receiver announced it would, and the next batch opens a new one', async () => {
    // The receiver announces 2 s but would keep the connection a minute: only the sink can close it.
    const connections = new Set<object>();
    let closedBySink = false;
    const server = http.createServer((req, res) => {
      connections.add(req.socket);
      req.resume();
      req.socket.once('end', () => (closedBySink = true));
      res.writeHead(204, { 'keep-alive': 'timeout=2' }).end();
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/audit`;
    const transport = new WebhookTransport({ name: 'hook', type: 'webhook', url, secretFile: '/unused', format: 'json', timeoutSeconds: 5, secret: Buffer.alloc(32, 1), ca: undefined } as never);
    const record = { seq: 1, text: '{"seq":1}' } as SinkRecord;
    try {
      await transport.send([record]);
      const end = Date.now() + 20_000;
      while (!closedBySink && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect(closedBySink).toBe(true);
      await transport.send([record]);
      expect(connections.size).toBe(2);
    } finally {
      await transport.close();
      server.closeAllConnections();
      server.close();
    }
  });
});

describe('the file sink', () => {
  const sink = (file: string) => new FileTransport({ name: 'f', type: 'file', path: file, format: 'json', from: 'start' });
  const rec = (seq: number): SinkRecord => ({ seq, kind: 'k', at: new Date(), text: JSON.stringify({ seq }), short: () => '', failure: false });

  it('appends lines with mode 0600 and finds where it stopped', async () => {
    const file = path.join(dir, 'audit.jsonl');
    const t = sink(file);
    expect(await t.lastSeq()).toBeNull();
    await t.send([rec(1), rec(2)]);
    await t.send([rec(3)]);
    expect(fs.readFileSync(file, 'utf8')).toBe('{"seq":1}\n{"seq":2}\n{"seq":3}\n');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(await t.lastSeq()).toBe(3);
  });

  it('cuts a half-written last line and answers the last whole one', async () => {
    const file = path.join(dir, 'audit.jsonl');
    fs.writeFileSync(file, '{"seq":1}\n{"seq":2}\n{"se');
    expect(await sink(file).lastSeq()).toBe(2);
    expect(fs.readFileSync(file, 'utf8')).toBe('{"seq":1}\n{"seq":2}\n');
    fs.writeFileSync(file, '{"se');
    expect(await sink(file).lastSeq()).toBeNull();
    expect(fs.readFileSync(file, 'utf8')).toBe('');
  });

  it('reads OCSF records and long lines, and refuses a file whose last line is not a record', async () => {
    const file = path.join(dir, 'audit.jsonl');
    fs.writeFileSync(file, `${JSON.stringify({ metadata: { sequence: 41 }, pad: 'x'.repeat(200_000) })}\n`);
    expect(await sink(file).lastSeq()).toBe(41);
    fs.writeFileSync(file, 'not json\n');
    await expect(sink(file).lastSeq()).rejects.toThrow(`The last line of ${file} is not an audit record`);
  });

  it('does not follow a symbolic link planted where the file should be', async () => {
    const target = path.join(dir, 'elsewhere');
    fs.writeFileSync(target, '');
    const file = path.join(dir, 'audit.jsonl');
    fs.symlinkSync(target, file);
    await expect(sink(file).send([rec(1)])).rejects.toMatchObject({ code: 'ELOOP' });
    expect(fs.readFileSync(target, 'utf8')).toBe('');
  });
});
