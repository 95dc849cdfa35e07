import type { EnvironmentStatus, SandboxInfo } from '@lemniscate/contracts';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { git, run, startHost, type TestHost } from '../support/helpers';

/**
 * Project environments on a real engine: a devcontainer at the default ref is built from the sandbox
 * image, its set-up reaches the project's mirror through the exec-host's egress proxy and nothing
 * else, what it installs comes back in every session of the project without the network and without
 * appearing in the session's changes; unchanged inputs are not prepared twice, a changed lock file
 * is, a broken set-up fails with its log and sessions are refused with a sentence.
 */
jest.setTimeout(600_000);

/** An address of this host that is not loopback: a container without network cannot reach it, the exec-host can. */
function hostAddress(): string {
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  throw new Error('this host has no non-loopback IPv4 address');
}

function listen(server: http.Server, host: string): Promise<number> {
  return new Promise((resolve) => server.listen(0, host, () => resolve((server.address() as AddressInfo).port)));
}

/** The set-up's probe: fetches the dependency through the proxy and records what else it could reach. */
const SETUP_JS = `
const http = require('http'), net = require('net'), dns = require('dns'), fs = require('fs');
const [mirror, other] = [process.env.MIRROR_URL, process.env.OTHER_URL];
const viaProxy = (url) => new Promise((resolve) => {
  const req = http.request({ host: '127.0.0.1', port: 3128, path: url, headers: { host: new URL(url).host } }, (res) => {
    let body = ''; res.on('data', (d) => (body += d)); res.on('end', () => resolve({ status: res.statusCode, body }));
  });
  req.on('error', (e) => resolve({ error: e.code })); req.end();
});
const direct = (url) => new Promise((resolve) => {
  const u = new URL(url); const s = net.connect({ host: u.hostname, port: Number(u.port) });
  s.setTimeout(3000, () => { s.destroy(); resolve('timeout'); });
  s.on('connect', () => { s.destroy(); resolve('connected'); }); s.on('error', (e) => resolve(e.code));
});
(async () => {
  const dep = await viaProxy(mirror + 'dep.js');
  const probes = {
    mirror: dep.status, other: (await viaProxy(other + 'x')).status,
    directMirror: await direct(mirror), dns: await new Promise((r) => dns.lookup('registry.npmjs.org', (e) => r(e ? e.code : 'resolved'))),
    ca: ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'PIP_CERT'].map((v) => process.env[v] && fs.readFileSync(process.env[v], 'utf8').includes('BEGIN CERTIFICATE')),
  };
  fs.mkdirSync('node_modules/dep', { recursive: true });
  fs.writeFileSync('node_modules/dep/index.js', dep.body);
  fs.writeFileSync('setup-probes.json', JSON.stringify(probes));
  if (dep.status !== 200) process.exit(4);
})();
`;

const DEVCONTAINER = (setup: string, extra = '') => `// The project's environment (JSON with comments).
{
  "name": "demo",
  "build": { "dockerfile": "Dockerfile" },
  "containerEnv": { "GREETING": "hello from the environment", "HTTPS_PROXY": "http://evil.example:1" },
  "forwardPorts": [3000],
  "postCreateCommand": ${JSON.stringify(setup)},${extra}
}
`;

