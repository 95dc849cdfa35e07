import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { startMirrors, type Mirrors } from '../support/mirrors';

/**
 * The package mirrors the environment tests use (test/support/mirrors), checked from the host with
 * the fixture projects: npm ci of node-project takes every locked package from the npm mirror and its
 * tests pass, and a later mirror serves it again from its storage alone; pip installs python-project's requirements from the simple index into a virtual
 * environment and pytest passes; what a mirror does not have fails with the tool's own sentence;
 * neither listens on loopback; close() leaves nothing answering.
 */

const ROOT = path.resolve(__dirname, '../..');
const FIXTURES = path.join(ROOT, 'test/fixtures/environments');
/** Debian's Python (with python3-venv, which `npm run setup -- --tests` installs), not a pyenv shim on PATH. */
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** This machine's environment without npm's and pip's settings: only what a test sets reaches the tools. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm_|PIP_)/i.test(k)));
  return { ...env, PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', NO_COLOR: '1', ...extra };
}

function run(cmd: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The exit code, and everything the command printed when it failed (a failure reads as its output). */
const outcome = (r: Result) => ({ code: r.code, output: r.code === 0 ? '' : `${r.stdout}\n${r.stderr}` });
const OK = { code: 0, output: '' };

function connect(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.setTimeout(3000, () => (s.destroy(), resolve('timeout')));
    s.once('connect', () => (s.end(), resolve('connected')));
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}

let mirrors: Mirrors;
let work: string;

/** A copy of a fixture project with the placeholders of its devcontainer filled, as the e2e test makes it. */
function fixture(name: string, as = name): string {
  const dir = path.join(work, as);
  fs.cpSync(path.join(FIXTURES, name), dir, { recursive: true });
  const dc = path.join(dir, '.devcontainer/devcontainer.json');
  const text = fs.readFileSync(dc, 'utf8');
  fs.writeFileSync(
    dc,
    text.replaceAll('__NPM_MIRROR__', mirrors.npm).replaceAll('__PYPI_MIRROR__', mirrors.pypi).replaceAll('__MIRROR_HOST__', mirrors.host).replaceAll('__SANDBOX_IMAGE__', 'unused'),
  );
  return dir;
}

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'lemniscate-mirrors-'));
  mirrors = await startMirrors();
}, 300_000);

