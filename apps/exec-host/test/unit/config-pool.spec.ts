import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { idFromHostname, isLoopback, loadConfig } from '../../src/config';
import { StartupError } from '../../src/errors';
import { makeTestCerts, type TestCerts } from '../../../../test/support/certs';

const token = 'a-long-enough-random-token';
const TLS_VARS = ['LEMNISCATE_EXEC_HOST_TLS_CERT', 'LEMNISCATE_EXEC_HOST_TLS_KEY', 'LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA'] as const;

let certs: TestCerts;
let scratch: string;
let tlsEnv: Record<(typeof TLS_VARS)[number], string>;
beforeAll(() => {
  certs = makeTestCerts(['exec-1']);
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-config-'));
  fs.writeFileSync(path.join(scratch, 'not-pem.txt'), 'hello\n');
  fs.writeFileSync(path.join(scratch, 'garbled.pem'), '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
  tlsEnv = {
    LEMNISCATE_EXEC_HOST_TLS_CERT: certs.good.hosts['exec-1']!.cert,
    LEMNISCATE_EXEC_HOST_TLS_KEY: certs.good.hosts['exec-1']!.key,
    LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA: certs.good.ca,
  };
});
afterAll(() => {
  certs.remove();
  fs.rmSync(scratch, { recursive: true, force: true });
});

const load = (env: Record<string, string>) => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, ...env });
const refusal = (env: Record<string, string>): string => {
  try {
    load(env);
  } catch (e) {
    expect(e).toBeInstanceOf(StartupError);
    return (e as Error).message;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
};

describe('the bind address', () => {
  it('binds 127.0.0.1 by default, any IP address given, and the socket wins over it', () => {
    expect(load({}).listen).toEqual({ kind: 'tcp', host: '127.0.0.1', port: 7071 });
    expect(load({ LEMNISCATE_EXEC_HOST_BIND: '::1' }).listen).toEqual({ kind: 'tcp', host: '::1', port: 7071 });
    expect(load({ LEMNISCATE_EXEC_HOST_BIND: '0.0.0.0', LEMNISCATE_EXEC_HOST_SOCKET: '/run/x.sock' }).listen).toEqual({ kind: 'socket', path: '/run/x.sock' });
    for (const bad of ['localhost', 'exec-1.example', '', '1.2.3', '127.0.0.1:7071']) {
      expect(refusal({ LEMNISCATE_EXEC_HOST_BIND: bad })).toMatch(/^LEMNISCATE_EXEC_HOST_BIND must be an IP address/);
    }
  });

  it.each(['0.0.0.0', '::', '10.0.0.5', '192.168.1.2', '::ffff:10.0.0.1', 'fe80::1'])('refuses to listen on %s without mutual TLS, in a sentence', (bind) => {
    expect(refusal({ LEMNISCATE_EXEC_HOST_BIND: bind })).toBe(
      `The exec-host will not listen on ${bind} (LEMNISCATE_EXEC_HOST_BIND) without mutual TLS: set LEMNISCATE_EXEC_HOST_TLS_CERT, LEMNISCATE_EXEC_HOST_TLS_KEY and LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA, or bind 127.0.0.1.`,
    );
  });

  it('knows loopback addresses', () => {
    for (const a of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', '::ffff:127.0.0.1', 'localhost']) expect(isLoopback(a)).toBe(true);
    for (const a of ['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', '::ffff:10.0.0.1', 'example.org']) expect(isLoopback(a)).toBe(false);
  });
});

describe('mutual TLS', () => {
  it('reads the three files, allows lemniscate-gateway by default, and listens beyond loopback with them', () => {
    const c = load({ ...tlsEnv, LEMNISCATE_EXEC_HOST_BIND: '0.0.0.0' });
    expect(c.listen).toEqual({ kind: 'tcp', host: '0.0.0.0', port: 7071 });
    expect(c.tls).toEqual({ cert: certs.good.hosts['exec-1']!.certPem, key: certs.good.hosts['exec-1']!.keyPem, clientCa: certs.good.caPem, clientNames: ['lemniscate-gateway'] });
    expect(load({ ...tlsEnv, LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES: ' gw-a, gw-b ,' }).tls!.clientNames).toEqual(['gw-a', 'gw-b']);
    expect(load({}).tls).toBeNull();
  });

  // Every strict subset of the three variables: a sentence naming what is missing.
  const subsets = [1, 2, 3, 4, 5, 6].map((mask) => TLS_VARS.filter((_, i) => mask & (1 << i)));
  it.each(subsets.map((s) => [s.join(' + ')]))('refuses %s alone, naming the missing ones', (label) => {
    const given = label.split(' + ') as (typeof TLS_VARS)[number][];
    const message = refusal(Object.fromEntries(given.map((v) => [v, tlsEnv[v]])));
    expect(message).toMatch(/^Mutual TLS needs all three of LEMNISCATE_EXEC_HOST_TLS_CERT, LEMNISCATE_EXEC_HOST_TLS_KEY and LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA; missing: /);
    for (const v of TLS_VARS) expect(message.slice(message.indexOf('missing:')).includes(v)).toBe(!given.includes(v));
  });

  // Every variable × every way its file can be wrong.
  const wrongs: [string, (v: string) => string, RegExp][] = [
    ['missing', () => path.join(scratch, 'absent.pem'), /names .*absent\.pem, which cannot be read \(ENOENT\)\.$/],
    ['a directory', () => scratch, /which cannot be read \(EISDIR\)\.$/],
    ['relative', () => 'certs/x.pem', /must be an absolute path to a PEM file, not "certs\/x\.pem"\.$/],
    ['not PEM', () => path.join(scratch, 'not-pem.txt'), /which is not a PEM file\.$/],
  ];
  const cases = TLS_VARS.flatMap((v) => wrongs.map(([what, value, pattern]) => [v, what, value, pattern] as const));
  it.each(cases)('refuses %s %s with a sentence naming it', (variable, _what, value, pattern) => {
    const message = refusal({ ...tlsEnv, [variable]: value(variable) });
    expect(message.startsWith(variable)).toBe(true);
    expect(message).toMatch(pattern);
  });

  it("refuses a garbled certificate, a key that is not the certificate's, and bad client names", () => {
    expect(refusal({ ...tlsEnv, LEMNISCATE_EXEC_HOST_TLS_CERT: path.join(scratch, 'garbled.pem') })).toMatch(/^LEMNISCATE_EXEC_HOST_TLS_CERT names .* which holds no readable certificate/);
    expect(refusal({ ...tlsEnv, LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA: path.join(scratch, 'garbled.pem') })).toMatch(/^LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA names .* which holds no readable certificate/);
    expect(refusal({ ...tlsEnv, LEMNISCATE_EXEC_HOST_TLS_KEY: certs.good.gateway.key })).toMatch(/^LEMNISCATE_EXEC_HOST_TLS_KEY \(.*\) is not the private key of LEMNISCATE_EXEC_HOST_TLS_CERT/);
    for (const bad of ['', ',', 'gw a', 'gw/"x"']) {
      expect(refusal({ ...tlsEnv, LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES: bad })).toMatch(/^LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES must be a comma-separated list/);
    }
    expect(refusal({ LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES: 'gw' })).toMatch(/^LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES is set without/);
    expect(refusal({ ...tlsEnv, LEMNISCATE_EXEC_HOST_SOCKET: '/run/x.sock' })).toMatch(/unix socket .* unset one of them\.$/);
  });
});

describe('registration with a pool gateway', () => {
  it('registers only with LEMNISCATE_GATEWAY_URL, every 5 s, as the host name, at the address it listens on', () => {
    expect(load({}).registration).toBeNull();
    const r = load({ LEMNISCATE_GATEWAY_URL: 'https://gw.example/', LEMNISCATE_EXEC_HOST_PORT: '7171' }).registration!;
    expect(r).toEqual({ gatewayUrl: 'https://gw.example', id: idFromHostname(os.hostname()), address: 'http://127.0.0.1:7171', heartbeatMs: 5000, gatewayCa: null });
    expect(load({ LEMNISCATE_GATEWAY_URL: 'http://127.0.0.1:7070', LEMNISCATE_EXEC_HOST_SOCKET: '/run/e.sock' }).registration!.address).toBe('unix:/run/e.sock');
    expect(load({ LEMNISCATE_GATEWAY_URL: 'http://127.0.0.1:7070', LEMNISCATE_EXEC_HOST_BIND: '::1' }).registration!.address).toBe('http://[::1]:7071');
    expect(load({ ...tlsEnv, LEMNISCATE_GATEWAY_URL: 'https://gw.example', LEMNISCATE_EXEC_HOST_BIND: '0.0.0.0' }).registration!.address).toBe(`https://${os.hostname().toLowerCase()}:7071`);
    const given = load({
      LEMNISCATE_GATEWAY_URL: 'https://gw.example',
      LEMNISCATE_EXEC_HOST_ID: 'exec-7',
      LEMNISCATE_EXEC_HOST_ADVERTISE_URL: 'https://exec-7.example:7071/',
      LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS: '300',
      LEMNISCATE_GATEWAY_CA: certs.good.ca,
    }).registration!;
    expect(given).toEqual({ gatewayUrl: 'https://gw.example', id: 'exec-7', address: 'https://exec-7.example:7071', heartbeatMs: 300_000, gatewayCa: certs.good.caPem });
  });

  it('derives an id from any host name', () => {
    expect(idFromHostname('Exec_Host.1.example.org')).toBe('exec-host');
    expect(idFromHostname('WORKER_07')).toBe('worker-07');
    expect(idFromHostname('-a--b-')).toBe('a-b');
    expect(idFromHostname('___')).toBe('exec-host');
    expect(idFromHostname('x'.repeat(80))).toBe('x'.repeat(63));
  });

  const bad: [string, string, RegExp][] = [
    ...['Exec-1', '-x', 'x-', 'a_b', 'a'.repeat(64), '', 'a..b', '.a', 'a.', 'a.-b', `${'a'.repeat(63)}.`.repeat(4) + 'a'].map((v): [string, string, RegExp] => [
      'LEMNISCATE_EXEC_HOST_ID',
      v,
      /^LEMNISCATE_EXEC_HOST_ID must be a lower-case DNS name/,
    ]),
    ...['exec-1:7071', 'https://x/path', 'ftp://x', 'unix:relative.sock', 'https://x?y', ''].map((v): [string, string, RegExp] => [
      'LEMNISCATE_EXEC_HOST_ADVERTISE_URL',
      v,
      /^LEMNISCATE_EXEC_HOST_ADVERTISE_URL must be an https:\/\/ or http:\/\/ origin/,
    ]),
    ...['0', '301', '1.5', 'x', '-1', ''].map((v): [string, string, RegExp] => [
      'LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS',
      v,
      /^LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS must be a whole number of seconds between 1 and 300/,
    ]),
    ...['gw.example', 'ftp://gw', 'https://u:p@gw', 'https://gw/?x=1', 'not a url'].map((v): [string, string, RegExp] => [
      'LEMNISCATE_GATEWAY_URL',
      v,
      /^LEMNISCATE_GATEWAY_URL must be the gateway's http:\/\/ or https:\/\/ URL/,
    ]),
  ];
  it.each(bad)('refuses %s=%j with a sentence naming it', (variable, value, pattern) => {
    expect(refusal({ LEMNISCATE_GATEWAY_URL: 'https://gw.example', [variable]: value })).toMatch(pattern);
  });

  it('refuses an unreadable or misplaced LEMNISCATE_GATEWAY_CA', () => {
    expect(refusal({ LEMNISCATE_GATEWAY_URL: 'https://gw.example', LEMNISCATE_GATEWAY_CA: path.join(scratch, 'absent.pem') })).toMatch(
      /^LEMNISCATE_GATEWAY_CA names .* which cannot be read \(ENOENT\)/,
    );
    expect(refusal({ LEMNISCATE_GATEWAY_URL: 'https://gw.example', LEMNISCATE_GATEWAY_CA: path.join(scratch, 'not-pem.txt') })).toMatch(/^LEMNISCATE_GATEWAY_CA names .* which is not a PEM file/);
    expect(refusal({ LEMNISCATE_GATEWAY_CA: certs.good.ca })).toMatch(/^LEMNISCATE_GATEWAY_CA is set without LEMNISCATE_GATEWAY_URL/);
    expect(refusal({ LEMNISCATE_GATEWAY_URL: 'http://127.0.0.1:7070', LEMNISCATE_GATEWAY_CA: certs.good.ca })).toMatch(/^LEMNISCATE_GATEWAY_CA is set but LEMNISCATE_GATEWAY_URL .* is not https:\/\//);
  });
});

describe('the warm pool', () => {
  it('keeps 2 per kind, both runtimes warm from start-up and reads a checked-out ref every 10 s by default', () => {
    const { warmPool } = load({});
    expect(warmPool).toMatchObject({ size: 2, runtimes: ['runc', 'runsc'], refCheckSeconds: 10 });
    expect(load({ LEMNISCATE_EXEC_HOST_WARM_POOL: '0' }).warmPool.size).toBe(0);
    expect(load({ LEMNISCATE_EXEC_HOST_WARM_RUNTIMES: ' runsc ,runsc' }).warmPool.runtimes).toEqual(['runsc']);
    expect(load({ LEMNISCATE_EXEC_HOST_WARM_RUNTIMES: '' }).warmPool.runtimes).toEqual([]);
    expect(load({ LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS: '0.5' }).warmPool.refCheckSeconds).toBe(0.5);
    expect(load({ LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS: '3600' }).warmPool.refCheckSeconds).toBe(3600);
  });

  it.each(['-1', '65', '1.5', 'two', ''])('refuses LEMNISCATE_EXEC_HOST_WARM_POOL=%p in a sentence', (bad) => {
    expect(refusal({ LEMNISCATE_EXEC_HOST_WARM_POOL: bad })).toBe(
      `LEMNISCATE_EXEC_HOST_WARM_POOL must be the number of warm sandboxes kept per kind, a whole number from 0 (no pool) to 64, not "${bad}".`,
    );
  });

  it.each(['docker', 'runc,kata', 'RUNC'])('refuses LEMNISCATE_EXEC_HOST_WARM_RUNTIMES=%p, naming the runtime it does not know', (bad) => {
    expect(refusal({ LEMNISCATE_EXEC_HOST_WARM_RUNTIMES: bad })).toMatch(
      /^LEMNISCATE_EXEC_HOST_WARM_RUNTIMES lists runtimes kept warm from start-up, separated by commas \(runc, runsc, or empty for none\), not "(docker|kata|RUNC)"\.$/,
    );
  });

  it.each(['0', '0.1', '-5', '86401', '10s', 'often', ''])('refuses LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS=%p in a sentence', (bad) => {
    expect(refusal({ LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS: bad })).toBe(
      `LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS must be how often, in seconds, the ref of a repository kept checked out ahead is read for a new commit, a number between 0.5 and 86400, not "${bad}".`,
    );
  });
});
