import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export { prepareFixture, FIXTURES_DIR, type FixtureName, type FixtureValues } from './fixtures';

/**
 * Real package mirrors on this machine for the environment tests: an npm mirror (Verdaccio forwarding
 * to the registry npm uses here, its storage kept in `<cacheDir>/verdaccio`) and a Python simple
 * index (PEP 503) of wheels built from Debian's packages (kept in `<cacheDir>/pypi-wheels`). Both
 * listen on an address that is not loopback (the Docker bridge's by default): a container with no
 * network cannot reach them, the exec-host's egress proxy on the host can.
 *
 * They run in a child process (`serve.mjs`), which stops when close() is called or when this process
 * goes away (its standard input closes), so a test that dies leaves nothing running.
 */
export interface Mirrors {
  /** The address both listen on. */
  host: string;
  /** The npm registry URL, ending in `/`: `http://172.17.0.1:PORT/`. */
  npm: string;
  /** The simple index URL, ending in `/simple/`. */
  pypi: string;
  /** host:port of the simple index: pip ignores an index served over plain HTTP unless this is trusted (PIP_TRUSTED_HOST). */
  pypiHost: string;
  /** The registry Verdaccio forwards to (`npm config get registry`). */
  upstream: string;
  /** Where Verdaccio's storage and the wheels live (`~/.cache/lemniscate` unless LEMNISCATE_CACHE_DIR says otherwise). */
  cacheDir: string;
  /** What the simple index serves. */
  wheels: { name: string; version: string; filename: string }[];
  /** Stops both mirrors and waits until their process has exited. Safe to call twice. */
  close(): Promise<void>;
}

export interface StartMirrorsOptions {
  /** The address to listen on (default: docker0's address, else the first non-internal IPv4 address). */
  host?: string;
  /** How long to wait for both to answer; a first run builds the wheels and may install Debian packages. */
  timeoutMs?: number;
}

const SERVE = path.join(__dirname, 'serve.mjs');
const SYSTEM_CA = '/etc/ssl/certs/ca-certificates.crt';

export async function startMirrors(opts: StartMirrorsOptions = {}): Promise<Mirrors> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // The uplink reaches the registry through whatever proxy this machine uses: trust the system's CA store.
  if (!env.NODE_EXTRA_CA_CERTS && fs.existsSync(SYSTEM_CA)) env.NODE_EXTRA_CA_CERTS = SYSTEM_CA;
  const child = spawn(process.execPath, [SERVE, ...(opts.host ? ['--host', opts.host] : [])], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => {
    stderr = (stderr + d).slice(-64 * 1024);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const info = await new Promise<Omit<Mirrors, 'close'>>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`The package mirrors did not answer within ${Math.round((opts.timeoutMs ?? 300_000) / 1000)} s:\n${stderr}`));
    }, opts.timeoutMs ?? 300_000);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{"ready":true'));
      if (!line) return;
      clearTimeout(timer);
      const { ready: _ready, ...parsed } = JSON.parse(line) as Omit<Mirrors, 'close'> & { ready: true };
      resolve(parsed);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`The package mirrors exited (${signal ?? `code ${code}`}) before they were ready:\n${stderr}`));
    });
  });
  child.stdout.resume();

  let closing: Promise<void> | null = null;
  return {
    ...info,
    close: () => {
      closing ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
          await exited;
          clearTimeout(timer);
        }
        child.stdin.destroy();
      })();
      return closing;
    },
  };
}
