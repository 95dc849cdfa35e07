import { execFileSync, spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { prepareFixture, startMirrors, type Mirrors } from '../support/mirrors';

/**
 * The package mirrors the environment tests use, from the host: the fixture projects install their
 * dependencies from them (npm ci from Verdaccio, pip from the simple index) and their tests pass; what
 * a mirror does not have fails with the tool's own clear sentence; nothing listens on loopback; close()
 * leaves nothing answering.
 */

const DEBIAN_PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The machine's environment without npm's and pip's settings: only what each test sets reaches the tools. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(npm_|PIP_)/i.test(k)));
  return { ...env, PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', NO_COLOR: '1', ...extra };
}

function run(cmd: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 150_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The exit code, and everything the command printed when it failed (so a failure reads as its output). */
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
const npmCache = () => fs.mkdtempSync(path.join(work, 'npm-cache-'));

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
  expect(npm.hostname).toBe(mirrors.host);
  expect(pypi.hostname).toBe(mirrors.host);
  expect(mirrors.host).not.toMatch(/^127\./);
  expect(pypi.pathname).toBe('/simple/');
  expect(mirrors.pypiHost).toBe(pypi.host);
  expect(await connect('127.0.0.1', Number(npm.port))).toBe('ECONNREFUSED');
  expect(await connect('127.0.0.1', Number(pypi.port))).toBe('ECONNREFUSED');
  expect((await fetch(`${mirrors.npm}-/ping`)).status).toBe(200);
});

it('prepareFixture fills every placeholder of the devcontainers and commits the project', () => {
  const node = prepareFixture('node-project', path.join(work, 'fill-node'), { mirrors, git: true });
  const nodeDc = fs.readFileSync(path.join(node, '.devcontainer/devcontainer.json'), 'utf8');
  expect(nodeDc).toContain(`"npm_config_registry": "${mirrors.npm}"`);
  expect(fs.readFileSync(path.join(node, '.devcontainer/Dockerfile'), 'utf8')).toMatch(/^ARG LEMNISCATE_SANDBOX_IMAGE\nFROM \$\{LEMNISCATE_SANDBOX_IMAGE\}$/m);
  const python = prepareFixture('python-project', path.join(work, 'fill-python'), { mirrors, sandboxImage: 'lemniscate/sandbox:test' });
  const pythonDc = fs.readFileSync(path.join(python, '.devcontainer/devcontainer.json'), 'utf8');
  expect(pythonDc).toContain('"image": "lemniscate/sandbox:test"');
  expect(pythonDc).toContain(`"PIP_INDEX_URL": "${mirrors.pypi}"`);
  expect(pythonDc).toContain(`"PIP_TRUSTED_HOST": "${mirrors.pypiHost}"`);
  for (const text of [nodeDc, pythonDc]) expect(text).not.toMatch(/__[A-Z_]+__/);
  // Committed, with nothing left over: the tree an exec-host reads at the default ref.
  const git = (args: string[]) => execFileSync('git', args, { cwd: node, encoding: 'utf8' });
  expect(git(['status', '--porcelain'])).toBe('');
  expect(git(['ls-files'])).toContain('.devcontainer/devcontainer.json');
  expect(() => prepareFixture('python-project', path.join(work, 'fill-python-2'), { mirrors })).toThrow(/needs a value for __SANDBOX_IMAGE__/);
});

