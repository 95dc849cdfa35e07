import type { SandboxInfo } from '@lemniscate/contracts';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import request from 'supertest';
import { createExecHost } from '../../src/app';
import { loadConfig } from '../../src/config';
import { probeLayout } from '../../src/driver/cgroups';
import { DockerSandboxDriver } from '../../src/driver/docker.driver';
import { containersOfSession, dockerInspectStatus, git, makeRepo, mountedUnder, run, startHost, TOKEN, type TestHost } from '../support/helpers';

jest.setTimeout(120_000);

describe('exec-host API: authentication, bad input and leftovers (runc)', () => {
  let t: TestHost;
  let repo: { dir: string; head: string };
  const sid = (name: string) => `api-${name}-${process.pid}`;

  beforeAll(async () => {
    repo = makeRepo();
    t = await startHost();
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(repo.dir, { recursive: true, force: true });
  });

  const server = () => t.host.app.getHttpServer();

  it.each([
    ['no token', undefined],
    ['a wrong token', 'Bearer not-the-token-at-all-000'],
    ['the token under another scheme', `Basic ${TOKEN}`],
    ['a prefix of the token', `Bearer ${TOKEN.slice(0, -1)}`],
  ])('answers 401 without detail to %s, on every route, unknown ones included', async (_label, header) => {
    for (const [method, url] of [
      ['get', '/v1/health'],
      ['get', '/v1/sandboxes'],
      ['post', '/v1/sandboxes'],
      ['delete', '/v1/sandboxes/x'],
      ['get', '/v1/nope'],
    ] as const) {
      let req = request(server())[method](url);
      if (header) req = req.set('authorization', header);
      const res = await req;
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ code: 'unauthorized', message: 'Authentication required.' });
    }
  });

  it('answers liveness on /healthz (token required like everything else)', async () => {
    expect((await t.api().get('/healthz')).body).toEqual({ status: 'ok' });
    expect((await request(server()).get('/healthz')).status).toBe(401);
  });

  it('reports its health', async () => {
    const res = await t.api().get('/v1/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'ok',
      engine: { reachable: true },
      runtimes: { runc: true, runsc: true },
      image: { present: true },
      seccomp: { valid: true },
      diskCap: { mechanism: 'ext4-loop', available: true },
      // The layout this host has (LEMNISCATE_CGROUP_LAYOUT unset: auto); only the engine layer says what is weaker.
      cgroups: { layout: probeLayout('/').layout },
      sandboxes: 0,
    });
    expect(['enforced', 'unavailable']).toContain(res.body.apparmor.state);
    expect(res.body.cgroups.message === undefined).toBe(res.body.cgroups.layout !== 'engine');
  });

  it('answers 400 naming the field for malformed bodies', async () => {
    const bad = await t
      .api()
      .post('/v1/sandboxes')
      .send({ repository: { source: repo.dir }, runtime: 'kata' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('invalid_request');
    expect(bad.body.message).toMatch(/sessionId is required/);
    expect(bad.body.message).toMatch(/runtime/);
    const json = await t.api().post('/v1/sandboxes').set('content-type', 'application/json').send('{"sessionId":');
    expect(json.status).toBe(400);
    expect(json.body).toMatchObject({ code: 'invalid_request', message: 'The request body must be valid JSON.' });
    const limits = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: sid('x'), repository: { source: repo.dir }, limits: { memoryMb: 1 } });
    expect(limits.status).toBe(400);
    expect(limits.body.message).toMatch(/limits\.memoryMb/);
  });

  it('answers 404 with a sentence for an unknown sandbox, and DELETE of one is success', async () => {
    for (const [method, url, body] of [
      ['get', '/v1/sandboxes/sbx-missing', undefined],
      ['post', '/v1/sandboxes/sbx-missing/exec', { command: 'true' }],
      ['post', '/v1/sandboxes/sbx-missing/files/read', { path: 'a' }],
      ['get', '/v1/sandboxes/sbx-missing/changes', undefined],
      ['get', '/v1/sandboxes/sbx-missing/patch', undefined],
    ] as const) {
      const res = body ? await t.api()[method](url).send(body) : await t.api()[method](url);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ code: 'sandbox_not_found', message: 'There is no sandbox sbx-missing on this exec-host.' });
    }
    const del = await t.api().delete('/v1/sandboxes/sbx-missing');
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ sandboxId: 'sbx-missing', destroyed: false });
  });

  it.each([
    ['a path that does not exist', '/nonexistent/repository', 'repository_not_found', /does not exist/],
    ['a relative path', 'relative/repo', 'repository_not_found', /absolute path/],
    ['an unsupported protocol', 'ftp://example.test/repo.git', 'repository_not_found', /protocol/],
    ['a directory that is not a repository', os.tmpdir(), 'repository_not_found', /not a git repository/],
  ])('refuses %s with 400 and leaves nothing running', async (_label, source, code, message) => {
    const sessionId = sid(`bad-${code}-${source.length}`);
    const res = await t.api().post('/v1/sandboxes').send({ sessionId, repository: { source } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe(code);
    expect(res.body.message).toMatch(message);
    expect(containersOfSession(sessionId)).toEqual([]);
    expect(fs.readdirSync(path.join(t.stateDir, 'sandboxes'))).toEqual([]);
    expect(mountedUnder(t.stateDir)).toEqual([]);
  });

  it('refuses an unknown ref with 400 after cleaning up the disk it had prepared', async () => {
    const sessionId = sid('badref');
    const res = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId, repository: { source: repo.dir, ref: 'no-such-branch' } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'repository_ref_not_found', message: expect.stringContaining('"no-such-branch"') });
    expect(containersOfSession(sessionId)).toEqual([]);
    expect(fs.readdirSync(path.join(t.stateDir, 'sandboxes'))).toEqual([]);
    expect(mountedUnder(t.stateDir)).toEqual([]);
  });

  it("includes the developer's uncommitted patch, and separates it from the session's own changes", async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-dirty-'));
    git(work, 'clone', '-q', repo.dir, '.');
    fs.appendFileSync(path.join(work, 'README.md'), 'local edit\n');
    const uncommittedPatch = git(work, 'diff', '--binary', 'HEAD');
    const res = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: sid('dirty'), repository: { source: repo.dir, ref: 'main' }, uncommittedPatch });
    expect(res.status).toBe(201);
    const sbx = res.body as SandboxInfo;
    expect(sbx.includedUncommitted).toBe(true);
    expect((await run(t, sbx.sandboxId, 'cat README.md')).stdout).toBe('# demo\nlocal edit\n');
    expect((await t.api().get(`/v1/sandboxes/${sbx.sandboxId}/changes`)).body.files).toEqual([]);
    await run(t, sbx.sandboxId, 'echo agent > agent.txt');
    await t
      .api()
      .post(`/v1/sandboxes/${sbx.sandboxId}/changes/accept`)
      .send({ paths: ['agent.txt'] });
    const patch = (await t.api().get(`/v1/sandboxes/${sbx.sandboxId}/patch`)).body;
    expect(patch.patch).toContain('+local edit');
    expect(patch.patch).toContain('+agent');
    expect(patch.sessionPatch).not.toContain('local edit');
    expect(patch.sessionPatch).toContain('+agent');
    // the developer applies the session's part on their own dirty tree
    fs.writeFileSync(path.join(work, 's.patch'), patch.sessionPatch);
    git(work, 'apply', 's.patch');
    expect(fs.readFileSync(path.join(work, 'agent.txt'), 'utf8')).toBe('agent\n');
    const bad = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: sid('dirty2'), repository: { source: repo.dir }, uncommittedPatch: 'diff --git a/nope b/nope\n--- a/nope\n+++ b/nope\n@@ -1 +1 @@\n-x\n+y\n' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('uncommitted_patch_does_not_apply');
    expect(containersOfSession(sid('dirty2'))).toEqual([]);
    fs.rmSync(work, { recursive: true, force: true });
    await t.api().delete(`/v1/sandboxes/${sbx.sandboxId}`);
  });

  it('gives one session one sandbox', async () => {
    const first = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: sid('one'), repository: { source: repo.dir } });
    expect(first.status).toBe(201);
    const second = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: sid('one'), repository: { source: repo.dir } });
    expect(second.status).toBe(409);
    expect(second.body.code).toBe('session_has_sandbox');
    const list = await t.api().get('/v1/sandboxes');
    expect(list.body.sandboxes.map((s: SandboxInfo) => s.sessionId)).toEqual([sid('one')]);
    await t.api().delete(`/v1/sandboxes/${first.body.sandboxId}`);
  });

  it('reaps containers and working directories that no live sandbox owns', async () => {
    const orphanName = `lemniscate-orphan-${process.pid}`;
    execFileSync('docker', [
      'run',
      '-d',
      '--name',
      orphanName,
      '--network',
      'none',
      '--label',
      'lemniscate.managed=1',
      '--label',
      `lemniscate.session=${sid('orphan')}`,
      '--label',
      `lemniscate.exec-host=${t.config.instance}`,
      '--label',
      'lemniscate.sandbox=sbx-dead',
      t.config.image,
      'sleep',
      'infinity',
    ]);
    const foreign = `lemniscate-foreign-${process.pid}`;
    execFileSync('docker', [
      'run',
      '-d',
      '--name',
      foreign,
      '--network',
      'none',
      '--label',
      'lemniscate.managed=1',
      '--label',
      'lemniscate.exec-host=someone-else',
      t.config.image,
      'sleep',
      'infinity',
    ]);
    const strayDir = path.join(t.stateDir, 'sandboxes', 'sbx-stray');
    fs.mkdirSync(path.join(strayDir, 'work'), { recursive: true });
    try {
      const report = await t.host.reaper.reap();
      expect(report).toMatchObject({ containers: 1, directories: 1 });
      expect(dockerInspectStatus(orphanName)).toBeNull();
      expect(fs.existsSync(strayDir)).toBe(false);
      expect(dockerInspectStatus(foreign)).toBe('running');
    } finally {
      execFileSync('docker', ['rm', '-f', orphanName, foreign], { stdio: 'ignore' });
    }
  });

  it('destroys a sandbox past its lifetime', async () => {
    const res = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: sid('old'), repository: { source: repo.dir }, limits: { lifetimeMinutes: 1 } });
    const sbx = res.body as SandboxInfo;
    expect(t.host.sandboxes.expired()).toEqual([]);
    const expired = t.host.sandboxes.expired(Date.parse(sbx.expiresAt) + 1);
    expect(expired).toEqual([sbx.sandboxId]);
    jest.spyOn(t.host.sandboxes, 'expired').mockReturnValueOnce(expired);
    expect(await t.host.reaper.reap()).toMatchObject({ expired: 1 });
    expect((await t.api().get(`/v1/sandboxes/${sbx.sandboxId}`)).status).toBe(404);
    expect(containersOfSession(sid('old'))).toEqual([]);
  });
});

describe('exec-host start-up', () => {
  it('refuses to start with an invalid seccomp profile, in one sentence', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-bad-seccomp-'));
    const profile = path.join(dir, 'seccomp.json');
    fs.writeFileSync(profile, JSON.stringify({ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [] }));
    const config = loadConfig({
      LEMNISCATE_EXEC_HOST_TOKEN: TOKEN,
      LEMNISCATE_EXEC_HOST_STATE_DIR: dir,
      LEMNISCATE_EXEC_HOST_WARM_POOL: '0',
      LEMNISCATE_SECCOMP_PROFILE: profile,
      LEMNISCATE_SECCOMP_SCHEMA: path.join(__dirname, '../../../../images/sandbox/seccomp.schema.json'),
    });
    await expect(createExecHost(config, new DockerSandboxDriver(), { logger: false })).rejects.toThrow(/^The exec-host will not start: The seccomp profile .* does not match its schema/);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
