// S1, L1: the warm pool. A sandbox made ahead and taken by a session must be exactly what a cold one
// is: the same hardening (its container compared field by field with a cold one's), nothing of the
// session before it or of another project (a shell checked out ahead for one repository is never
// handed to another), and a crash of the exec-host leaves no warm sandbox behind once it starts again.
// The rest of the battery (filesystem, network, privileges, resources, file operations) runs on warm
// sandboxes too, on the Dockerfile image's route (attack-harness.ts, `pooledRoute`).
import type { SandboxInfo, SandboxRuntime } from '@lemniscate/contracts';
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { RUNTIMES, SANDBOX_IMAGES, containersOfInstance, containersOfSandbox, git, repoFixture, startExecHost, type ExecHostProcess, type RepoFixture } from '../support/attack-harness';

const execFileAsync = promisify(execFile);
const image = SANDBOX_IMAGES[0]!;
// Refs of repositories kept checked out ahead are read at every pass here (passes come every 10 s).
const POOL = { LEMNISCATE_EXEC_HOST_WARM_POOL: '2', LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS: '1' };

/** A repository of its own project: a file whose contents exist nowhere else. */
function projectRepo(name: string): { repo: RepoFixture; marker: string; file: string } {
  const repo = repoFixture();
  const marker = `${name}-only-${randomBytes(12).toString('hex')}`;
  const file = `${name}-notes.txt`;
  writeFileSync(join(repo.dir, file), `${marker}\n`);
  git(repo.dir, 'add', '-A');
  git(repo.dir, 'commit', '-q', '-m', `${name}'s own file`);
  return { repo, marker, file };
}

async function sh(host: ExecHostProcess, sandboxId: string, command: string): Promise<string> {
  const r = await host.client.run(sandboxId, { command, timeoutMs: 60_000 });
  if (r.exitCode !== 0) throw new Error(`"${command}" failed in ${sandboxId} (exit ${r.exitCode}): ${r.stderr}`);
  return r.stdout;
}

/** Every place a session can write, searched for any of `needles` (file names and contents). */
async function traces(host: ExecHostProcess, sandboxId: string, needles: string[]): Promise<string> {
  const pattern = needles.join('\\|');
  const r = await host.client.run(sandboxId, {
    command: `for d in /workspace /tmp /home /var/tmp /run /dev/shm; do [ -d "$d" ] || continue; find "$d" -xdev 2>/dev/null | grep -e '${pattern}'; grep -rls -e '${pattern}' "$d" 2>/dev/null; done; ps -eo args | grep -v grep | grep -e '${pattern}'; true`,
    timeoutMs: 60_000,
  });
  return r.stdout.trim();
}

/** What a container is made of, without what names one sandbox (ids, its directory, its session). */
async function hardening(containerId: string, sandboxDir: RegExp): Promise<unknown> {
  const { stdout } = await execFileAsync('docker', ['inspect', containerId], { maxBuffer: 16 * 1024 * 1024 });
  const [c] = JSON.parse(stdout) as [{ Config: Record<string, unknown> & { Labels: Record<string, string> }; HostConfig: Record<string, unknown>; Mounts: { Source: string }[] }];
  const labels = Object.keys(c.Config.Labels).filter((l) => l !== 'lemniscate.session' && l !== 'lemniscate.sandbox');
  const h = c.HostConfig;
  return {
    config: {
      User: c.Config.User,
      Cmd: c.Config.Cmd,
      Entrypoint: c.Config.Entrypoint,
      WorkingDir: c.Config.WorkingDir,
      Image: c.Config.Image,
      Env: c.Config.Env,
      NetworkDisabled: c.Config.NetworkDisabled,
      labels,
    },
    host: Object.fromEntries(
      [
        'Runtime',
        'NetworkMode',
        'ReadonlyRootfs',
        'Tmpfs',
        'CapDrop',
        'CapAdd',
        'Privileged',
        'SecurityOpt',
        'PidsLimit',
        'Memory',
        'MemorySwap',
        'NanoCpus',
        'Ulimits',
        'Init',
        'Devices',
        'IpcMode',
        'PidMode',
        'UsernsMode',
        'Dns',
        'ExtraHosts',
        'OomKillDisable',
        'MaskedPaths',
        'ReadonlyPaths',
        'CgroupnsMode',
        'ShmSize',
      ].map((k) => [k, h[k]]),
    ),
    mounts: JSON.parse(JSON.stringify(h.Mounts).replace(sandboxDir, '<sandbox>')),
  };
}

async function containerOf(sandboxId: string): Promise<string> {
  const ids = await containersOfSandbox(sandboxId);
  if (ids.length !== 1) throw new Error(`expected one container for ${sandboxId}, found ${ids.length}`);
  return ids[0]!;
}

