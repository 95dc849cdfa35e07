import type { ChangesResponse, SandboxInfo, SandboxRuntime } from '@lemniscate/contracts';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DockerSandboxDriver } from '../../src/driver/docker.driver';
import { containersOfSession, dockerInspectStatus, git, makeRepo, mountedUnder, parseNdjson, run, startHost, type TestHost } from './helpers';

/**
 * X3 as a reviewer checks it, with git alone: the hash over `git ls-files -s` of a checkout, the
 * files the sandbox never received left out.
 */
function reviewerFingerprint(checkout: string, excluded: readonly string[]): string {
  const hash = createHash('sha256');
  for (const entry of git(checkout, 'ls-files', '-s', '-z').split('\0').filter(Boolean)) {
    if (!excluded.includes(entry.slice(entry.indexOf('\t') + 1))) hash.update(`${entry}\0`);
  }
  return `sha256:${hash.digest('hex')}`;
}

/** The same operations against the real engine under each runtime (one file per runtime). */
export function sandboxSuite(runtime: SandboxRuntime): void {
  jest.setTimeout(120_000);
  let t: TestHost;
  let repo: { dir: string; head: string };
  const session = (name: string) => `${runtime}-${name}-${process.pid}`;

  beforeAll(async () => {
    process.env.LEMNISCATE_CANARY = 'host-only-value';
    repo = makeRepo();
    t = await startHost();
  });

  afterAll(async () => {
    await t?.close();
    fs.rmSync(repo.dir, { recursive: true, force: true });
  });

  async function create(name: string, extra: Record<string, unknown> = {}): Promise<SandboxInfo> {
    const res = await t
      .api()
      .post('/v1/sandboxes')
      .send({ sessionId: session(name), repository: { source: repo.dir }, runtime, ...extra });
    if (res.status !== 201) throw new Error(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body as SandboxInfo;
  }

  describe(`working copy, commands and file operations (${runtime})`, () => {
    let sbx: SandboxInfo;
    const base = () => `/v1/sandboxes/${sbx.sandboxId}`;
    beforeAll(async () => {
      sbx = await create('main', { limits: { outputCapBytes: 4096, commandTimeoutSeconds: 30 } });
    });

    it('fingerprints the tree at the start as a reviewer recomputes it from the base commit, and the end equals it while nothing is accepted (X3)', async () => {
      const clone = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-clone-'));
      try {
        git(clone, 'clone', '-q', repo.dir, '.');
        git(clone, 'checkout', '-q', sbx.baseCommit);
        expect(reviewerFingerprint(clone, sbx.excluded)).toBe(sbx.fingerprint);
        // With the excluded files counted, it would differ: they are really left out.
        expect(reviewerFingerprint(clone, [])).not.toBe(sbx.fingerprint);
      } finally {
        fs.rmSync(clone, { recursive: true, force: true });
      }
      expect((await t.api().get(`${base()}/patch`)).body.fingerprint).toBe(sbx.fingerprint);
      // A change left by a command and reverted is not kept: the end still equals the start.
      await run(t, sbx.sandboxId, 'echo gone > README.md');
      expect(
        (
          await t
            .api()
            .post(`${base()}/changes/revert`)
            .send({ paths: ['README.md'] })
        ).status,
      ).toBe(200);
      expect((await t.api().get(`${base()}/patch`)).body.fingerprint).toBe(sbx.fingerprint);
    });

    it('records where the working copy stood (X3) and what the exclusions left out (S5)', () => {
      expect(sbx.baseCommit).toBe(repo.head);
      expect(sbx.branch).toBe('main');
      expect(sbx.includedUncommitted).toBe(false);
      expect(sbx.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(sbx.excluded.sort()).toEqual(['.env', 'certs/server.pem', 'config/secrets/db.txt', 'deploy/id_rsa']);
      expect(sbx.runtime).toBe(runtime);
      expect(containersOfSession(session('main'))).toHaveLength(1);
    });

    it('streams stdout and stderr as NDJSON, then the exit status, as uid 10001 in /workspace', async () => {
      const res = await t.api().post(`${base()}/exec`).send({ command: 'id -u; pwd; echo oops >&2; exit 3' });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/application\/x-ndjson/);
      const chunks = parseNdjson(res.text);
      const stdout = chunks
        .filter((c) => c.type === 'stdout')
        .map((c) => (c as { data: string }).data)
        .join('');
      const stderr = chunks
        .filter((c) => c.type === 'stderr')
        .map((c) => (c as { data: string }).data)
        .join('');
      expect(stdout).toBe('10001\n/workspace\n');
      expect(stderr).toBe('oops\n');
      const exit = chunks[chunks.length - 1];
      expect(exit).toMatchObject({ type: 'exit', exitCode: 3, timedOut: false, truncated: false, class: null, classes: [] });
    });

    it('keeps context-excluded files and the bookkeeping out of the sandbox, and carries no host environment', async () => {
      // find, not ls -l: this host's gVisor release refuses coreutils' statx (EINVAL), find does not need it.
      const r = await run(t, sbx.sandboxId, 'find /workspace -printf "%P\\n"; env');
      expect(r.stdout).toMatch(/^README\.md$/m);
      expect(r.stdout).toMatch(/^src\/app\.js$/m);
      expect(r.stdout).not.toMatch(/^\.env$/m);
      expect(r.stdout).not.toMatch(/^\.git/m);
      expect(r.stdout).not.toContain('db.txt');
      expect(r.stdout).not.toContain('id_rsa');
      expect(r.stdout).not.toContain('server.pem');
      expect(r.stdout).not.toContain('host-only-value');
      expect(r.stdout).not.toContain('LEMNISCATE');
    });

    it('kills a command over its time limit together with every process it started', async () => {
      const r = await run(t, sbx.sandboxId, 'sleep 600 & (setsid sleep 700 &); nohup sleep 800 >/dev/null 2>&1 & sleep 900', 1500);
      expect(r).toMatchObject({ timedOut: true, class: 'timeout', exitCode: 137 });
      expect(r.message).toMatch(/time limit/);
      const ps = await run(t, sbx.sandboxId, 'ps -e -o args=');
      expect(ps.stdout).not.toMatch(/sleep (600|700|800|900)/);
    });

    it('kills what a finished command left running in the background', async () => {
      await run(t, sbx.sandboxId, 'nohup sleep 1234 >/dev/null 2>&1 &');
      const ps = await run(t, sbx.sandboxId, 'ps -e -o args=');
      expect(ps.stdout).not.toContain('sleep 1234');
    });

    it('caps the output and marks the cut', async () => {
      const r = await run(t, sbx.sandboxId, 'head -c 100000 /dev/zero | tr "\\0" a; echo done >&2');
      expect(r.truncated).toBe(true);
      expect(r.classes).toContain('output_truncated');
      expect(Buffer.byteLength(r.stdout + r.stderr)).toBeLessThan(4096 + 200);
      expect(r.stdout + r.stderr).toContain('output truncated at the cap of 4096 bytes');
    });

    it('refuses a second command while one runs, with a sentence', async () => {
      const first = t.api().post(`${base()}/exec?stream=false`).send({ command: 'sleep 2' });
      const firstDone = first.then((r) => r);
      // wait until the sandbox reports the command as running
      for (let i = 0; i < 200; i++) {
        const s = await t.api().get(base());
        if (s.body.state === 'busy') break;
        await new Promise((r) => setImmediate(r));
      }
      const second = await t.api().post(`${base()}/exec`).send({ command: 'echo hi' });
      expect(second.status).toBe(409);
      expect(second.body).toMatchObject({ code: 'sandbox_busy', message: expect.stringMatching(/one runs at a time/) });
      expect((await firstDone).status).toBe(200);
    });

    it('reads, lists and searches within bounds', async () => {
      const read = await t.api().post(`${base()}/files/read`).send({ path: 'notes.txt', offset: 1, limit: 2 });
      expect(read.body).toMatchObject({ path: 'notes.txt', content: 'beta\ngamma\n', lines: 2, totalLines: 4, truncated: true });
      const abs = await t.api().post(`${base()}/files/read`).send({ path: '/workspace/README.md' });
      expect(abs.body.content).toBe('# demo\n');
      const list = await t.api().post(`${base()}/files/list`).send({ path: 'src' });
      expect(list.body.entries).toEqual([
        { name: 'app.js', type: 'file', size: 46 },
        { name: 'util.js', type: 'file', size: 35 },
      ]);
      const lit = await t.api().post(`${base()}/files/search`).send({ pattern: 'beta' });
      expect(lit.body.matches).toEqual([
        { path: 'notes.txt', line: 2, text: 'beta' },
        { path: 'notes.txt', line: 4, text: 'beta' },
      ]);
      const re = await t.api().post(`${base()}/files/search`).send({ pattern: 'const [ab] =', regex: true, path: 'src', maxMatches: 1 });
      expect(re.body).toMatchObject({ matches: [{ path: 'src/app.js', line: 1 }], truncated: true, stoppedBy: 'max_matches' });
      const bad = await t.api().post(`${base()}/files/search`).send({ pattern: '(', regex: true });
      expect(bad.status).toBe(400);
      expect(bad.body.code).toBe('invalid_pattern');
    });

    it('stops a pathological regular expression at its time limit instead of hanging', async () => {
      await run(t, sbx.sandboxId, `printf '%s!\\n' "$(head -c 40 /dev/zero | tr '\\0' a)" > evil.txt`);
      const res = await t.api().post(`${base()}/files/search`).send({ pattern: '^(a+)+$', regex: true, path: 'evil.txt' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ truncated: true, stoppedBy: 'time_limit' });
      await t
        .api()
        .post(`${base()}/changes/revert`)
        .send({ paths: ['evil.txt'] });
    });

    it('refuses symlink and ".." escapes with the reason (P6)', async () => {
      await run(t, sbx.sandboxId, 'ln -s /etc/passwd leak && ln -s /etc etcdir && ln -s / rootdir');
      const cases: [string, Record<string, unknown>][] = [
        ['read', { path: 'leak' }],
        ['read', { path: 'etcdir/passwd' }],
        ['read', { path: '../../../../etc/passwd' }],
        ['read', { path: '/etc/passwd' }],
        ['list', { path: 'rootdir' }],
        ['list', { path: 'etcdir' }],
        ['propose-write', { path: 'etcdir/evil', content: 'x' }],
        ['propose-write', { path: '../outside.txt', content: 'x' }],
        ['propose-edit', { path: 'leak', old_string: 'root', new_string: 'toor' }],
        ['search', { pattern: 'root', path: 'etcdir' }],
      ];
      for (const [op, body] of cases) {
        const res = await t.api().post(`${base()}/files/${op}`).send(body);
        expect({ op, body, status: res.status, code: res.body.code }).toEqual({ op, body, status: 403, code: 'outside_working_copy' });
        expect(res.body.message).toMatch(/outside the working copy|symbolic link/);
      }
      const search = await t.api().post(`${base()}/files/search`).send({ pattern: 'root:' });
      expect(search.body.matches).toEqual([]);
      const applied = await t.api().post(`${base()}/files/apply`).send({ diff: 'diff --git a/etcdir/x b/etcdir/x\nnew file mode 100644\n--- /dev/null\n+++ b/etcdir/x\n@@ -0,0 +1 @@\n+pwned\n' });
      expect(applied.status).toBe(403);
      expect(fs.existsSync('/etc/x')).toBe(false);
      await t
        .api()
        .post(`${base()}/changes/revert`)
        .send({ paths: ['leak', 'etcdir', 'rootdir'] });
    });

    it('proposes writes and edits as diffs without touching the tree, then applies the approved one', async () => {
      const w = await t.api().post(`${base()}/files/propose-write`).send({ path: 'docs/new.md', content: 'hello\n' });
      expect(w.body).toEqual({
        path: 'docs/new.md',
        created: true,
        binary: false,
        diff: 'diff --git a/docs/new.md b/docs/new.md\nnew file mode 100644\n--- /dev/null\n+++ b/docs/new.md\n@@ -0,0 +1 @@\n+hello\n',
      });
      expect((await run(t, sbx.sandboxId, 'test -e docs/new.md; echo $?')).stdout).toBe('1\n');
      const e = await t.api().post(`${base()}/files/propose-edit`).send({ path: 'src/app.js', old_string: 'const b = 2;', new_string: 'const b = 3;' });
      expect(e.body.diff).toContain('-const b = 2;\n+const b = 3;\n');
      const notUnique = await t.api().post(`${base()}/files/propose-edit`).send({ path: 'notes.txt', old_string: 'beta', new_string: 'x' });
      expect(notUnique.status).toBe(422);
      expect(notUnique.body).toMatchObject({ code: 'edit_not_unique', message: expect.stringMatching(/occurs 2 times/) });
      const missing = await t.api().post(`${base()}/files/propose-edit`).send({ path: 'notes.txt', old_string: 'delta', new_string: 'x' });
      expect(missing.body.code).toBe('edit_not_found');
      for (const diff of [w.body.diff, e.body.diff]) {
        const a = await t.api().post(`${base()}/files/apply`).send({ diff });
        expect(a.status).toBe(200);
      }
      const seen = await run(t, sbx.sandboxId, 'cat docs/new.md; find docs docs/new.md -maxdepth 0 -printf "%U:%G\\n"; grep "const b" src/app.js; echo more >> docs/new.md');
      expect(seen.stdout).toBe('hello\n10001:10001\n10001:10001\nconst b = 3;\n');
      const stale = await t.api().post(`${base()}/files/apply`).send({ diff: e.body.diff });
      expect(stale.status).toBe(409);
      // docs/new.md now has a change from a command that nobody reviewed: a diff may not land on top of it.
      const over = await t.api().post(`${base()}/files/propose-write`).send({ path: 'docs/new.md', content: 'replaced\n' });
      const refused = await t.api().post(`${base()}/files/apply`).send({ diff: over.body.diff });
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('unreviewed_changes');
      await t
        .api()
        .post(`${base()}/changes/revert`)
        .send({ paths: ['docs/new.md'] });
      expect((await run(t, sbx.sandboxId, 'cat docs/new.md')).stdout).toBe('hello\n');
    });

    it('reports what a command changed, accepts and reverts per file, and yields a patch that git applies', async () => {
      await run(t, sbx.sandboxId, 'echo "// more" >> src/util.js && rm README.md && mv notes.txt notes.md && chmod +x src/app.js && printf "\\0\\1" > blob.bin && echo tmp > scratch.txt');
      const changes = (await t.api().get(`${base()}/changes`)).body as ChangesResponse;
      const summary = Object.fromEntries(changes.files.map((f) => [f.path, [f.status, f.oldPath ?? null, f.binary]]));
      expect(summary).toEqual({
        'README.md': ['deleted', null, false],
        'blob.bin': ['added', null, true],
        'notes.md': ['renamed', 'notes.txt', false],
        'scratch.txt': ['added', null, false],
        'src/app.js': ['mode', null, false],
        'src/util.js': ['modified', null, false],
      });
      const util = changes.files.find((f) => f.path === 'src/util.js')!;
      expect(util.diff).toContain('+// more');
      expect(util.diffBytes).toBe(Buffer.byteLength(util.diff));
      const acc = await t
        .api()
        .post(`${base()}/changes/accept`)
        .send({ paths: ['src/util.js', 'notes.md', 'blob.bin'] });
      expect(acc.body.paths.sort()).toEqual(['blob.bin', 'notes.md', 'notes.txt', 'src/util.js']);
      const rev = await t
        .api()
        .post(`${base()}/changes/revert`)
        .send({ paths: ['README.md', 'scratch.txt', 'src/app.js'] });
      expect(rev.status).toBe(200);
      expect((await t.api().get(`${base()}/changes`)).body.files).toEqual([]);
      const after = await run(t, sbx.sandboxId, 'cat README.md; test -e scratch.txt || echo gone; find src/app.js -printf "%m\\n"; find README.md -printf "%U\\n"');
      expect(after.stdout).toBe('# demo\ngone\n644\n10001\n');
      const none = await t
        .api()
        .post(`${base()}/changes/accept`)
        .send({ paths: ['README.md'] });
      expect(none.status).toBe(404);
      expect(none.body.code).toBe('change_not_found');

      const { patch, baseCommit, fingerprint } = (await t.api().get(`${base()}/patch`)).body as { patch: string; baseCommit: string; fingerprint: string };
      expect(baseCommit).toBe(repo.head);
      expect(fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(fingerprint).not.toBe(sbx.fingerprint);
      const clone = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-clone-'));
      try {
        git(clone, 'clone', '-q', repo.dir, '.');
        git(clone, 'checkout', '-q', baseCommit);
        fs.writeFileSync(path.join(clone, '.lemni.patch'), patch);
        git(clone, 'apply', '--index', '.lemni.patch');
        expect(fs.readFileSync(path.join(clone, 'src/util.js'), 'utf8')).toBe('export const twice = (x) => x * 2;\n// more\n');
        expect(fs.readFileSync(path.join(clone, 'blob.bin'))).toEqual(Buffer.from([0, 1]));
        expect(fs.existsSync(path.join(clone, 'notes.txt'))).toBe(false);
        expect(fs.readFileSync(path.join(clone, 'notes.md'), 'utf8')).toBe('alpha\nbeta\ngamma\nbeta\n');
        // the accepted applied diffs from the previous test are in it too; rejected ones are not
        expect(fs.readFileSync(path.join(clone, 'docs/new.md'), 'utf8')).toBe('hello\n');
        expect(fs.existsSync(path.join(clone, 'scratch.txt'))).toBe(false);
        expect(patch).not.toContain('.env');
        // X3: the end fingerprint is the tree the patch gives on the base commit, recomputed by anyone.
        expect(reviewerFingerprint(clone, sbx.excluded)).toBe(fingerprint);
      } finally {
        fs.rmSync(clone, { recursive: true, force: true });
      }
    });

    // After the patch test: the writes approved here stay in the checkpoint.
    it("keeps a command's pending changes pending across approved writes, and refuses a write in the way of one", async () => {
      const changed = async () => ((await t.api().get(`${base()}/changes`)).body as ChangesResponse).files.map((f) => `${f.status} ${f.path}`);
      const write = async (file: string, content: string) => {
        const proposed = await t.api().post(`${base()}/files/propose-write`).send({ path: file, content });
        expect(proposed.status).toBe(200);
        return t.api().post(`${base()}/files/apply`).send({ diff: proposed.body.diff });
      };
      // Two files of its own in the checkpoint first (earlier tests changed the fixture's).
      expect((await write('mine/a.md', 'a\n')).status).toBe(200);
      expect((await write('mine/b.md', 'b\n')).status).toBe(200);
      await run(t, sbx.sandboxId, 'echo draft > draft.txt && echo more >> mine/a.md && rm mine/b.md');
      const pending = ['added draft.txt', 'modified mine/a.md', 'deleted mine/b.md'];
      expect(await changed()).toEqual(pending);
      // An approved write is staged; what the command changed stays pending, read again or not.
      expect((await write('docs/approved.md', 'approved\n')).status).toBe(200);
      expect(await changed()).toEqual(pending);
      expect((await write('docs/approved-too.md', 'approved\n')).status).toBe(200);
      expect(await changed()).toEqual(pending);
      // A file in the place of the pending deletion's directory would keep that deletion unseen.
      const inTheWay = await write('mine/b.md/inside.md', 'x\n');
      expect(inTheWay.status).toBe(409);
      expect(inTheWay.body).toMatchObject({ code: 'unreviewed_changes', message: expect.stringMatching(/^\/workspace\/mine\/b\.md has changes from a command/) });
      expect(await changed()).toEqual(pending);
      // A written .gitignore changes what is pending elsewhere: the draft is now ignored.
      expect((await write('.gitignore', 'draft.txt\n')).status).toBe(200);
      expect(await changed()).toEqual(['modified mine/a.md', 'deleted mine/b.md']);
      await t
        .api()
        .post(`${base()}/changes/revert`)
        .send({ paths: ['mine/a.md', 'mine/b.md'] });
      expect(await changed()).toEqual([]);
    });
  });

  describe(`resource caps (${runtime})`, () => {
    let sbx: SandboxInfo;
    beforeAll(async () => {
      sbx = await create('caps', { limits: { memoryMb: 256, pids: 64, diskMb: 32, commandTimeoutSeconds: 30 } });
    });

    it('fills the disk cap cleanly and says so', async () => {
      const r = await run(t, sbx.sandboxId, 'dd if=/dev/zero of=big.bin bs=1M count=64');
      expect(r.exitCode).not.toBe(0);
      expect(r.classes).toContain('disk_full');
      expect(r.message).toMatch(/disk cap/);
      const df = await run(t, sbx.sandboxId, 'rm big.bin && python3 -c "import os; s = os.statvfs(\'/workspace\'); print(s.f_blocks * s.f_frsize // 1048576)"');
      expect(Number(df.stdout.trim())).toBeLessThanOrEqual(32);
    });

    it('contains a fork bomb at the process cap and reports it', async () => {
      const bomb = await create('bomb', { limits: { pids: 64, commandTimeoutSeconds: 30 } });
      const r = await run(t, bomb.sandboxId, 'bomb() { bomb | bomb & }; bomb; sleep 3', 8000);
      expect(r.classes).toContain('pids_limit');
      const next = await t.api().post(`/v1/sandboxes/${bomb.sandboxId}/exec?stream=false`).send({ command: 'echo alive; ps -e -o pid= | wc -l' });
      if (runtime === 'runsc' && next.status === 410) {
        // gVisor had no task left to run the kill with: the container was stopped, and the sandbox says so.
        expect(next.body.code).toBe('sandbox_lost');
        expect((await t.api().get(`/v1/sandboxes/${bomb.sandboxId}`)).body.state).toBe('lost');
      } else {
        expect(next.status).toBe(200);
        expect(next.body.stdout.split('\n')[0]).toBe('alive');
        expect(Number(next.body.stdout.split('\n')[1])).toBeLessThan(10);
      }
      await t.api().delete(`/v1/sandboxes/${bomb.sandboxId}`);
    });

    it('reports a memory bomb as oom', async () => {
      const mem = await create('oom', { limits: { memoryMb: 256, commandTimeoutSeconds: 30 } });
      const r = await run(t, mem.sandboxId, 'python3 -c "x = []\nwhile True: x.append(bytearray(16 * 1024 * 1024))"', 20000);
      // S4: the command is stopped and reported, the sandbox lives on: under runc the kernel's OOM
      // killer takes the command (137); under gVisor its allocation fails at the per-command address
      // space cap (withMemoryCap) before gVisor's kernel can exhaust the cgroup.
      expect(r.classes).toEqual(['oom']);
      expect(r.exitCode).toBe(runtime === 'runc' ? 137 : 1);
      expect((await run(t, mem.sandboxId, 'echo alive')).stdout).toBe('alive\n');
      await t.api().delete(`/v1/sandboxes/${mem.sandboxId}`);
    });
  });

  describe(`destroy (${runtime})`, () => {
    it('removes the container, the mount and the host directory, and is idempotent', async () => {
      const sbx = await create('destroy');
      const dir = path.join(t.stateDir, 'sandboxes', sbx.sandboxId);
      expect(fs.existsSync(dir)).toBe(true);
      const [containerId] = containersOfSession(session('destroy'));
      const first = await t.api().delete(`/v1/sandboxes/${sbx.sandboxId}`);
      expect(first.body).toEqual({ sandboxId: sbx.sandboxId, destroyed: true });
      const again = await t.api().delete(`/v1/sandboxes/${sbx.sandboxId}`);
      expect(again.status).toBe(200);
      expect(again.body).toEqual({ sandboxId: sbx.sandboxId, destroyed: false });
      expect(dockerInspectStatus(containerId!)).toBeNull();
      expect(fs.existsSync(dir)).toBe(false);
      expect(mountedUnder(dir)).toEqual([]);
      expect((await t.api().get(`/v1/sandboxes/${sbx.sandboxId}`)).status).toBe(404);
      void execFileSync;
    });

    it('says so in a sentence when the engine does not remove the container, and the reaper removes it on its next pass', async () => {
      let refuse = true;
      class RefusingDriver extends DockerSandboxDriver {
        override async remove(containerId: string): Promise<void> {
          if (refuse) throw Object.assign(new Error('(HTTP code 500) server error - Could not kill running container, cannot remove'), { statusCode: 500 });
          await super.remove(containerId);
        }
      }
      const refusing = await startHost({}, {}, RefusingDriver);
      try {
        const res = await refusing
          .api()
          .post('/v1/sandboxes')
          .send({ sessionId: session('destroy-refused'), repository: { source: repo.dir }, runtime });
        expect(res.status).toBe(201);
        const sbx = res.body as SandboxInfo;
        const dir = path.join(refusing.stateDir, 'sandboxes', sbx.sandboxId);
        const [containerId] = containersOfSession(session('destroy-refused'));
        const refused = await refusing.api().delete(`/v1/sandboxes/${sbx.sandboxId}`);
        expect(refused.status).toBe(503);
        expect(refused.body).toMatchObject({ code: 'engine_unavailable' });
        expect(refused.body.message).toContain(`did not remove the container of sandbox ${sbx.sandboxId} ((HTTP code 500) server error - Could not kill running container, cannot remove)`);
        expect(refused.body.message).toContain("removed on the reaper's next pass");
        // The working copy went all the same; the sandbox is gone from the API.
        expect(fs.existsSync(dir)).toBe(false);
        expect(mountedUnder(dir)).toEqual([]);
        expect((await refusing.api().get(`/v1/sandboxes/${sbx.sandboxId}`)).status).toBe(404);
        expect(dockerInspectStatus(containerId!)).not.toBeNull();
        refuse = false;
        expect(await refusing.host.reaper.reap()).toMatchObject({ containers: 1 });
        expect(dockerInspectStatus(containerId!)).toBeNull();
      } finally {
        refuse = false;
        await refusing.close();
      }
    });

    // Under gVisor an engine exec racing the container's end (the kill after a command, an exec of its
    // own) left the container unkillable for the engine for tens of seconds after a fork bomb: a destroy
    // waits for a kill already under way, and no kill starts once the destroy has begun.
    describe('against the kill after a command', () => {
      const order: string[] = [];
      let slowed: TestHost;
      class WatchedDriver extends DockerSandboxDriver {
        override async killAllUserProcesses(containerId: string): Promise<void> {
          order.push('kill started');
          await new Promise((resolve) => setTimeout(resolve, 1_500));
          await super.killAllUserProcesses(containerId);
          order.push('kill ended');
        }
        override async remove(containerId: string): Promise<void> {
          order.push('remove');
          await super.remove(containerId);
        }
      }
      beforeAll(async () => {
        slowed = await startHost({}, {}, WatchedDriver);
      });
      afterAll(async () => {
        await slowed?.close();
      });
      const createOn = async (name: string) => {
        const res = await slowed
          .api()
          .post('/v1/sandboxes')
          .send({ sessionId: session(name), repository: { source: repo.dir }, runtime });
        expect(res.status).toBe(201);
        return res.body as SandboxInfo;
      };

      it('removes the container only once the kill after the last command is over', async () => {
        const sbx = await createOn('destroy-after-command');
        const [containerId] = containersOfSession(session('destroy-after-command'));
        order.length = 0;
        expect((await run(slowed, sbx.sandboxId, 'sleep 30 & echo started')).stdout).toBe('started\n');
        const res = await slowed.api().delete(`/v1/sandboxes/${sbx.sandboxId}`);
        expect(res.body).toEqual({ sandboxId: sbx.sandboxId, destroyed: true });
        expect(order).toEqual(['kill started', 'kill ended', 'remove']);
        expect(dockerInspectStatus(containerId!)).toBeNull();
      });

      it('starts no kill after a command that a destroy ended', async () => {
        const sbx = await createOn('destroy-during-command');
        order.length = 0;
        const command = slowed.api().post(`/v1/sandboxes/${sbx.sandboxId}/exec?stream=false`).send({ command: 'echo started; sleep 30' });
        const answered = command.then((r) => r);
        // Destroyed once the command is under way (the sandbox says busy) and has had a moment to start.
        for (let i = 0; i < 100 && (await slowed.api().get(`/v1/sandboxes/${sbx.sandboxId}`)).body.state !== 'busy'; i++) await new Promise((resolve) => setTimeout(resolve, 50));
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        const res = await slowed.api().delete(`/v1/sandboxes/${sbx.sandboxId}`);
        expect(res.body).toEqual({ sandboxId: sbx.sandboxId, destroyed: true });
        const answer = await answered;
        // The command was cut short by the host, not by the kernel: never reported as out of memory.
        expect(answer.status).toBe(200);
        expect((answer.body as { classes: string[] }).classes).not.toContain('oom');
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        expect(order).toEqual(['remove']);
      });
    });
  });
}
