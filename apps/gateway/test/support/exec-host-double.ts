import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A loopback HTTP server speaking the exec-host's control API for the two calls the gateway makes
 * in this issue (health, destroy), with its bearer-token check. It records what it was asked.
 */
export interface ExecHostDouble {
  url: string;
  token: string;
  destroyed: string[];
  close(): Promise<void>;
}

export async function startExecHostDouble(token = 'exec-host-test-token'): Promise<ExecHostDouble> {
  const destroyed: string[] = [];
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${token}`) return send(401, { code: 'unauthorized', message: 'A valid token is required.' });
    const m = /^\/v1\/sandboxes\/([^/]+)$/.exec(req.url ?? '');
    if (req.method === 'DELETE' && m?.[1]) {
      const id = decodeURIComponent(m[1]);
      destroyed.push(id);
      return send(200, { sandboxId: id, destroyed: true });
    }
    if (req.method === 'GET' && req.url === '/v1/health') {
      return send(200, {
        status: 'ok',
        engine: { reachable: true, version: '27.0' },
        runtimes: { runc: true, runsc: false },
        image: { name: 'lemniscate/sandbox', present: true },
        seccomp: { path: '/etc/lemniscate/seccomp.json', valid: true },
        apparmor: { state: 'unavailable', profile: 'lemniscate-sandbox' },
        diskCap: { mechanism: 'ext4-loop', available: true },
        sandboxes: 0,
      });
    }
    return send(404, { code: 'internal', message: 'no such route' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    destroyed,
    close: () => new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve()))),
  };
}
