// The npm mirror: Verdaccio in this process, forwarding to the registry this machine uses (its uplink),
// keeping what it fetched in a storage directory that outlives the run (the next run serves it without
// downloading it again). Anyone may read; nobody may publish; no web interface.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';

const require = createRequire(import.meta.url);
const SYSTEM_CA = '/etc/ssl/certs/ca-certificates.crt';
/** A group no user belongs to: publishing and unpublishing are refused to everyone. */
const NOBODY = 'lemniscate-nobody';

/** The configuration object Verdaccio's runServer takes. */
export function verdaccioConfig({ dir, upstream, logLevel = 'warn' }) {
  const rule = { access: '$all', publish: NOBODY, unpublish: NOBODY, proxy: 'upstream' };
  return {
    self_path: path.join(dir, 'config.yaml'),
    storage: path.join(dir, 'storage'),
    plugins: path.join(dir, 'plugins'),
    web: { enable: false },
    auth: { htpasswd: { file: path.join(dir, 'htpasswd'), max_users: -1 } },
    uplinks: {
      upstream: {
        url: upstream,
        cache: true,
        // Metadata is asked again after maxage; the lock files of the fixtures pin what they need, so a
        // warm cache answers a whole test run without the upstream registry.
        maxage: '12h',
        timeout: '60s',
        max_fails: 10,
        fail_timeout: '10s',
        // The uplink trusts the system's CA store, which holds the certificate of an intercepting proxy
        // an administrator installed (Node's own store does not).
        ...(fs.existsSync(SYSTEM_CA) ? { ca: fs.readFileSync(SYSTEM_CA, 'utf8') } : {}),
      },
    },
    packages: { '@*/*': rule, '**': rule },
    publish: { allow_offline: false },
    server: { keepAliveTimeout: 2 },
    // Verdaccio's "file" log opens its path with pino: file descriptor 2 is this process's stderr (a socket
    // when a parent spawned it, which /dev/stderr cannot open).
    log: { type: 'file', path: 2, format: 'pretty', level: logLevel },
  };
}

/** Starts Verdaccio on `host`, on an ephemeral port. Returns { url, port, close() }. */
export async function startVerdaccio({ host, dir, upstream, logLevel }) {
  fs.mkdirSync(path.join(dir, 'storage'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'plugins'), { recursive: true });
  const { runServer } = require('verdaccio');
  const server = await runServer(verdaccioConfig({ dir, upstream, logLevel }));
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address();
  return {
    port,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
