import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError, loadConfig } from '../../../src/config/config';
import { makeTestCerts, type TestCerts } from '../../../../../test/support/certs';

const VARS = ['LEMNISCATE_EXEC_HOST_CLIENT_CERT', 'LEMNISCATE_EXEC_HOST_CLIENT_KEY', 'LEMNISCATE_EXEC_HOST_CA'] as const;
type Var = (typeof VARS)[number];

let certs: TestCerts;
let scratch: string;
let tls: Record<Var, string>;
beforeAll(() => {
  certs = makeTestCerts(['exec-1']);
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-gw-config-'));
  fs.writeFileSync(path.join(scratch, 'not-pem.txt'), 'hello\n');
  fs.writeFileSync(path.join(scratch, 'garbled.pem'), '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
  tls = { LEMNISCATE_EXEC_HOST_CLIENT_CERT: certs.good.gateway.cert, LEMNISCATE_EXEC_HOST_CLIENT_KEY: certs.good.gateway.key, LEMNISCATE_EXEC_HOST_CA: certs.good.ca };
});
afterAll(() => {
  certs.remove();
  fs.rmSync(scratch, { recursive: true, force: true });
});

const refusal = (env: Record<string, string>): string => {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
};

describe('the exec-host address and the client side of mutual TLS', () => {
  it('takes http://, unix:/ and https:// with the three files, read at start', () => {
    expect(loadConfig({}).execHost).toEqual({ url: 'http://127.0.0.1:7071', token: undefined, tls: null });
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_URL: 'unix:/run/lemniscate/exec-host.sock' }).execHost.url).toBe('unix:/run/lemniscate/exec-host.sock');
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_URL: 'https://exec-1:7071/', ...tls }).execHost).toEqual({
      url: 'https://exec-1:7071',
      token: undefined,
      tls: { cert: certs.good.gateway.certPem, key: certs.good.gateway.keyPem, ca: certs.good.caPem },
    });
    // Without an address (a pool gives one per host), the files are read for the hosts to come.
    expect(loadConfig(tls).execHost.tls).not.toBeNull();
  });

  it.each(['unix:relative.sock', 'unix:', 'ftp://exec-1', 'exec-1:7071', 'http//x'])('refuses LEMNISCATE_EXEC_HOST_URL=%s with its name', (url) => {
    expect(refusal({ LEMNISCATE_EXEC_HOST_URL: url })).toMatch(/LEMNISCATE_EXEC_HOST_URL: must be an http:\/\/ or https:\/\/ URL or unix:\/absolute\/path\.sock/);
  });

  it('refuses https:// without a client certificate, and a client certificate for an exec-host that is not https://', () => {
    expect(refusal({ LEMNISCATE_EXEC_HOST_URL: 'https://exec-1:7071' })).toMatch(
      /LEMNISCATE_EXEC_HOST_URL \(https:\/\/exec-1:7071\) is https:\/\/, and an exec-host over TLS requires the gateway's client certificate/,
    );
    for (const url of ['http://127.0.0.1:7071', 'unix:/run/x.sock']) {
      expect(refusal({ LEMNISCATE_EXEC_HOST_URL: url, ...tls })).toMatch(/are set but LEMNISCATE_EXEC_HOST_URL \(.*\) is not https:\/\//);
    }
  });

  // Every strict subset of the three variables.
  const subsets = [1, 2, 3, 4, 5, 6].map((mask) => VARS.filter((_, i) => mask & (1 << i)).join(' + '));
  it.each(subsets)('refuses %s alone, naming what is missing', (label) => {
    const given = label.split(' + ') as Var[];
    const message = refusal({ LEMNISCATE_EXEC_HOST_URL: 'https://exec-1:7071', ...Object.fromEntries(given.map((v) => [v, tls[v]])) });
    expect(message).toMatch(/mutual TLS with exec-hosts needs all three of .*; missing: /);
    const missing = message.slice(message.indexOf('missing:'));
    for (const v of VARS) expect([v, missing.includes(`${v} (`)]).toEqual([v, !given.includes(v)]);
  });

  // Every variable × every way its file can be wrong.
  const wrongs: [string, () => string, RegExp][] = [
    ['missing', () => path.join(scratch, 'absent.pem'), /names .*absent\.pem, which cannot be read \(ENOENT\)\.$/],
    ['a directory', () => scratch, /which cannot be read \(EISDIR\)\.$/],
    ['relative', () => 'certs/x.pem', /must be an absolute path to a PEM file, not "certs\/x\.pem"\.$/],
    ['not PEM', () => path.join(scratch, 'not-pem.txt'), /which is not a PEM file\.$/],
  ];
  it.each(VARS.flatMap((v) => wrongs.map(([what, value, pattern]) => [v, what, value, pattern] as const)))('refuses %s %s with a sentence naming it', (variable, _what, value, pattern) => {
    const message = refusal({ LEMNISCATE_EXEC_HOST_URL: 'https://exec-1:7071', ...tls, [variable]: value() });
    expect(message.startsWith(`The gateway cannot start: ${variable} `)).toBe(true);
    expect(message).toMatch(pattern);
  });

  it("refuses a garbled certificate and a key that is not the certificate's", () => {
    for (const v of ['LEMNISCATE_EXEC_HOST_CLIENT_CERT', 'LEMNISCATE_EXEC_HOST_CA'] as const) {
      expect(refusal({ ...tls, [v]: path.join(scratch, 'garbled.pem') })).toMatch(new RegExp(`^The gateway cannot start: ${v} names .* which holds no readable certificate`));
    }
    expect(refusal({ ...tls, LEMNISCATE_EXEC_HOST_CLIENT_KEY: certs.good.hosts['exec-1']!.key })).toMatch(
      /LEMNISCATE_EXEC_HOST_CLIENT_KEY \(.*\) is not the private key of LEMNISCATE_EXEC_HOST_CLIENT_CERT/,
    );
  });
});