afterAll(async () => {
  await mirrors?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

it('both listen on an address that is not loopback, and nothing of theirs answers on loopback', async () => {
  const npm = new URL(mirrors.npm);
  const pypi = new URL(mirrors.pypi);
  expect([npm.hostname, pypi.hostname]).toEqual([mirrors.host, mirrors.host]);
  expect(mirrors.host).not.toMatch(/^127\./);
  expect(pypi.pathname).toBe('/simple/');
  expect(await connect('127.0.0.1', Number(npm.port))).toBe('ECONNREFUSED');
  expect(await connect('127.0.0.1', Number(pypi.port))).toBe('ECONNREFUSED');
  expect((await fetch(`${mirrors.npm}-/ping`)).status).toBe(200);
});

describe('the npm mirror', () => {
  let project: string;
  beforeAll(() => {
    project = fixture('node-project');
  });

  it("node-project's tests fail before its dependencies are installed", async () => {
    const r = await run('npm', ['test'], { cwd: project, env: cleanEnv() });
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toContain("Cannot find module 'express'");
  });

  it('npm ci installs every locked package from the mirror alone, and npm test passes', async () => {
    const lock = JSON.parse(fs.readFileSync(path.join(project, 'package-lock.json'), 'utf8')) as { lockfileVersion: number; packages: Record<string, unknown> };
    const locked = Object.keys(lock.packages).filter((k) => k.startsWith('node_modules/'));
    expect(lock.lockfileVersion).toBe(3);
    expect(locked.length).toBeGreaterThanOrEqual(50);

    // A fresh npm cache: every package comes over the network, and from the mirror only.
    const env = cleanEnv({ npm_config_registry: mirrors.npm, npm_config_cache: fs.mkdtempSync(path.join(work, 'npm-cache-')) });
    const ci = await run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=http'], { cwd: project, env });
    expect(outcome(ci)).toEqual(OK);
    const fetched = [...ci.stderr.matchAll(/^npm http fetch GET (\d+) (\S+)/gm)].map((m) => ({ status: m[1]!, url: m[2]! }));
    expect(fetched.filter((f) => !f.url.startsWith(mirrors.npm))).toEqual([]);
    expect(fetched.filter((f) => f.status !== '200')).toEqual([]);
    expect(fetched.filter((f) => f.url.endsWith('.tgz'))).toHaveLength(locked.length);
    expect(mirrors.requests.npm.some((u) => /\/express\/-\/express-[\d.]+\.tgz$/.test(u))).toBe(true);

    const test = await run('npm', ['test'], { cwd: project, env: cleanEnv() });
    expect(outcome(test)).toEqual(OK);
    expect(test.stdout).toMatch(/^# pass [1-9]/m);
    expect(test.stdout).toMatch(/^# fail 0$/m);
  });

  it('what it fetched is kept: a second mirror on the same storage serves the same npm ci with its upstream unreachable', async () => {
    const saved = process.env.LEMNISCATE_NPM_UPLINK;
    process.env.LEMNISCATE_NPM_UPLINK = 'http://127.0.0.1:9/';
    let offline: Mirrors | undefined;
    try {
      offline = await startMirrors();
      const copy = fixture('node-project', 'node-project-offline');
      const env = cleanEnv({ npm_config_registry: offline.npm, npm_config_cache: fs.mkdtempSync(path.join(work, 'npm-cache-')) });
      expect(outcome(await run('npm', ['ci', '--no-audit', '--no-fund'], { cwd: copy, env }))).toEqual(OK);
      expect(fs.existsSync(path.join(copy, 'node_modules/express/package.json'))).toBe(true);
    } finally {
      if (saved === undefined) delete process.env.LEMNISCATE_NPM_UPLINK;
      else process.env.LEMNISCATE_NPM_UPLINK = saved;
      await offline?.close();
    }
  });

  it('a package the registry does not have is a 404 from the mirror, and publishing is refused', async () => {
    const name = `lemniscate-no-such-package-${crypto.randomBytes(6).toString('hex')}`;
    const r = await run('npm', ['view', name, 'version'], { cwd: work, env: cleanEnv({ npm_config_registry: mirrors.npm, npm_config_cache: fs.mkdtempSync(path.join(work, 'npm-cache-')) }) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('E404');
    expect(r.stderr).toContain(`${mirrors.npm}${name}`);

    const publish = await fetch(`${mirrors.npm}${name}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, versions: {} }) });
    expect([401, 403]).toContain(publish.status);
  });
});

describe('the Python mirror', () => {
  /** `name==version` pins of python-project/requirements.txt. */
  const pins = () =>
    Object.fromEntries(
      fs
        .readFileSync(path.join(FIXTURES, 'python-project/requirements.txt'), 'utf8')
        .split('\n')
        .map((l) => /^([\w.-]+)==(\S+)/.exec(l.trim()))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => [m[1]!, m[2]!]),
    );

  it('is a PEP 503 simple index: projects by normalized name, files with their sha256', async () => {
    const index = await (await fetch(mirrors.pypi)).text();
    for (const p of ['pytest', 'six', 'pluggy', 'iniconfig', 'packaging', 'attrs']) expect(index).toContain(`/simple/${p}/">${p}</a>`);
    const pagePath = `${mirrors.pypi}pytest/`;
    const page = await (await fetch(pagePath)).text();
    const link = /<a href="([^"#]+)#sha256=([0-9a-f]{64})">(pytest-[^<]+-py3-none-any\.whl)<\/a>/.exec(page);
    expect(link?.[3]).toBe(`pytest-${pins().pytest}-py3-none-any.whl`);
    const wheel = Buffer.from(await (await fetch(new URL(link![1]!, pagePath))).arrayBuffer());
    expect(crypto.createHash('sha256').update(wheel).digest('hex')).toBe(link![2]);
    expect(wheel.subarray(0, 4)).toEqual(Buffer.from('PK\x03\x04', 'latin1'));
    expect((await fetch(`${mirrors.pypi}no-such-project/`)).status).toBe(404);
  });

  describe('python-project', () => {
    let project: string;
    let pip: string;
    const pipEnv = () => cleanEnv({ PIP_INDEX_URL: mirrors.pypi, PIP_TRUSTED_HOST: mirrors.host });

    beforeAll(async () => {
      project = fixture('python-project');
      expect(outcome(await run(PYTHON, ['-m', 'venv', '.venv'], { cwd: project, env: cleanEnv() }))).toEqual(OK);
      pip = path.join(project, '.venv/bin/pip');
    });

    it('pip installs requirements.txt and their dependencies from the mirror, and pytest -q passes', async () => {
      const r = await run(pip, ['install', '--no-cache-dir', '-r', 'requirements.txt'], { cwd: project, env: pipEnv() });
      expect(outcome(r)).toEqual(OK);
      expect(r.stdout).toContain(`Looking in indexes: ${mirrors.pypi}`);
      expect(r.stdout).not.toContain('Looking in links');
      const downloads = [...r.stdout.matchAll(/Downloading (\S+\.whl)/g)].map((m) => m[1]!);
      expect(downloads.length).toBeGreaterThan(Object.keys(pins()).length); // the pins and what they require
      expect(downloads.filter((u) => !u.startsWith(`http://${new URL(mirrors.pypi).host}/files/`))).toEqual([]);
      const installed = /Successfully installed (.*)/.exec(r.stdout)?.[1]?.split(' ') ?? [];
      for (const [name, version] of Object.entries(pins())) expect(installed).toContain(`${name}-${version}`);

      const test = await run(path.join(project, '.venv/bin/pytest'), ['-q', '-p', 'no:cacheprovider'], { cwd: project, env: cleanEnv({ PYTHONDONTWRITEBYTECODE: '1' }) });
      expect(outcome(test)).toEqual(OK);
      expect(test.stdout).toMatch(/^\d+ passed in /m);
    });

    it('a package or a version the mirror does not have fails with pip’s clear sentence', async () => {
      const missing = await run(pip, ['install', '--no-cache-dir', 'lemniscate-no-such-package'], { cwd: project, env: pipEnv() });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('No matching distribution found for lemniscate-no-such-package');

      const version = await run(pip, ['install', '--no-cache-dir', 'pytest==99.0'], { cwd: project, env: pipEnv() });
      expect(version.code).toBe(1);
      expect(version.stderr).toContain(`(from versions: ${pins().pytest})`);
      expect(version.stderr).toContain('No matching distribution found for pytest==99.0');
    });
  });
});

it('close() stops both mirrors: nothing answers on their ports afterwards', async () => {
  const ports = [Number(new URL(mirrors.npm).port), Number(new URL(mirrors.pypi).port)];
  await mirrors.close();
  for (const port of ports) expect(await connect(mirrors.host, port)).toBe('ECONNREFUSED');
});
