// The package mirrors of the environment tests, on this machine: an npm mirror (Verdaccio, forwarding to
// the registry npm uses here) and a Python simple index (PEP 503) of wheels built from Debian's packages.
// Both listen on an address that is not loopback: a container with no network cannot reach them, the
// exec-host's egress proxy (on the host) can.
import { spawnSync } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureWheels } from './wheels.mjs';
import { startPypiIndex } from './pypi-index.mjs';
import { startVerdaccio } from './verdaccio.mjs';

/** The address of the Docker bridge (docker0), also while it is down (Node lists only interfaces that are up). */
function dockerBridgeAddress() {
  const listed = (os.networkInterfaces().docker0 ?? []).find((a) => a.family === 'IPv4');
  if (listed) return listed.address;
  const r = spawnSync('ip', ['-4', '-o', 'addr', 'show', 'dev', 'docker0'], { encoding: 'utf8' });
  return r.status === 0 ? (/\binet (\d+\.\d+\.\d+\.\d+)\//.exec(r.stdout)?.[1] ?? null) : null;
}

/** The Docker bridge's address when there is one, else the first IPv4 address that is not internal. */
export function defaultHost() {
  const bridge = dockerBridgeAddress();
  if (bridge) return bridge;
  for (const list of Object.values(os.networkInterfaces())) {
    const address = (list ?? []).find((a) => a.family === 'IPv4' && !a.internal)?.address;
    if (address) return address;
  }
  throw new Error('This machine has no IPv4 address other than loopback for the package mirrors to listen on.');
}

/** Where the mirrors keep what outlives a run: Verdaccio's storage and the built wheels. */
export function cacheDir() {
  return process.env.LEMNISCATE_CACHE_DIR || path.join(os.homedir(), '.cache', 'lemniscate');
}

/** The registry npm uses on this machine (`npm config get registry`). */
export function upstreamRegistry() {
  const r = spawnSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' });
  const url = r.status === 0 ? r.stdout.trim() : '';
  return /^https?:\/\//.test(url) ? (url.endsWith('/') ? url : `${url}/`) : 'https://registry.npmjs.org/';
}

/**
 * Starts both mirrors. Returns { host, npm, pypi, pypiHost, upstream, wheels, cacheDir, close() }:
 * `npm` is the registry URL (…/), `pypi` the simple index (…/simple/), `pypiHost` its host:port
 * (what pip's --trusted-host takes for an index served over plain HTTP).
 */
export async function startMirrors({ host = defaultHost(), log = () => {}, logLevel } = {}) {
  const cache = cacheDir();
  const { dir, wheels } = ensureWheels({ cacheDir: cache, log });
  const upstream = upstreamRegistry();
  const pypi = await startPypiIndex({ host, dir, wheels });
  let npm;
  try {
    npm = await startVerdaccio({ host, dir: path.join(cache, 'verdaccio'), upstream, logLevel });
  } catch (err) {
    await pypi.close();
    throw err;
  }
  return {
    host,
    npm: npm.url,
    pypi: pypi.url,
    pypiHost: new URL(pypi.url).host,
    upstream,
    cacheDir: cache,
    wheels: wheels.map(({ name, version, filename }) => ({ name, version, filename })),
    close: async () => {
      await Promise.all([npm.close(), pypi.close()]);
    },
  };
}
