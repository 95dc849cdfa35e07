// G01 and the file tools' path scope: read, list, search, propose-write, propose-edit and apply
// refuse, with outside_working_copy and a sentence, every path that resolves outside the working
// copy — through "..", an absolute path, a symlink a command planted, or a symlink swapped in after
// the check. The host's own files are the prize: a host-side canary file must never come back.
import { randomBytes } from 'node:crypto';
import { ExecHostRoutes } from '@lemniscate/contracts';
import { closeSync, constants, existsSync, mkdirSync, openSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecHostCallError } from '@lemniscate/gateway/src/exec-host/exec-host.port';
import { RUNTIMES, SANDBOX_IMAGES, execHostFor, expectSentence, refusal, repoFixture, type ExecHostProcess, type RepoFixture } from '../support/attack-harness';

let host: ExecHostProcess;
let repo: RepoFixture;
/** A file on the host, outside any sandbox; symlinks in the working copy point at it. */
const hostCanary = { path: join(tmpdir(), `lemniscate-host-canary-${randomBytes(6).toString('hex')}.txt`), value: `host-secret-${randomBytes(12).toString('hex')}` };
/** A writable directory on the host (and the same path inside the sandbox) that writes must never reach. */
const outsideDir = join(tmpdir(), `lemniscate-outside-${randomBytes(6).toString('hex')}`);

beforeAll(async () => {
  writeFileSync(hostCanary.path, `${hostCanary.value}\n`);
  mkdirSync(outsideDir, { mode: 0o777 });
  repo = repoFixture();
});

afterAll(() => {
  rmSync(hostCanary.path, { force: true });
  rmSync(outsideDir, { recursive: true, force: true });
  repo?.remove();
});

async function expectOutside(call: Promise<unknown>, what: string): Promise<void> {
  const refused = await refusal(call).catch((error: unknown) => {
    throw new Error(`${what}: ${String(error)}`);
  });
  expect({ what, status: refused.status, code: refused.code }).toEqual({ what, status: 403, code: 'outside_working_copy' });
  expectSentence(refused.message, 'outside_working_copy');
  expect(refused.message).not.toContain(hostCanary.value);
  expect(refused.message).not.toContain('root:x:0:0');
}

/** Escape through a leak: content of /etc/passwd (container or host) or of the host canary. */
function leaked(text: string): boolean {
  return text.includes('root:x:0:0') || text.includes(hostCanary.value);
}

