// What the sandbox benchmarks share: the built exec-host (npx tsc -b apps/exec-host) loaded in process,
// their command-line options, an exec-host started on a state directory of its own with its API's
// client, and percentiles.
import { createRequire } from 'node:module';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const require = createRequire(import.meta.url);
export const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const dist = path.join(root, 'apps/exec-host/dist');
if (!fs.existsSync(path.join(dist, 'app.js'))) {
  console.error('Build the exec-host first: npx tsc -b apps/exec-host');
  process.exit(1);
}
export const { createExecHost } = require(path.join(dist, 'app.js'));
export const { loadConfig } = require(path.join(dist, 'config.js'));
export const { DockerSandboxDriver } = require(path.join(dist, 'driver/docker.driver.js'));
export const sandboxDriver = require(path.join(dist, 'driver/sandbox.driver.js'));
export const { SESSION_DEFAULT_PROFILE } = require(path.join(root, 'libs/contracts/dist/index.js'));

/** The value after `--name` on the command line, or `fallback`. */
export function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

/** The p-th percentile (nearest rank) of `xs`. */
export function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/**
 * An exec-host in this process, on a new state directory, listening on a free loopback port; `env`
 * adds to (or overrides) its settings. `api` calls it and throws on a refusal, naming the call;
 * `close` stops it and removes its state directory.
 */
export async function startExecHost(tag, env = {}) {
  const token = `bench-${Math.random().toString(36).slice(2)}-token`;
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `lemni-bench-${tag}-`));
  const config = loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir, LEMNISCATE_EXEC_HOST_PORT: '1', LEMNISCATE_EXEC_HOST_WARM_POOL: '0', ...env });
  const host = await createExecHost(config, new DockerSandboxDriver({ runner: config.commandRunner }), { logger: false });
  host.app.getHttpServer().keepAliveTimeout = 65_000;
  await host.app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${host.app.getHttpServer().address().port}`;
  const api = async (method, url, body) => {
    const res = await fetch(base + url, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
    const json = await res.json();
    if (!res.ok) throw new Error(`${method} ${url} → ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const close = async () => {
    await host.close().catch(() => undefined);
    fs.rmSync(stateDir, { recursive: true, force: true });
  };
  return { host, base, stateDir, token, api, close };
}
