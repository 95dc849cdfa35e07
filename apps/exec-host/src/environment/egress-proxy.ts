import * as http from 'node:http';
import * as net from 'node:net';
import * as fs from 'node:fs/promises';

/**
 * The only way out of a set-up container: an HTTP proxy the exec-host serves on a unix socket bound
 * into the container (which has no network interface but loopback). It opens connections from the
 * exec-host to the administrator's mirrors and to nothing else: a CONNECT or a request to any other
 * host or port is refused with 403 and logged. Names are resolved here, never in the container.
 */

export interface Mirror {
  host: string;
  port: number;
}

/** The host:port pairs the mirrors' URLs name (lower-case host, the scheme's port when none is given). */
export function mirrorsOf(urls: readonly string[]): Mirror[] {
  return urls.map((u) => {
    const url = new URL(u);
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    return { host, port: url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80 };
  });
}

function allowed(mirrors: readonly Mirror[], host: string, port: number): boolean {
  const h = host
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');
  return mirrors.some((m) => m.host === h && m.port === port);
}

/** `host:port` of a CONNECT target; null when it is not one. */
export function parseAuthority(authority: string): { host: string; port: number } | null {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s/]+):(\d{1,5})$/.exec(authority);
  if (!m) return null;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return null;
  return { host: m[1]!, port };
}

export interface EgressProxy {
  socketPath: string;
  /** Connections refused so far, as "host:port". */
  refused: string[];
  close(): Promise<void>;
}

export async function startEgressProxy(socketPath: string, mirrors: readonly Mirror[], log: (line: string) => void): Promise<EgressProxy> {
  const refused: string[] = [];
  const sockets = new Set<net.Socket>();
  const refuse = (what: string) => {
    refused.push(what);
    log(`egress: refused ${what}: not a mirror of this project`);
  };
  const server = http.createServer((req, res) => {
    // Plain-HTTP mirrors: the request names an absolute URL.
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('The egress proxy forwards absolute http:// URLs and CONNECT only.\n');
      return;
    }
    const port = url.port ? Number(url.port) : 80;
    if (url.protocol !== 'http:' || !allowed(mirrors, url.hostname, port)) {
      refuse(`${url.hostname}:${port}`);
      res
        .writeHead(403, { 'content-type': 'text/plain' })
        .end(`${url.hostname}:${port} is not a package mirror of this project; only the mirrors in the policy's environment.mirrors are reachable.\n`);
      return;
    }
    const headers = { ...req.headers };
    delete headers['proxy-connection'];
    delete headers['proxy-authorization'];
    const upstream = http.request({ host: url.hostname, port, method: req.method, path: `${url.pathname}${url.search}`, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    upstream.on('error', (e) => {
      log(`egress: ${url.hostname}:${port} failed: ${e.message}`);
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`The mirror ${url.hostname}:${port} could not be reached: ${e.message}\n`);
    });
    req.pipe(upstream);
  });
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const target = parseAuthority(req.url ?? '');
    if (!target || !allowed(mirrors, target.host, target.port)) {
      refuse(req.url ?? '(nothing)');
      client.end('HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\nnot a package mirror of this project\n');
      return;
    }
    const upstream = net.connect({ host: target.host.replace(/^\[|\]$/g, ''), port: target.port });
    sockets.add(upstream);
    upstream.once('close', () => sockets.delete(upstream));
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', (e) => {
      log(`egress: ${target.host}:${target.port} failed: ${e.message}`);
      client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
    });
    client.on('error', () => upstream.destroy());
  });
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await fs.rm(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  // The set-up runs as the sandbox user, which must be able to connect.
  await fs.chmod(socketPath, 0o666);
  return {
    socketPath,
    refused,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await fs.rm(socketPath, { force: true });
    },
  };
}

/**
 * Runs inside the set-up container (with the image's node): listens on 127.0.0.1:PORT, the proxy the
 * set-up's tools are told about, and carries each connection to the exec-host's unix socket. It adds
 * no reach: whatever it forwards, the proxy on the other side decides.
 */
export const FORWARDER_SCRIPT = `'use strict';
const net = require('net');
const [socketPath, port] = [process.argv[2], Number(process.argv[3])];
net.createServer((c) => {
  const u = net.connect(socketPath);
  c.pipe(u); u.pipe(c);
  u.on('error', () => c.destroy()); c.on('error', () => u.destroy());
}).listen(port, '127.0.0.1');
`;