describe.each(SANDBOX_IMAGES)('sandbox image from $route', (image) => {
  execHostFor(image, (started) => {
    host = started;
  });

  describe.each(RUNTIMES)('file operations under %s', (runtime) => {
    let id: string;

    beforeAll(async () => {
      id = (await host.createSandbox({ repository: { source: repo.dir }, runtime }, `files-${runtime}`)).sandboxId;
      const planted = await host.client.run(id, {
        command: [
          'set -e',
          'ln -s /etc etc-link',
          'ln -s /etc/passwd passwd-link',
          'ln -s .. up-link',
          `ln -s ${hostCanary.path} host-link`,
          `ln -s ${outsideDir} outside-link`,
          `mkdir -p ${outsideDir}`,
          'mkdir -p inner/deeper && ln -s ../../../etc inner/deeper/etc-link',
          'ln -s /nonexistent-lemniscate-target ghost-link',
          'echo planted',
        ].join('\n'),
        timeoutMs: 20_000,
      });
      expect(planted).toMatchObject({ exitCode: 0, stdout: 'planted\n' });
    });

    it('refuses to read outside through .., absolute paths and planted symlinks', async () => {
      for (const path of [
        '../x',
        '../../etc/passwd',
        '/etc/passwd',
        '/workspace/../etc/passwd',
        'notes/../../etc/passwd',
        'etc-link/passwd',
        'passwd-link',
        'up-link/etc/passwd',
        'host-link',
        hostCanary.path,
      ]) {
        await expectOutside(host.client.read(id, { path }), `read ${path}`);
      }
    });

    it('answers a link to a host path that does not exist like one that does: no oracle on the host files', async () => {
      for (const [path, op] of [
        ['ghost-link', 'read'],
        ['ghost-link/x', 'read'],
        ['ghost-link', 'list'],
        // Relative links are resolved from where the working copy sits on the host, not from /workspace.
        ['inner/deeper/etc-link/passwd', 'read'],
        ['inner/deeper/etc-link', 'list'],
      ] as const) {
        const call = op === 'read' ? host.client.read(id, { path }) : host.client.list(id, { path });
        const refused = await refusal(call);
        const finding = `${op} ${path} (a link to a missing host path) must be refused as outside, exactly like a link to an existing one`;
        expect({ [finding]: `${refused.status} ${refused.code}` }).toEqual({ [finding]: '403 outside_working_copy' });
      }
    });

    it('still reads inside the working copy, by relative and by /workspace path', async () => {
      await expect(host.client.read(id, { path: 'notes/inside.txt' })).resolves.toMatchObject({ content: 'inside the working copy\n' });
      await expect(host.client.read(id, { path: '/workspace/notes/inside.txt' })).resolves.toMatchObject({ content: 'inside the working copy\n' });
    });

    it('refuses to list outside', async () => {
      for (const path of ['..', '/', '/etc', 'etc-link', 'up-link', 'outside-link']) await expectOutside(host.client.list(id, { path }), `list ${path}`);
    });

    it('refuses to search outside, and a search of the whole copy does not follow symlinks out', async () => {
      for (const path of ['..', '/etc', 'etc-link', 'up-link', 'host-link']) await expectOutside(host.client.search(id, { pattern: 'root', path }), `search ${path}`);
      for (const pattern of ['root:x:0:0', hostCanary.value]) {
        const found = await host.client.search(id, { pattern });
        expect({ pattern, matches: found.matches }).toEqual({ pattern, matches: [] });
      }
    });

    it('refuses to propose writes and edits outside', async () => {
      for (const path of ['../escape.txt', '/etc/evil', '/tmp/evil', 'etc-link/evil', 'up-link/tmp/evil', 'outside-link/evil.txt', 'host-link', 'passwd-link']) {
        await expectOutside(host.client.proposeWrite(id, { path, content: 'evil\n' }), `propose-write ${path}`);
      }
      await expectOutside(host.client.proposeEdit(id, { path: 'passwd-link', old_string: 'root', new_string: 'toor' }), 'propose-edit passwd-link');
      await expectOutside(host.client.proposeEdit(id, { path: 'host-link', old_string: 'host', new_string: 'evil' }), 'propose-edit host-link');
    });

    it('refuses to apply a diff that writes outside, and nothing is written', async () => {
      const diffFor = (path: string) => `diff --git a/${path} b/${path}\nnew file mode 100644\n--- /dev/null\n+++ b/${path}\n@@ -0,0 +1 @@\n+evil\n`;
      for (const path of ['../escape.txt', 'outside-link/evil.txt', 'up-link/tmp/evil.txt', 'etc-link/evil.txt']) {
        const refused = await refusal(host.client.apply(id, diffFor(path)));
        expect({ path, status: refused.status, code: refused.code }).toEqual({ path, status: 403, code: 'outside_working_copy' });
        expectSentence(refused.message);
      }
      expect(readdirSync(outsideDir)).toEqual([]);
      const inside = await host.client.run(id, { command: `ls -A ${outsideDir} /tmp; test ! -e /escape.txt && echo none`, timeoutMs: 20_000 });
      expect(inside.stdout).not.toMatch(/evil|escape/);
      expect(inside.stdout).toContain('none');
    });

    it('host-side git never runs what a command planted (nested repository with fsmonitor, hooks, filters)', async () => {
      const marker = join(tmpdir(), `lemniscate-pwned-${randomBytes(6).toString('hex')}`);
      const planted = await host.client.run(id, {
        command: [
          'set -e',
          'mkdir -p nested/hooks && cd nested && git init -q',
          `git config core.fsmonitor 'touch ${marker}-fsmonitor; false'`,
          'git config core.hooksPath /workspace/nested/hooks',
          `printf '#!/bin/sh\ntouch ${marker}-hook\n' > hooks/post-index-change && chmod +x hooks/post-index-change`,
          `git config filter.evil.clean 'touch ${marker}-filter; cat'`,
          "echo '* filter=evil' > .gitattributes && echo x > f && cd ..",
          "echo '* filter=evil diff=evil' > .gitattributes",
          'echo changed >> README.md',
          'echo planted',
        ].join('\n'),
        timeoutMs: 30_000,
      });
      expect(planted).toMatchObject({ exitCode: 0, stdout: 'planted\n' });
      const changes = await host.client.changes(id);
      expect(changes.files.map((f) => f.path)).toContain('README.md');
      await host.client.patch(id);
      const ran = ['fsmonitor', 'hook', 'filter'].filter((what) => existsSync(`${marker}-${what}`));
      expect({ 'planted git programs that ran on the host': ran }).toEqual({ 'planted git programs that ran on the host': [] });
      const reverted = await host.client.run(id, { command: 'rm -rf nested .gitattributes && git -C /workspace status --short >/dev/null 2>&1; echo cleaned', timeoutMs: 20_000 });
      expect(reverted.stdout).toContain('cleaned');
    });

    describe('changes left by a command, reviewed through the host', () => {
      let sid: string;
      beforeAll(async () => {
        sid = (await host.createSandbox({ repository: { source: repo.dir }, runtime }, `changes-${runtime}`)).sandboxId;
      });

      it('a tracked file replaced by a link to a host file shows the link, never the host file, in changes and the patch', async () => {
        const swapped = await host.client.run(sid, { command: `ln -sf ${hostCanary.path} README.md && ln -sf /etc/passwd test.js && echo swapped`, timeoutMs: 20_000 });
        expect(swapped).toMatchObject({ exitCode: 0, stdout: 'swapped\n' });
        const changes = await host.client.changes(sid);
        expect(changes.files.map((f) => f.path)).toEqual(expect.arrayContaining(['README.md', 'test.js']));
        for (const f of changes.files) expect({ path: f.path, leaked: leaked(f.diff) }).toEqual({ path: f.path, leaked: false });
        await host.client.accept(sid, ['README.md', 'test.js']);
        const patch = await host.client.patch(sid);
        expect({ leakedInPatch: leaked(patch.patch) || leaked(patch.sessionPatch) }).toEqual({ leakedInPatch: false });
      });

      it('reverting files under a directory swapped for a link to a host directory writes nothing there', async () => {
        const swapped = await host.client.run(sid, { command: `mv src src.moved && ln -s ${outsideDir} src && echo swapped`, timeoutMs: 20_000 });
        expect(swapped).toMatchObject({ exitCode: 0, stdout: 'swapped\n' });
        const reverted = await host.client.revert(sid, ['src/index.js', 'src/util/strings.js', 'src']);
        expect([...reverted.paths].sort()).toEqual(['src', 'src/index.js', 'src/util/strings.js']);
        expect({ 'files written into the host directory the link pointed to': readdirSync(outsideDir) }).toEqual({ 'files written into the host directory the link pointed to': [] });
        // The link is gone and the base files are back inside the working copy.
        const after = await host.client.run(sid, { command: 'test ! -L src && cat src/index.js', timeoutMs: 20_000 });
        expect(after).toMatchObject({ exitCode: 0, stdout: 'module.exports = (a, b) => a + b;\n' });
      });
    });

    describe('a FIFO planted by a command', () => {
      /** Finds the FIFO on the host side of the working copy, where the exec-host reads it. */
      function hostFifo(name: string): string | undefined {
        const walk = (dir: string): string | undefined => {
          for (const e of readdirSync(dir, { withFileTypes: true })) {
            const p = join(dir, e.name);
            if (e.isFIFO() && e.name === name) return p;
            if (e.isDirectory() && !e.isSymbolicLink()) {
              const found = walk(p);
              if (found) return found;
            }
          }
          return undefined;
        };
        return walk(host.stateDir);
      }

      /**
       * Opening a FIFO blocks until a writer comes. If the exec-host opened one, writing to it from
       * here releases the blocked reader (so the suite can go on) and proves the block happened.
       */
      function releaseBlockedReader(path: string | undefined): boolean {
        if (!path) return false;
        try {
          const fd = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
          closeSync(fd);
          return true;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENXIO') return false;
          throw error;
        }
      }

      it('read, search and propose-write on a FIFO neither hang nor freeze the exec-host', async () => {
        const name = `pipe-${randomBytes(4).toString('hex')}`;
        const made = await host.client.run(id, { command: `mkfifo ${name} && echo made`, timeoutMs: 20_000 });
        if (made.exitCode !== 0) {
          // The seccomp profile denies mknod: no FIFO can be planted in the first place.
          expect(made.stderr).toBe(`mkfifo: cannot create fifo '${name}': Operation not permitted\n`);
        } else {
          expect(made.stdout).toBe('made\n');
        }
        // gVisor may keep a FIFO inside its own kernel; what matters is whether the host sees one.
        const fifo = hostFifo(name);
        const attempts: [string, string, unknown][] = [
          ['read', 'read', { path: name }],
          ['search everything', 'search', { pattern: 'anything' }],
          ['propose-write', 'propose-write', { path: name, content: 'x' }],
        ];
        for (const [what, op, body] of attempts) {
          const started = performance.now();
          const call = host.client.raw('POST', ExecHostRoutes.file(id, op as 'read'), { body, signal: AbortSignal.timeout(5_000) }).then(
            (res) => `${res.status} ${(res.json as { code?: string } | undefined)?.code ?? ''}`.trim(),
            (error: unknown) => `no answer (${(error as Error).name})`,
          );
          // The exec-host must keep serving others while this call is in flight.
          const health = await host.client.raw('GET', ExecHostRoutes.health(), { signal: AbortSignal.timeout(2_000) }).then(
            (res) => res.status,
            () => 'no answer within 2 s',
          );
          const outcome = await call;
          const blocked = releaseBlockedReader(fifo);
          const finding = `${what} on a FIFO: the exec-host blocked opening it`;
          expect({ [finding]: { blocked, health } }).toEqual({ [finding]: { blocked: false, health: 200 } });
          // Absent on the host side (never planted, or kept inside gVisor) is a plain 404 / a new file.
          expect({ what, outcome }).toEqual({ what, outcome: expect.stringMatching(/^(200|400 not_a_file|404 file_not_found|422 binary_file)$/) });
          expect(performance.now() - started).toBeLessThan(5_000);
        }
      });
    });

    describe('a checked path swapped for a symlink between check and use', () => {
      type Outcomes = Record<string, number>;
      const BUSY = '409 sandbox_busy';
      const REFUSED = '403 outside_working_copy';

      /**
       * Three callers run `attempt` in a loop until `stop()` says so; returns how often each outcome
       * came. An answer that arrives after the stop is tallied as "late …": it may reflect the final state.
       */
      async function attackUntil(stop: () => boolean, attempt: () => Promise<string>): Promise<Outcomes> {
        const outcomes: Outcomes = {};
        await Promise.all(
          Array.from({ length: 3 }, async () => {
            do {
              let outcome: string;
              try {
                outcome = await attempt();
              } catch (error) {
                outcome = error instanceof ExecHostCallError ? `${error.status} ${error.code}` : `error ${String(error)}`;
              }
              if (stop()) outcome = `late ${outcome}`;
              outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
            } while (!stop());
          }),
        );
        return outcomes;
      }

      function racerProgram(racer: string, seconds: number): string {
        const body = racer
          .split('\n')
          .map((l) => '    ' + l)
          .join('\n');
        return `import os, shutil, time\nos.chdir("/workspace")\nend = time.time() + ${seconds}\nprint("racing", flush=True)\nn = 0\nwhile time.time() < end:\n${body}\n    n += 1\nprint("swaps", n, flush=True)\n`;
      }

      /**
       * Two ways to race: the swapping loop as the running command (file operations arrive while it
       * runs), and the same loop left in the background by a command that has ended.
       */
      async function race(racer: string, seconds: number, attempt: () => Promise<string>): Promise<{ during: Outcomes; after: Outcomes; survivors: string[] }> {
        let started!: () => void;
        const racing = new Promise<void>((r) => (started = r));
        let done = false;
        const command = host.client
          .execStream(id, { command: `python3 - <<'EOF'\n${racerProgram(racer, seconds)}\nEOF`, timeoutMs: (seconds + 30) * 1000 }, (chunk) => {
            if (chunk.type === 'stdout' && chunk.data.includes('racing')) started();
          })
          .finally(() => {
            done = true;
            started();
          });
        await racing;
        const [{ exit, stdout }, during] = await Promise.all([command, attackUntil(() => done, attempt)]);
        expect({ racerExit: exit.exitCode, swapped: stdout.includes('swaps') }).toEqual({ racerExit: 0, swapped: true });

        const launched = await host.client.run(id, { command: `python3 - >/dev/null 2>&1 <<'EOF' &\n${racerProgram(racer, seconds)}\nEOF\necho launched`, timeoutMs: 20_000 });
        expect(launched).toMatchObject({ exitCode: 0, stdout: 'launched\n' });
        const deadline = Date.now() + seconds * 1000;
        const after = await attackUntil(() => Date.now() > deadline, attempt);
        const ps = await host.client.run(id, { command: 'ps -eo args=', timeoutMs: 20_000 });
        const survivors = ps.stdout.split('\n').filter((l) => l.startsWith('python3 -'));
        return { during, after, survivors };
      }

      /**
       * No escape, no crash; and either the race really happened (both states seen) or the exec-host
       * ruled it out: file operations refused while a command runs, nothing left running after it.
       */
      function expectContained(what: string, result: { during: Outcomes; after: Outcomes; survivors: string[] }, inside: string): void {
        for (const [phase, outcomes] of [
          ['during', result.during],
          ['after', result.after],
        ] as const) {
          const escapes = Object.entries(outcomes).filter(([o]) => o.endsWith('ESCAPED'));
          expect({ what, phase, escapes }).toEqual({ what, phase, escapes: [] });
          expect({ what, phase, crashes: Object.keys(outcomes).filter((o) => /^(late )?(5\d\d |error )/.test(o)) }).toEqual({ what, phase, crashes: [] });
        }
        const timely = (o: Outcomes) => Object.keys(o).filter((k) => !k.startsWith('late '));
        const bothSeen = (o: Outcomes) => (o[inside] ?? 0) > 0 && (o[REFUSED] ?? 0) > 0;
        // Excluded: refused as busy while the command ran; an operation answered in the instant between
        // the command's end on the exec-host and its last line reaching this test may have run, after the
        // command and its kill, and then it met the state the racer left — the swapped link (refused) or
        // the plain file (inside) — never an escape: checked above.
        const onlyBusy = timely(result.during).includes(BUSY) && timely(result.during).every((o) => o === BUSY || o === REFUSED || o === inside);
        const during = `raced or excluded while the swapping command ran (outcomes ${JSON.stringify(result.during)})`;
        expect({ [during]: bothSeen(result.during) || onlyBusy }).toEqual({ [during]: true });
        const after = `raced or nothing left running after the command (survivors ${JSON.stringify(result.survivors)}, outcomes ${JSON.stringify(result.after)})`;
        expect({ [after]: bothSeen(result.after) || result.survivors.length === 0 }).toEqual({ [after]: true });
      }

      it('read never returns the target of a symlink swapped in', async () => {
        const result = await race(
          [
            'os.symlink("/etc/passwd" if n % 2 else ' + JSON.stringify(hostCanary.path) + ', ".race-sym")',
            'os.rename(".race-sym", "race.txt")',
            'open(".race-file", "w").write("inside\\n")',
            'os.rename(".race-file", "race.txt")',
          ].join('\n'),
          3,
          async () => {
            const res = await host.client.read(id, { path: 'race.txt' });
            return leaked(res.content) ? 'ESCAPED' : res.content === 'inside\n' ? 'inside' : `other ${res.content.slice(0, 40)}`;
          },
        );
        expectContained('read', result, 'inside');
      });

      it('list and propose-write never see through a directory swapped for a symlink', async () => {
        const swapDir = [
          'if os.path.islink("race-dir"): os.unlink("race-dir")',
          'os.makedirs("race-dir", exist_ok=True)',
          'open("race-dir/passwd", "w").write("inside\\n")',
          'shutil.rmtree("race-dir")',
          'os.symlink("/etc", "race-dir")',
        ].join('\n');
        const listed = await race(swapDir, 3, async () => {
          const res = await host.client.list(id, { path: 'race-dir' });
          const names = res.entries.map((e) => e.name);
          return names.some((n) => n === 'shadow' || n === 'hostname' || n === 'os-release') ? 'ESCAPED' : 'inside';
        });
        expectContained('list', listed, 'inside');

        const proposed = await race(swapDir, 3, async () => {
          const res = await host.client.proposeWrite(id, { path: 'race-dir/passwd', content: 'replaced\n' });
          return leaked(res.diff) ? 'ESCAPED' : 'inside';
        });
        expectContained('propose-write', proposed, 'inside');
      });

      afterAll(async () => {
        // Nothing the races did may have left a trace outside.
        expect(readdirSync(outsideDir)).toEqual([]);
        expect(existsSync(hostCanary.path)).toBe(true);
      });
    });
  });
});