describe('project environments (runc set-up; sessions under runc and runsc)', () => {
  let t: TestHost;
  let repo: string;
  let mirror: http.Server;
  let other: http.Server;
  let mirrorUrl: string;
  let otherUrl: string;
  const requested: string[] = [];

  const envReq = () => ({ projectId: 'prj-env', repository: { source: repo, ref: 'main' }, runtime: 'runc' as const, mirrors: [mirrorUrl], setupTimeoutSeconds: 300 });
  const status = async (): Promise<EnvironmentStatus> => {
    const res = await t.api().post('/v1/environments/status').send(envReq());
    expect(res.status).toBe(200);
    return res.body as EnvironmentStatus;
  };
  const until = async (pred: (s: EnvironmentStatus) => boolean): Promise<EnvironmentStatus> => {
    for (let i = 0; i < 600; i++) {
      const s = await status();
      if (pred(s)) return s;
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error('the environment never reached the expected state');
  };
  const commit = (files: Record<string, string>, message: string) => {
    for (const [name, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(repo, name)), { recursive: true });
      fs.writeFileSync(path.join(repo, name), content);
    }
    git(repo, 'add', '-A');
    git(repo, 'commit', '-q', '-m', message);
  };
  const logOf = async (jobId: string) => (await t.api().get(`/v1/environments/jobs/${jobId}/log?offset=0`)).body as { text: string; complete: boolean };
  const sandbox = async (session: string, runtime: 'runc' | 'runsc' = 'runc') =>
    t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: session, repository: { source: repo, ref: 'work' }, runtime, environment: envReq() });

  beforeAll(async () => {
    const host = hostAddress();
    mirror = http.createServer((req, res) => {
      requested.push(req.url ?? '');
      res.end("module.exports = 'from the mirror';\n");
    });
    other = http.createServer((_req, res) => res.end('should never be read'));
    mirrorUrl = `http://${host}:${await listen(mirror, host)}/`;
    otherUrl = `http://${host}:${await listen(other, host)}/`;
    repo = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-env-repo-'));
    git(repo, 'init', '-q', '-b', 'main');
    commit(
      {
        '.gitignore': 'node_modules/\n',
        'package.json': '{ "name": "demo", "version": "1.0.0" }\n',
        'package-lock.json': '{ "lockfileVersion": 3, "packages": {} }\n',
        'index.js': "console.log(require('dep'));\n",
        '.devcontainer/Dockerfile': 'ARG LEMNISCATE_SANDBOX_IMAGE\nFROM ${LEMNISCATE_SANDBOX_IMAGE}\nLABEL demo=1\n',
        '.devcontainer/setup.js': SETUP_JS,
        '.devcontainer/devcontainer.json': DEVCONTAINER('node .devcontainer/setup.js'),
      },
      'initial',
    );
    // Sessions work on another branch; the environment comes from the default ref (main).
    git(repo, 'branch', 'work');
    // The CA bundle of mirrors behind a TLS-intercepting proxy reaches the set-up.
    t = await startHost({ LEMNISCATE_EGRESS_CA_BUNDLE: '/etc/ssl/certs/ca-certificates.crt' });
    // The set-up is told where the mirrors are through its own variables (containerEnv is read from main).
    commit(
      {
        '.devcontainer/devcontainer.json': DEVCONTAINER('node .devcontainer/setup.js', `\n  "updateContentCommand": "echo MIRROR_URL=$MIRROR_URL",`).replace(
          '"GREETING"',
          `"MIRROR_URL": "${mirrorUrl}", "OTHER_URL": "${otherUrl}", "GREETING"`,
        ),
      },
      'mirrors',
    );
  });

  afterAll(async () => {
    await t?.host.environments.settled();
    await t?.close();
    mirror?.close();
    other?.close();
    fs.rmSync(repo, { recursive: true, force: true });
    execFileSync('sh', ['-c', 'docker images -q --filter label=lemniscate.environment | xargs -r docker rmi -f >/dev/null 2>&1 || true']);
  });

  let key: string;
  let firstJob: string;

  it('reads the devcontainer at the default ref: not prepared yet, unsupported and reserved keys listed as warnings', async () => {
    const s = await status();
    expect(s.state).toBe('not_prepared');
    expect(s.key).toMatch(/^[0-9a-f]{64}$/);
    expect(s.devcontainer?.warnings).toEqual(
      expect.arrayContaining([expect.stringContaining('"forwardPorts" is not supported'), expect.stringContaining('"containerEnv.HTTPS_PROXY" is set by the platform')]),
    );
    expect(s.devcontainer?.setupCommands).toEqual(['updateContentCommand: echo MIRROR_URL=$MIRROR_URL', 'postCreateCommand: node .devcontainer/setup.js']);
    expect(s.message).toMatch(/has not been prepared yet/);
    key = s.key!;
  });

  it('refuses a session while the environment is not prepared, with a sentence, leaving nothing behind', async () => {
    const res = await sandbox('env-refused');
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('environment_not_ready');
    expect(res.body.message).toMatch(/has not been prepared yet/);
    expect((await t.api().get('/v1/sandboxes')).body.sandboxes).toEqual([]);
  });

  it('prepares it: builds from the sandbox image, runs the set-up with the mirror as its only way out', async () => {
    const res = await t
      .api()
      .post('/v1/environments/prepare')
      .send({ ...envReq(), force: false });
    expect(res.status).toBe(202);
    expect(res.body.state).toBe('preparing');
    // A second request joins the same job.
    const again = await t.api().post('/v1/environments/prepare').send(envReq());
    expect(again.body.job.jobId).toBe(res.body.job.jobId);
    const s = await until((x) => x.state !== 'preparing');
    const log = await logOf(s.job!.jobId);
    expect({ state: s.state, message: s.message, log: s.state === 'ready' ? '' : log.text }).toEqual({ state: 'ready', message: expect.stringContaining('is ready'), log: '' });
    expect(s.job).toMatchObject({ state: 'ready', phase: 'done', key });
    expect(log.complete).toBe(true);
    expect(log.text).toContain('$ node .devcontainer/setup.js');
    expect(log.text).toContain(`MIRROR_URL=${mirrorUrl}`);
    expect(log.text).toMatch(/egress: refused .*not a mirror of this project/);
    expect(requested).toContain('/dep.js');
    firstJob = s.job!.jobId;
  });

  let info: SandboxInfo;
  it('starts a session from it: the dependencies are there, the environment variables set, nothing of it in the changes', async () => {
    const res = await sandbox('env-session');
    expect({ status: res.status, body: res.status === 201 ? null : res.body }).toEqual({ status: 201, body: null });
    info = res.body as SandboxInfo;
    expect(info.environment?.key).toBe(key);
    expect((await run(t, info.sandboxId, 'node index.js')).stdout).toBe('from the mirror\n');
    expect((await run(t, info.sandboxId, 'echo "$GREETING|$HTTPS_PROXY"')).stdout).toBe('hello from the environment|\n');
    const probes = JSON.parse((await run(t, info.sandboxId, 'cat setup-probes.json')).stdout) as Record<string, unknown>;
    // From the set-up: the mirror through the proxy, and nothing else (no other host, no route, no DNS).
    expect(probes).toEqual({
      mirror: 200,
      other: 403,
      directMirror: expect.stringMatching(/ENETUNREACH|EHOSTUNREACH|timeout/),
      dns: expect.stringMatching(/EAI_AGAIN|ENOTFOUND/),
      ca: [true, true, true],
    });
    expect((await t.api().get(`/v1/sandboxes/${info.sandboxId}/changes`)).body.files).toEqual([]);
    await run(t, info.sandboxId, "echo 'console.log(1)' > added.js && echo more >> node_modules/dep/index.js");
    expect((await t.api().get(`/v1/sandboxes/${info.sandboxId}/changes`)).body.files.map((f: { path: string }) => f.path)).toEqual(['added.js']);
    expect((await t.api().get(`/v1/sandboxes/${info.sandboxId}/patch`)).body.patch).not.toMatch(/node_modules|setup-probes/);
  });

  it("the agent's sandbox from that environment has no network: no route to the mirror, no proxy, no DNS", async () => {
    const probe = `node -e "
      const net = require('net'), dns = require('dns'); const u = new URL('${mirrorUrl}');
      const s = net.connect({ host: u.hostname, port: Number(u.port) }); s.setTimeout(3000, () => { console.log('mirror timeout'); process.exit(0); });
      s.on('connect', () => console.log('mirror connected')); s.on('error', (e) => console.log('mirror', e.code));
      const p = net.connect({ host: '127.0.0.1', port: 3128 }); p.on('error', (e) => console.log('proxy', e.code)); p.on('connect', () => console.log('proxy connected'));
      dns.lookup('registry.npmjs.org', (e) => console.log('dns', e ? e.code : 'resolved'));
    "; ls /run/lemniscate 2>&1 | head -1`;
    const out = (await run(t, info.sandboxId, probe)).stdout;
    expect(out).toMatch(/mirror (ENETUNREACH|EHOSTUNREACH|timeout)/);
    expect(out).toMatch(/proxy ECONNREFUSED/);
    expect(out).toMatch(/dns (EAI_AGAIN|ENOTFOUND)/);
    expect(out).toMatch(/No such file or directory/);
    await t.api().delete(`/v1/sandboxes/${info.sandboxId}`);
  });

  it('under runsc too: the same environment, the dependencies there', async () => {
    const res = await sandbox('env-runsc', 'runsc');
    expect(res.status).toBe(201);
    expect((await run(t, res.body.sandboxId, 'node index.js')).stdout).toBe('from the mirror\n');
    await t.api().delete(`/v1/sandboxes/${res.body.sandboxId}`);
  });

  it("a gVisor project's set-up runs under gVisor (runsc-setup) and reaches the mirror the same way; its environment is its own", async () => {
    const runscReq = { ...envReq(), runtime: 'runsc' as const };
    const before = (await t.api().post('/v1/environments/status').send(runscReq)).body as EnvironmentStatus;
    expect(before.state).toBe('not_prepared');
    expect(before.key).not.toBe(key);
    await t.api().post('/v1/environments/prepare').send(runscReq);
    let s = before;
    for (let i = 0; i < 600 && (s.state === 'not_prepared' || s.state === 'preparing'); i++) {
      await new Promise((r) => setTimeout(r, 500));
      s = (await t.api().post('/v1/environments/status').send(runscReq)).body as EnvironmentStatus;
    }
    expect({ state: s.state, message: s.message }).toEqual({ state: 'ready', message: expect.stringContaining('is ready') });
    const log = (await logOf(s.job!.jobId)).text;
    expect(log).toMatch(/egress: refused/);
    const res = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: 'env-runsc-project', repository: { source: repo, ref: 'work' }, runtime: 'runsc', environment: runscReq });
    expect(res.status).toBe(201);
    const probes = JSON.parse((await run(t, res.body.sandboxId, 'cat setup-probes.json')).stdout) as Record<string, unknown>;
    expect(probes).toMatchObject({ mirror: 200, other: 403 });
    expect(probes.directMirror).not.toBe('connected');
    expect(probes.dns).not.toBe('resolved');
    await t.api().delete(`/v1/sandboxes/${res.body.sandboxId}`);
  });

  it('prepares nothing again for unchanged inputs, even after another commit to other files', async () => {
    commit({ 'README.md': '# demo\n' }, 'docs');
    const before = requested.length;
    const res = await t.api().post('/v1/environments/prepare').send(envReq());
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ state: 'ready', key, job: { jobId: firstJob } });
    expect(requested.length).toBe(before);
  });

  it('a changed lock file is a new environment: not prepared, then prepared once', async () => {
    commit({ 'package-lock.json': '{ "lockfileVersion": 3, "packages": { "": {} } }\n' }, 'lock');
    const s = await status();
    expect(s.state).toBe('not_prepared');
    expect(s.key).not.toBe(key);
    await t.api().post('/v1/environments/prepare').send(envReq());
    const done = await until((x) => x.state !== 'preparing');
    expect(done.state).toBe('ready');
    expect(done.job!.jobId).not.toBe(firstJob);
    key = done.key!;
  });

  it('a broken set-up fails the preparation with its log; sessions are told, not crashed', async () => {
    commit({ '.devcontainer/devcontainer.json': DEVCONTAINER('echo "cannot install: no such package" >&2; exit 3') }, 'broken');
    await t.api().post('/v1/environments/prepare').send(envReq());
    const s = await until((x) => x.state !== 'preparing');
    expect(s.state).toBe('failed');
    expect(s.message).toMatch(/postCreateCommand .* failed with exit code 3/);
    expect((await logOf(s.job!.jobId)).text).toContain('cannot install: no such package');
    const res = await sandbox('env-after-failure');
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(/failed: postCreateCommand/);
    // A failed preparation is not retried by asking again, only with force or a change.
    const again = await t.api().post('/v1/environments/prepare').send(envReq());
    expect(again.body).toMatchObject({ state: 'failed', job: { jobId: s.job!.jobId } });
  });

  it('an image that does not derive from the sandbox image is refused: an environment adds files, never replaces the sandbox', async () => {
    execFileSync('sh', ['-c', 'tar -cf - --files-from /dev/null | docker import - lemniscate-test/unrelated:1 >/dev/null']);
    commit({ '.devcontainer/devcontainer.json': '{ "image": "lemniscate-test/unrelated:1", "postCreateCommand": "true" }' }, 'unrelated');
    await t.api().post('/v1/environments/prepare').send(envReq());
    const s = await until((x) => x.state !== 'preparing');
    expect(s.state).toBe('failed');
    expect(s.message).toMatch(/does not derive from the sandbox image/);
    execFileSync('docker', ['rmi', '-f', 'lemniscate-test/unrelated:1']);
  });

  it.each([
    ['invalid JSON', '{ "image": ', /not valid JSON with comments/],
    ['an image not on this host', '{ "image": "nowhere/missing:1" }', /is not on this exec-host/],
    ['a build context outside the repository', '{ "build": { "dockerfile": "Dockerfile", "context": "../.." } }', /points outside the repository/],
    ['both image and build', '{ "image": "a", "build": { "dockerfile": "Dockerfile" } }', /either "image" or "build"/],
  ])('a devcontainer with %s: the status says why, preparing is refused with 422, sessions with 409', async (_what, text, why) => {
    commit({ '.devcontainer/devcontainer.json': text }, 'bad devcontainer');
    const s = await status();
    expect({ state: s.state, message: s.message }).toEqual({ state: 'failed', message: expect.stringMatching(why) });
    const prep = await t.api().post('/v1/environments/prepare').send(envReq());
    expect({ status: prep.status, code: prep.body.code }).toEqual({ status: 422, code: 'environment_invalid' });
    expect((await sandbox('env-invalid')).status).toBe(409);
  });

  it('a repository without a devcontainer keeps the sandbox image', async () => {
    git(repo, 'rm', '-q', '-r', '.devcontainer');
    git(repo, 'commit', '-q', '-m', 'no environment');
    const s = await status();
    expect(s).toMatchObject({ state: 'base', key: null, devcontainer: null });
    const res = await sandbox('env-base');
    expect(res.status).toBe(201);
    expect(res.body.environment).toEqual({ key: null, image: t.config.image });
    await t.api().delete(`/v1/sandboxes/${res.body.sandboxId}`);
  });

  it('keeps a bounded number of prepared environments per project and removes their built images', async () => {
    const removed = await t.host.environments.collectGarbage('prj-env', 1);
    expect(removed.length).toBeGreaterThanOrEqual(1);
    const left = fs.readdirSync(path.join(t.stateDir, 'environments', 'prepared'));
    const ready = left.filter((k) => JSON.parse(fs.readFileSync(path.join(t.stateDir, 'environments', 'prepared', k, 'meta.json'), 'utf8')).state === 'ready');
    expect(ready.length).toBeLessThanOrEqual(1);
  });

  it('answers 404 with a sentence for a job it does not know, and 400 for a bad offset', async () => {
    const res = await t.api().get('/v1/environments/jobs/env-nope/log');
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 404, code: 'job_not_found' });
    expect((await t.api().get(`/v1/environments/jobs/${firstJob}/log?offset=-1`)).status).toBe(400);
  });
});
