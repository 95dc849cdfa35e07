import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { mirrorsOf, parseAuthority, startEgressProxy, type EgressProxy } from '../../../src/environment/egress-proxy';

/** Sends raw bytes to the proxy's unix socket and returns what comes back before it closes or within a second. */
function raw(socketPath: string, text: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(socketPath);
    let out = '';
    s.on('data', (d) => {
      out += d.toString();
      if (out.includes('\r\n\r\n') && out.startsWith('HTTP/1.1 200 Connection')) {
        s.write('GET /through HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
      }
    });
    s.on('close', () => resolve(out));
    s.on('error', () => resolve(out));
    setTimeout(() => {
      s.destroy();
      resolve(out);
    }, 2000);
    s.write(text);
  });
}

describe('egress proxy: the set-up reaches the mirrors and nothing else', () => {
  let dir: string;
  let proxy: EgressProxy;
  let mirror: http.Server;
  let other: http.Server;
  let mirrorPort: number;
  let otherPort: number;
  const lines: string[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-egress-'));
    mirror = http.createServer((req, res) => res.end(`mirror saw ${req.url}`));
    other = http.createServer((_req, res) => res.end('other'));
    await new Promise<void>((r) => mirror.listen(0, '127.0.0.1', () => r()));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    mirrorPort = (mirror.address() as AddressInfo).port;
    otherPort = (other.address() as AddressInfo).port;
    proxy = await startEgressProxy(path.join(dir, 'egress.sock'), mirrorsOf([`http://127.0.0.1:${mirrorPort}/simple/`]), (l) => lines.push(l));
  });
  afterAll(async () => {
    await proxy.close();
    mirror.close();
    other.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('names the mirrors by host and port, with the scheme default', () => {
    expect(mirrorsOf(['https://Registry.NPMjs.org/', 'http://10.0.0.1:4873/x', 'http://[::1]:80/'])).toEqual([
      { host: 'registry.npmjs.org', port: 443 },
      { host: '10.0.0.1', port: 4873 },
      { host: '::1', port: 80 },
    ]);
  });

  it.each(['example.com:443', '[::1]:80', 'a.b:1'])('parses CONNECT target %s', (a) => expect(parseAuthority(a)).not.toBeNull());
  it.each(['example.com', 'example.com:0', 'example.com:70000', 'a b:1', 'http://x:1', ''])('refuses CONNECT target %s', (a) => expect(parseAuthority(a)).toBeNull());

  it('forwards a plain request to a mirror', async () => {
    const out = await raw(proxy.socketPath, `GET http://127.0.0.1:${mirrorPort}/simple/pkg/ HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n`);
    expect(out).toMatch(/^HTTP\/1.1 200/);
    expect(out).toContain('mirror saw /simple/pkg/');
  });

  it('tunnels a CONNECT to a mirror', async () => {
    const out = await raw(proxy.socketPath, `CONNECT 127.0.0.1:${mirrorPort} HTTP/1.1\r\nhost: 127.0.0.1:${mirrorPort}\r\n\r\n`);
    expect(out).toContain('200 Connection Established');
    expect(out).toContain('mirror saw /through');
  });

  // Every way of naming something that is not a mirror: another port, another host, the same host by another name, a non-http scheme.
  it.each([
    ['another port of the mirror host', (p: number) => `GET http://127.0.0.1:${p}/ HTTP/1.1\r\nhost: x\r\n\r\n`],
    ['CONNECT to another port', (p: number) => `CONNECT 127.0.0.1:${p} HTTP/1.1\r\nhost: x\r\n\r\n`],
    ['CONNECT by another name of the host', () => `CONNECT localhost:__MIRROR__ HTTP/1.1\r\nhost: x\r\n\r\n`],
    ['a plain request by another name', () => `GET http://localhost:__MIRROR__/ HTTP/1.1\r\nhost: x\r\n\r\n`],
    ['CONNECT to the cloud metadata address', () => `CONNECT 169.254.169.254:80 HTTP/1.1\r\nhost: x\r\n\r\n`],
    ['an ftp URL', () => `GET ftp://127.0.0.1:__MIRROR__/ HTTP/1.1\r\nhost: x\r\n\r\n`],
    ['a relative request (the proxy is not a web server)', () => `GET /etc/passwd HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`],
  ])('refuses %s', async (_what, request) => {
    const before = lines.length;
    const out = await raw(proxy.socketPath, request(otherPort).replace(/__MIRROR__/g, String(mirrorPort)));
    expect(out).toMatch(/^HTTP\/1.1 (403|400)/);
    expect(out).not.toContain('other');
    expect(out).not.toContain('mirror saw');
    if (/^HTTP\/1.1 403/.test(out)) expect(lines.slice(before).join('\n')).toMatch(/refused .*not a mirror of this project/);
  });
});
