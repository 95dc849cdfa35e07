import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * Real package mirrors on this machine, for the environment tests: Verdaccio forwarding to the npm
 * registry this machine uses (its storage kept between runs, so a second run downloads nothing),
 * and a PEP 503 simple index of real wheels built from Debian's Python packages (this machine
 * reaches Debian's archive, not PyPI). Both listen on an address of this host that is not loopback:
 * a container without network cannot reach them, the exec-host's egress proxy can.
 */

const ROOT = path.resolve(__dirname, '../../..');
const CACHE = path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'lemniscate');
/** The Debian packages the Python index is seeded from: pytest, its dependencies, and six. */
export const PYTHON_DEBS = ['python3-pytest', 'python3-attr', 'python3-iniconfig', 'python3-packaging', 'python3-pluggy', 'python3-six'];

export interface Mirrors {
  /** The npm registry URL, e.g. http://172.17.0.1:40123/ */
  npm: string;
  /** The Python index URL, e.g. http://172.17.0.1:40124/simple/ */
  pypi: string;
  /** The host address both listen on. */
  host: string;
  /** Paths requested from each, in order (to tell a cached preparation from a new one). */
  requests: { npm: string[]; pypi: string[] };
  close(): Promise<void>;
}

/** The docker0 bridge address when there is one (also while it is down: Node lists only interfaces that are up), else the first non-loopback IPv4 address. */
export function mirrorHost(): string {
  const interfaces = os.networkInterfaces();
  const docker = interfaces.docker0?.find((a) => a.family === 'IPv4')?.address ?? dockerBridgeDown();
  if (docker) return docker;
  for (const list of Object.values(interfaces)) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  throw new Error('This machine has no IPv4 address besides loopback to serve the package mirrors on.');
}