describe('the npm mirror', () => {
  let project: string;
  beforeAll(() => {
    project = prepareFixture('node-project', path.join(work, 'node-project'), { mirrors });
  });

  it("node-project's tests fail before its dependencies are installed", async () => {
    const r = await run('npm', ['test'], { cwd: project, env: cleanEnv({}) });
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toContain("Cannot find module 'express'");
  });

  it('npm ci installs every locked package from the mirror alone, and npm test passes', async () => {
    const lock = JSON.parse(fs.readFileSync(path.join(project, 'package-lock.json'), 'utf8')) as { lockfileVersion: number; packages: Record<string, unknown> };
    const locked = Object.keys(lock.packages).filter((k) => k.startsWith('node_modules/'));
    expect(lock.lockfileVersion).toBe(3);
    expect(locked.length).toBeGreaterThanOrEqual(50);

    const env = cleanEnv({ npm_config_registry: mirrors.npm, npm_config_cache: npmCache() });
    const ci = await run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=http'], { cwd: project, env });
    expect(outcome(ci)).toEqual(OK);
    // Every request went to the mirror (the lock file's registry.npmjs.org URLs rewritten), one per package.
    const fetched = [...ci.stderr.matchAll(/^npm http fetch GET (\d+) (\S+)/gm)].map((m) => ({ status: m[1]!, url: m[2]! }));
    expect(fetched.filter((f) => !f.url.startsWith(mirrors.npm))).toEqual([]);
    expect(fetched.filter((f) => f.status !== '200')).toEqual([]);
    expect(fetched.filter((f) => f.url.endsWith('.tgz'))).toHaveLength(locked.length);
    expect(fs.readdirSync(path.join(project, 'node_modules'))).toContain('express');

    const test = await run('npm', ['test'], { cwd: project, env: cleanEnv({}) });
    expect(outcome(test)).toEqual(OK);
    expect(test.stdout).toMatch(/^# pass 3$/m);
    expect(test.stdout).toMatch(/^# fail 0$/m);
  });

  it('a package the registry does not have is a 404 from the mirror, and publishing is refused', async () => {
    const name = `lemniscate-no-such-package-${crypto.randomBytes(6).toString('hex')}`;
    const r = await run('npm', ['view', name, 'version'], { cwd: work, env: cleanEnv({ npm_config_registry: mirrors.npm, npm_config_cache: npmCache() }) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('E404');
    expect(r.stderr).toContain(`${mirrors.npm}${name}`);

    const publish = await fetch(`${mirrors.npm}${name}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, versions: {} }) });
    expect([401, 403]).toContain(publish.status);
  });
});

describe('the Python mirror', () => {
  it('is a PEP 503 simple index: projects by normalized name, files with their sha256', async () => {
    const index = await (await fetch(mirrors.pypi)).text();
    for (const p of ['pytest', 'python-dateutil', 'six', 'attrs', 'iniconfig', 'packaging', 'pluggy']) expect(index).toContain(`<a href="${p}/">${p}</a>`);
    const redirect = await fetch(`${mirrors.pypi}Python_DateUtil/`, { redirect: 'manual' });
    expect([redirect.status, redirect.headers.get('location')]).toEqual([301, '/simple/python-dateutil/']);

    const pytest = mirrors.wheels.find((w) => w.name === 'pytest')!;
    const pagePath = `${mirrors.pypi}pytest/`;
    const page = await (await fetch(pagePath)).text();
    const link = /<a href="([^"#]+)#sha256=([0-9a-f]{64})" data-requires-python="&gt;=3\.\d+">([^<]+)<\/a>/.exec(page);
    expect(link?.[3]).toBe(pytest.filename);
    expect(link![1]).toBe(`../../files/${pytest.filename}`);
    const wheel = Buffer.from(await (await fetch(new URL(link![1]!, pagePath))).arrayBuffer());
    expect(crypto.createHash('sha256').update(wheel).digest('hex')).toBe(link![2]);
    expect(wheel.subarray(0, 4)).toEqual(Buffer.from('PK\x03\x04', 'latin1'));

    expect((await fetch(`${mirrors.pypi}no-such-project/`)).status).toBe(404);
    expect(mirrors.wheels.map((w) => w.name).sort()).toEqual(['attrs', 'iniconfig', 'packaging', 'pluggy', 'pytest', 'python-dateutil', 'six']);
  });

  describe('python-project', () => {
    let project: string;
    let pip: string;
    const pipEnv = () => cleanEnv({ PIP_INDEX_URL: mirrors.pypi, PIP_TRUSTED_HOST: mirrors.pypiHost });

    beforeAll(async () => {
      project = prepareFixture('python-project', path.join(work, 'python-project'), { mirrors, sandboxImage: 'unused' });
      const venv = await run(DEBIAN_PYTHON, ['-m', 'venv', '.venv'], { cwd: project, env: cleanEnv({}) });
      expect(outcome(venv)).toEqual(OK);
      pip = path.join(project, '.venv/bin/pip');
    });

    it('pip installs requirements.txt from the mirror (with the dependencies of each), and pytest -q passes', async () => {
      const r = await run(pip, ['install', '--no-cache-dir', '-r', 'requirements.txt'], { cwd: project, env: pipEnv() });
      expect(outcome(r)).toEqual(OK);
      expect(r.stdout).toContain(`Looking in indexes: ${mirrors.pypi}`);
      expect(r.stdout).not.toContain('Looking in links');
      const downloads = [...r.stdout.matchAll(/Downloading (\S+\.whl)/g)].map((m) => m[1]!);
      expect(downloads.filter((u) => !u.startsWith(`http://${mirrors.pypiHost}/files/`))).toEqual([]);
      const installed = /Successfully installed (.*)/.exec(r.stdout)?.[1]?.split(' ').sort();
      expect(installed).toEqual(mirrors.wheels.map((w) => `${w.name}-${w.version}`).sort());

      const test = await run(path.join(project, '.venv/bin/pytest'), ['-q', '-p', 'no:cacheprovider'], { cwd: project, env: cleanEnv({ PYTHONDONTWRITEBYTECODE: '1' }) });
      expect(outcome(test)).toEqual(OK);
      expect(test.stdout).toMatch(/^5 passed in /m);
    });

    it('a package or a version the mirror does not have fails with pip’s clear sentence', async () => {
      const missing = await run(pip, ['install', '--no-cache-dir', 'lemniscate-no-such-package'], { cwd: project, env: pipEnv() });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain('No matching distribution found for lemniscate-no-such-package');

      const version = await run(pip, ['install', '--no-cache-dir', 'pytest==99.0'], { cwd: project, env: pipEnv() });
      expect(version.code).toBe(1);
      expect(version.stderr).toContain(`(from versions: ${mirrors.wheels.find((w) => w.name === 'pytest')!.version})`);
      expect(version.stderr).toContain('No matching distribution found for pytest==99.0');
    });
  });
});

it('close() stops both mirrors: nothing answers on their ports afterwards', async () => {
  const ports = [Number(new URL(mirrors.npm).port), Number(new URL(mirrors.pypi).port)];
  await mirrors.close();
  for (const port of ports) expect(await connect(mirrors.host, port)).toBe('ECONNREFUSED');
  await mirrors.close();
});