describe.each(RUNTIMES)('warm sandboxes under %s', (runtime: SandboxRuntime) => {
  let warm: ExecHostProcess;
  let cold: ExecHostProcess;
  let x: ReturnType<typeof projectRepo>;
  let y: ReturnType<typeof projectRepo>;

  beforeAll(async () => {
    x = projectRepo('project-x');
    y = projectRepo('project-y');
    // Only this runtime kept warm from start-up, so each file's pool is what its tests take from.
    warm = await startExecHost(image, { ...POOL, LEMNISCATE_EXEC_HOST_WARM_RUNTIMES: runtime });
    cold = await startExecHost(image);
  });
  afterAll(async () => {
    const problems: unknown[] = [];
    for (const h of [warm, cold]) await h?.stop().catch((e: unknown) => problems.push(e));
    x?.repo.remove();
    y?.repo.remove();
    if (problems.length > 0) throw problems[0];
  });

  it('is taken from the pool (pooled: true) and has the hardening of a cold sandbox, field by field', async () => {
    const w = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'hardening-warm');
    const c = await cold.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'hardening-cold');
    expect(w.pooled).toBe(true);
    expect(c.pooled).toBe(false);
    const dirOf = (h: ExecHostProcess) => new RegExp(`${h.stateDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/sandboxes/sbx-[0-9a-f]+`, 'g');
    const warmMade = await hardening(await containerOf(w.sandboxId), dirOf(warm));
    const coldMade = await hardening(await containerOf(c.sandboxId), dirOf(cold));
    expect(warmMade).toEqual(coldMade);
    // And what the sandbox sees of itself: the same user, capabilities, mounts and limits (its image
    // layers' directories aside, which name one container).
    const self = 'id; grep -E "^(Cap|NoNewPrivs|Seccomp)" /proc/self/status; awk \'{print $2, $3, $4}\' /proc/self/mounts | sed -E "s/(lowerdir|upperdir|workdir)=[^,]*/\\1=layer/g" | sort; ulimit -a';
    expect(await sh(warm, w.sandboxId, self)).toBe(await sh(cold, c.sandboxId, self));
    await warm.client.destroy(w.sandboxId);
    await cold.client.destroy(c.sandboxId);
  });

  it('carries nothing of the session before it, of the same project or of another one', async () => {
    const first = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'first');
    expect(first.pooled).toBe(true);
    const leftover = `left-by-first-${randomBytes(8).toString('hex')}`;
    await sh(
      warm,
      first.sandboxId,
      `echo ${leftover} > /workspace/${leftover}.txt; echo ${leftover} > /tmp/${leftover}; echo ${leftover} > "$HOME/${leftover}"; (exec -a ${leftover} sleep 600 &) ; true`,
    );
    // The search finds what it looks for: in the first sandbox, the file, the process and the contents.
    expect((await traces(warm, first.sandboxId, [leftover])).split('\n').length).toBeGreaterThanOrEqual(4);
    const firstContainer = await containerOf(first.sandboxId);
    await warm.client.destroy(first.sandboxId);
    expect(await containersOfSandbox(first.sandboxId)).toEqual([]);

    // The same project again: checked out ahead or not, a new container with nothing of the first.
    const again = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'again');
    expect(again.pooled).toBe(true);
    expect(await containerOf(again.sandboxId)).not.toBe(firstContainer);
    expect(await traces(warm, again.sandboxId, [leftover])).toBe('');
    expect(await sh(warm, again.sandboxId, `cat /workspace/${x.file}`)).toBe(`${x.marker}\n`);
    const listing = 'cd /workspace && find . -path ./.git -prune -o -type f -print | sort';
    const expected = await sh(cold, (await cold.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'listing')).sandboxId, listing);
    expect(await sh(warm, again.sandboxId, listing)).toBe(expected);
    await warm.client.destroy(again.sandboxId);

    // Another project, after shells were checked out ahead for the first: none of them reaches it.
    await warm.poolFull();
    const other = await warm.createSandbox({ repository: { source: y.repo.dir }, runtime }, 'other-project');
    expect(other.pooled).toBe(true);
    expect(await traces(warm, other.sandboxId, [leftover, x.marker, x.file])).toBe('');
    expect(await sh(warm, other.sandboxId, `cat /workspace/${y.file}`)).toBe(`${y.marker}\n`);
    expect(other.baseCommit).toBe(git(y.repo.dir, 'rev-parse', 'HEAD').trim());
    // Nor in its repository on the host (kept out of the sandbox's reach): neither its git directory
    // nor any object store it borrows through alternates knows the other project's commits.
    const xHead = git(x.repo.dir, 'rev-parse', 'HEAD').trim();
    const knows = (gitDir: string, commit: string) => {
      try {
        // Quiet: the expected "not a valid object name" would only clutter the run's output.
        execFileSync('git', ['-C', y.repo.dir, '-c', 'safe.directory=*', '--git-dir', gitDir, 'cat-file', '-e', `${commit}^{commit}`], { stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    };
    const gitDir = join(warm.stateDir, 'sandboxes', other.sandboxId, 'git');
    // The check can fail: the sandbox's own commit is found the same way.
    expect(knows(gitDir, other.baseCommit)).toBe(true);
    expect(knows(gitDir, xHead)).toBe(false);
    const alternates = join(gitDir, 'objects/info/alternates');
    for (const store of existsSync(alternates) ? readFileSync(alternates, 'utf8').split('\n').filter(Boolean) : []) {
      expect(knows(join(store, '..'), xHead)).toBe(false);
    }
    await warm.client.destroy(other.sandboxId);
  });

  it('never hands out a working copy checked out ahead at a commit the ref no longer names', async () => {
    // Twice at the same commit: the second was checked out ahead, and the pool fills more of them.
    for (const label of ['ahead-1', 'ahead-2']) {
      const s = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, label);
      await warm.client.destroy(s.sandboxId);
    }
    await warm.poolFull();
    const moved = `moved-${randomBytes(8).toString('hex')}`;
    writeFileSync(join(x.repo.dir, x.file), `${moved}\n`);
    git(x.repo.dir, 'commit', '-q', '-am', 'moved on');
    const head = git(x.repo.dir, 'rev-parse', 'HEAD').trim();
    const s = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'after-move');
    expect(s.pooled).toBe(true);
    expect(s.baseCommit).toBe(head);
    expect(await sh(warm, s.sandboxId, `cat /workspace/${x.file}`)).toBe(`${moved}\n`);
    await warm.client.destroy(s.sandboxId);
    // And put back as it was for the tests after this one.
    writeFileSync(join(x.repo.dir, x.file), `${x.marker}\n`);
    git(x.repo.dir, 'commit', '-q', '-am', 'back');
  });

  it('replaces the working copies checked out ahead once a commit moves their ref, before any session asks for one', async () => {
    // The kind is learnt (a session of x), and the pool fills its shells at x's commit.
    const first = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'learn-ref');
    await warm.client.destroy(first.sandboxId);
    await warm.poolFull();
    const before = new Set(await containersOfInstance(warm.instance));
    const moved = `pushed-${randomBytes(8).toString('hex')}`;
    writeFileSync(join(x.repo.dir, x.file), `${moved}\n`);
    git(x.repo.dir, 'commit', '-q', '-am', 'pushed');
    const head = git(x.repo.dir, 'rev-parse', 'HEAD').trim();
    try {
      // No session is opened meanwhile: the pool's own pass finds the shells stale and replaces them.
      const deadline = Date.now() + 60_000;
      let replaced: string[] = [];
      while (replaced.length === 0) {
        if (Date.now() > deadline) throw new Error(`no shell checked out ahead was replaced within a minute of the commit\n${warm.output().slice(-3000)}`);
        await new Promise((r) => setTimeout(r, 500));
        const now = new Set(await containersOfInstance(warm.instance));
        replaced = [...before].filter((id) => !now.has(id));
      }
      await warm.poolFull();
      const s = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'after-push');
      expect(s.pooled).toBe(true);
      expect(s.baseCommit).toBe(head);
      expect(await sh(warm, s.sandboxId, `cat /workspace/${x.file}`)).toBe(`${moved}\n`);
      await warm.client.destroy(s.sandboxId);
    } finally {
      // Put back as it was for the tests after this one.
      writeFileSync(join(x.repo.dir, x.file), `${x.marker}\n`);
      git(x.repo.dir, 'commit', '-q', '-am', 'back');
    }
  });

  it('never gives back a taken sandbox: each session gets a container no other session had', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const s = await warm.createSandbox({ repository: { source: y.repo.dir }, runtime }, `once-${i}`);
      expect(s.pooled).toBe(true);
      const id = await containerOf(s.sandboxId);
      expect(seen.has(id)).toBe(false);
      seen.add(id);
      await warm.client.destroy(s.sandboxId);
      expect(await containersOfSandbox(s.sandboxId)).toEqual([]);
    }
  });

  it('leaves no warm sandbox behind when the exec-host is killed: the next start on its state directory removes them all', async () => {
    const stateDir = warm.stateDir;
    const live = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'before-crash');
    await warm.poolFull();
    const before = await containersOfInstance(warm.instance);
    // The live sandbox and at least the pool's share of this runtime's image.
    expect(before.length).toBeGreaterThanOrEqual(3);
    const dirsBefore = readdirSync(join(stateDir, 'sandboxes'));
    expect(dirsBefore).toContain(live.sandboxId);
    await warm.crash();

    // SIGKILL: nothing was cleaned, the containers are still there.
    expect((await containersOfInstance(warm.instance)).sort()).toEqual([...before].sort());
    warm = await startExecHost(image, { ...POOL, LEMNISCATE_EXEC_HOST_WARM_RUNTIMES: runtime }, { stateDir });
    const after = await containersOfInstance(warm.instance);
    expect(after.filter((id) => before.includes(id))).toEqual([]);
    const dirsAfter = readdirSync(join(stateDir, 'sandboxes'));
    expect(dirsAfter.filter((d) => dirsBefore.includes(d))).toEqual([]);
    const mounts = readFileSync('/proc/self/mounts', 'utf8');
    for (const d of dirsBefore) expect(mounts).not.toContain(d);
    // And the successor's pool fills again, from new sandboxes.
    await warm.poolFull();
    const fresh: SandboxInfo = await warm.createSandbox({ repository: { source: x.repo.dir }, runtime }, 'after-crash');
    expect(fresh.pooled).toBe(true);
    expect(before).not.toContain(await containerOf(fresh.sandboxId));
  });
});