/** docker0's IPv4 address as `ip` reports it, or null (no docker0, or no `ip`). */
function dockerBridgeDown(): string | null {
  const r = spawnSync('ip', ['-4', '-o', 'addr', 'show', 'dev', 'docker0'], { encoding: 'utf8' });
  return r.status === 0 ? (/\binet (\d+\.\d+\.\d+\.\d+)\//.exec(r.stdout)?.[1] ?? null) : null;
}

/** The registry npm uses on this machine (`npm config get registry`), which Verdaccio forwards to. */
function npmRegistry(): string {
  const r = spawnSync('npm', ['config', 'get', 'registry'], { cwd: ROOT, encoding: 'utf8' });
  const url = r.status === 0 ? r.stdout.trim() : '';
  return /^https?:\/\//.test(url) ? url : 'https://registry.npmjs.org/';
}

/** PEP 503: runs of -, _ and . are one -, lower case. */
export function normalizeProject(name: string): string {
  return name.replace(/[-_.]+/g, '-').toLowerCase();
}

/** Wheels of PYTHON_DEBS, built once per set of Debian versions and kept in the cache. */
export function pythonWheels(): string {
  const versions = execFileSync('apt-cache', ['policy', ...PYTHON_DEBS], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => /^\S|Candidate/.test(l))
    .join('|');
  const dir = path.join(CACHE, 'pypi-wheels', createHash('sha256').update(versions).digest('hex').slice(0, 16));
  if (fs.existsSync(path.join(dir, '.complete'))) return dir;
  fs.rmSync(dir, { recursive: true, force: true });
  execFileSync('python3', [path.join(__dirname, 'debian-wheels.py'), dir, ...PYTHON_DEBS], { stdio: ['ignore', 'ignore', 'pipe'] });
  fs.writeFileSync(path.join(dir, '.complete'), versions);
  return dir;
}

function listen(server: http.Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/** A PEP 503 simple index over a directory of wheels. */
async function startSimpleIndex(host: string, wheelDir: string, requests: string[]): Promise<{ url: string; close(): Promise<void> }> {
  const wheels = fs.readdirSync(wheelDir).filter((f) => f.endsWith('.whl'));
  const byProject = new Map<string, { file: string; sha256: string }[]>();
  for (const file of wheels) {
    const project = normalizeProject(file.split('-')[0]!);
    const sha256 = createHash('sha256')
      .update(fs.readFileSync(path.join(wheelDir, file)))
      .digest('hex');
    byProject.set(project, [...(byProject.get(project) ?? []), { file, sha256 }]);
  }
  const page = (title: string, links: string) => `<!DOCTYPE html>\n<html><head><title>${title}</title></head><body>\n${links}</body></html>\n`;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://index');
    requests.push(url.pathname);
    const simple = /^\/simple\/(?:([^/]+)\/)?$/.exec(url.pathname);
    if (simple && !simple[1]) {
      res.writeHead(200, { 'content-type': 'text/html' }).end(page('Simple index', [...byProject.keys()].map((p) => `<a href="/simple/${p}/">${p}</a><br>\n`).join('')));
      return;
    }
    if (simple?.[1]) {
      const files = byProject.get(normalizeProject(simple[1]));
      if (!files) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end(`no project ${simple[1]} in this index\n`);
        return;
      }
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(page(`Links for ${simple[1]}`, files.map((f) => `<a href="/files/${encodeURIComponent(f.file)}#sha256=${f.sha256}">${f.file}</a><br>\n`).join('')));
      return;
    }
    const encoded = /^\/files\/([^/]+\.whl)$/.exec(url.pathname)?.[1];
    const file = encoded === undefined ? undefined : decodeURIComponent(encoded);
    if (file && wheels.includes(file)) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      fs.createReadStream(path.join(wheelDir, file)).pipe(res);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  const port = await listen(server, host);
  return {
    url: `http://${host}:${port}/simple/`,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/** Verdaccio in a child process (it trusts the CA bundle this host trusts, for the uplink). */
async function startVerdaccio(host: string, requests: string[]): Promise<{ url: string; close(): Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-verdaccio-'));
  const storage = path.join(CACHE, 'verdaccio', 'storage');
  fs.mkdirSync(storage, { recursive: true });
  const uplink = (process.env.LEMNISCATE_NPM_UPLINK ?? npmRegistry()).replace(/\/?$/, '/');
  const config = {
    storage,
    self_path: dir,
    uplinks: { npmjs: { url: uplink, timeout: '60s', maxage: '7d', cache: true } },
    packages: {
      '@*/*': { access: '$all', publish: '$authenticated', proxy: 'npmjs' },
      '**': { access: '$all', publish: '$authenticated', proxy: 'npmjs' },
    },
    auth: { htpasswd: { file: path.join(dir, 'htpasswd'), max_users: -1 } },
    web: { enable: false },
    log: { type: 'stdout', format: 'json', level: 'http' },
    server: { keepAliveTimeout: 60 },
  };
  const configPath = path.join(dir, 'config.json');
  fs.writeFileSync(configPath, JSON.stringify(config));
  const probe = http.createServer();
  const port = await listen(probe, host);
  await new Promise<void>((r) => probe.close(() => r()));
  // It stops when its standard input closes: when this process goes away without close() (a killed
  // test run), Verdaccio does not outlive it.
  const script = `process.stdin.on('end', () => process.exit(0)).resume(); require('verdaccio').runServer(${JSON.stringify(configPath)}).then((app) => app.listen(${port}, ${JSON.stringify(host)}, () => console.log('LISTENING')));`;
  const caBundle = ['/etc/ssl/certs/ca-certificates.crt'].find((f) => fs.existsSync(f));
  const child: ChildProcess = spawn(process.execPath, ['-e', script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...(caBundle ? { NODE_EXTRA_CA_CERTS: caBundle } : {}) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let printed = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Verdaccio did not start within 60 s:\n${printed}`)), 60_000);
    child.stdout!.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) {
        if (line.includes('LISTENING')) {
          clearTimeout(timer);
          resolve();
        }
        const m = /"req":\{[^}]*"url":"([^"]+)"/.exec(line) ?? /"url":"([^"]+)"/.exec(line);
        if (m?.[1]) requests.push(m[1]);
      }
      printed = (printed + d.toString()).slice(-8000);
    });
    child.stderr!.on('data', (d: Buffer) => (printed = (printed + d.toString()).slice(-8000)));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`Verdaccio exited (${code}) before listening:\n${printed}`));
    });
  });
  return {
    url: `http://${host}:${port}/`,
    close: async () => {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function startMirrors(opts: { host?: string } = {}): Promise<Mirrors> {
  const host = opts.host ?? mirrorHost();
  const requests = { npm: [] as string[], pypi: [] as string[] };
  const pypi = await startSimpleIndex(host, pythonWheels(), requests.pypi);
  let npm;
  try {
    npm = await startVerdaccio(host, requests.npm);
  } catch (e) {
    await pypi.close();
    throw e;
  }
  return {
    npm: npm.url,
    pypi: pypi.url,
    host,
    requests,
    close: async () => {
      await Promise.all([npm.close(), pypi.close()]);
    },
  };
}
