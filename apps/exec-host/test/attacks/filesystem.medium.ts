// S2, S5 and S6: the working copy is the only writable place (plus a capped, noexec /tmp), it holds
// none of the files the context exclusions name (in the tree, in the uncommitted patch or in git's
// objects), and the sandbox carries nothing of the host: no environment, no Docker socket.
import type { SandboxInfo } from '@lemniscate/contracts';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  RUNTIMES,
  SANDBOX_IMAGES,
  execHostFor,
  expectRefused,
  expectSentence,
  git,
  refusal,
  repoFixture,
  runProbes,
  type ExecHostProcess,
  type ProbeResult,
  type RepoFixture,
} from '../support/attack-harness';

let host: ExecHostProcess;
let repo: RepoFixture;
/** The developer's uncommitted changes: one ordinary edit, and secrets that must not travel with it. */
let uncommittedPatch: string;
const patchSecrets = { dotenv: `patched-dotenv-${Date.now()}`, newToken: `patched-token-${Date.now()}`, key: `patched-key-${Date.now()}` };

/** Variables a sandbox shell may have: the image's, the engine's HOSTNAME and what bash sets itself. */
const MINIMAL_ENV = new Set(['PATH', 'HOME', 'LANG', 'LC_ALL', 'HOSTNAME', 'PWD', 'OLDPWD', 'SHLVL', '_', 'TERM', 'TMPDIR', 'USER', 'LOGNAME']);

beforeAll(async () => {
  repo = repoFixture();
  writeFileSync(join(repo.dir, 'README.md'), '# Fixture project\n\nOrdinary text.\nAn uncommitted line.\n');
  writeFileSync(join(repo.dir, '.env'), `DATABASE_PASSWORD=${repo.secrets.dotenv}\nNEW_PASSWORD=${patchSecrets.dotenv}\n`);
  writeFileSync(join(repo.dir, 'secrets/new.txt'), `${patchSecrets.newToken}\n`);
  mkdirSync(join(repo.dir, 'config'));
  writeFileSync(join(repo.dir, 'config/prod.key'), `${patchSecrets.key}\n`);
  git(repo.dir, 'add', '-A');
  uncommittedPatch = git(repo.dir, 'diff', '--cached', '--binary', 'HEAD');
  git(repo.dir, 'reset', '-q', '--hard', 'HEAD');
  git(repo.dir, 'clean', '-qfdx');
});

afterAll(() => {
  repo?.remove();
});

describe.each(SANDBOX_IMAGES)('sandbox image from $route', (image) => {
  execHostFor(image, (started) => {
    host = started;
  });

  describe.each(RUNTIMES)('filesystem and secrets under %s', (runtime) => {
    let info: SandboxInfo;
    let r: Record<string, ProbeResult>;

    beforeAll(async () => {
      info = await host.createSandbox({ repository: { source: repo.dir }, uncommittedPatch, contextExclusions: ['notes/**'], runtime }, `fs-${runtime}`);
      const allSecrets = [...Object.values(repo.secrets), ...Object.values(patchSecrets), host.canary.value];
      r = await runProbes(
        host.client,
        info.sandboxId,
        String.raw`
import shutil, subprocess
SECRETS = ${JSON.stringify(allSecrets)}
for path in ["/probe-root", "/etc/probe", "/usr/probe", "/usr/local/bin/probe", "/home/sandbox/probe"]:
    probe("write " + path, lambda: open(path, "w").write("x"))
probe("root mount options", lambda: [l.split()[3].split(",") for l in open("/proc/self/mounts").read().splitlines() if l.split()[1] == "/"])
probe("write workspace", lambda: open("/workspace/.probe-written", "w").write("x"))
probe("write tmp", lambda: open("/tmp/probe", "w").write("x"))
def run_from_tmp(src):
    dst = "/tmp/" + os.path.basename(src) + "-copy"
    shutil.copy(src, dst)
    os.chmod(dst, 0o755)
    p = subprocess.run([dst], capture_output=True, text=True)
    return {"code": p.returncode}
def script_from_tmp():
    open("/tmp/s.sh", "w").write("#!/bin/sh\necho ran\n")
    os.chmod("/tmp/s.sh", 0o755)
    p = subprocess.run(["bash", "-c", "/tmp/s.sh"], capture_output=True, text=True)
    return {"code": p.returncode, "stdout": p.stdout.strip(), "stderr": p.stderr.strip()}
probe("exec script in tmp", script_from_tmp)
probe("exec binary in tmp", lambda: run_from_tmp("/usr/bin/true"))
def tmp_size():
    for l in open("/proc/self/mounts").read().splitlines():
        f = l.split()
        if f[1] == "/tmp":
            opts = dict((o.split("=") + [""])[:2] for o in f[3].split(","))
            s = opts.get("size", "")
            mult = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}.get(s[-1:].lower(), 1)
            return {"fstype": f[2], "noexec": "noexec" in opts, "bytes": int(s.rstrip("kmgKMG")) * mult if s else None}
    return None
probe("tmp mount", tmp_size)
def fill_tmp():
    cap = tmp_size()["bytes"]
    written = 0
    chunk = b"\0" * (1024 * 1024)
    try:
        with open("/tmp/fill", "wb") as f:
            while written <= cap + 8 * 1024 * 1024:
                f.write(chunk)
                f.flush()
                written += len(chunk)
    finally:
        print(json.dumps({"name": "tmp written", "ok": True, "value": {"written": written, "cap": cap}}), flush=True)
        os.unlink("/tmp/fill")
    return written
probe("fill tmp", fill_tmp)
def env_of(path):
    return dict(e.split("=", 1) for e in open(path, "rb").read().decode().split("\0") if "=" in e)
probe("env", lambda: dict(os.environ))
probe("shell env", lambda: dict(l.split("=", 1) for l in subprocess.run(["bash", "-lc", "env"], capture_output=True, text=True).stdout.splitlines() if "=" in l))
probe("pid 1 env", lambda: env_of("/proc/1/environ"))
def find(*args):
    p = subprocess.run(["find", "/", "(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune", "-o", *args, "-print"], capture_output=True, text=True)
    return p.stdout.split()
probe("docker.sock anywhere", lambda: find("-name", "docker.sock"))
probe("unix sockets anywhere", lambda: find("-type", "s"))
probe("docker socket paths", lambda: [p for p in ["/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/containerd/containerd.sock"] if os.path.lexists(p)])
probe("mounts naming docker", lambda: [l for l in open("/proc/self/mounts").read().splitlines() if "docker.sock" in l or "containerd" in l])
def workspace_files():
    out = []
    for root, dirs, files in os.walk("/workspace"):
        if ".git" in dirs and root == "/workspace":
            dirs.remove(".git")
        out += [os.path.relpath(os.path.join(root, f), "/workspace") for f in files]
    return sorted(out)
probe("workspace files", workspace_files)
MOUNTS = [l.split()[1] for l in open("/proc/self/mounts").read().splitlines()]
probe("mount points", lambda: sorted(m for m in MOUNTS if not m.startswith(("/proc", "/dev", "/sys"))))
# The image's own system directories come from its build, not from the host; everything else,
# and anything mounted at run time, is searched.
IMAGE_DIRS = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/proc", "/sys")
def secrets_in_tree():
    found = []
    for root, dirs, files in os.walk("/"):
        if root != "/" and root.startswith(IMAGE_DIRS) and not any(m == root or m.startswith(root + "/") for m in MOUNTS if not m.startswith(("/proc", "/sys"))):
            dirs[:] = []
            continue
        for f in files:
            p = os.path.join(root, f)
            try:
                if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > 4 * 1024 * 1024:
                    continue
                data = open(p, "rb").read()
            except OSError:
                continue
            found += [p + ": " + s for s in SECRETS if s.encode() in data]
    return found
probe("secrets in any readable file", secrets_in_tree)
def secrets_in_git():
    if not os.path.isdir("/workspace/.git"):
        return {"git": False, "found": []}
    p = subprocess.run(["git", "-C", "/workspace", "cat-file", "--batch-all-objects", "--batch"], capture_output=True)
    return {"git": True, "code": p.returncode, "found": [s for s in SECRETS if s.encode() in p.stdout]}
probe("secrets in git objects", secrets_in_git)
probe("readme", lambda: open("/workspace/README.md").read())
`,
      );
    });

    it('refuses writes to /, /etc and /usr, and the root filesystem is mounted read-only', () => {
      // gVisor checks permissions before the mount's read-only flag: uid 10001 meets EACCES first there.
      const notOwned = runtime === 'runc' ? 'EROFS' : 'EACCES';
      for (const path of ['/probe-root', '/etc/probe', '/usr/probe', '/usr/local/bin/probe']) expectRefused(r, `write ${path}`, notOwned);
      // /home/sandbox belongs to the sandbox user: only a read-only root refuses it.
      expectRefused(r, 'write /home/sandbox/probe', 'EROFS');
      expect((r['root mount options']?.value as string[][])[0]).toContain('ro');
    });

    it('lets commands write the working copy and /tmp', () => {
      expect(r['write workspace']).toMatchObject({ ok: true });
      expect(r['write tmp']).toMatchObject({ ok: true });
    });

    it('mounts /tmp noexec: a script or a binary copied there does not run', () => {
      expect(r['tmp mount']).toMatchObject({ ok: true, value: { fstype: 'tmpfs', noexec: true } });
      // Linux refuses the script itself; gVisor reports the refusal against its interpreter line.
      const refusedScript = runtime === 'runc' ? 'bash: line 1: /tmp/s.sh: Permission denied' : 'bash: /tmp/s.sh: /bin/sh: bad interpreter: Permission denied';
      expect(r['exec script in tmp']).toMatchObject({ ok: true, value: { code: 126, stderr: refusedScript } });
      expectRefused(r, 'exec binary in tmp', 'EACCES');
    });

    it('caps /tmp: writing past its size fails with ENOSPC', () => {
      const mount = r['tmp mount']?.value as { bytes: number | null };
      expect(mount.bytes).toEqual(expect.any(Number));
      expect(mount.bytes).toBeLessThanOrEqual(1024 ** 3);
      expectRefused(r, 'fill tmp', 'ENOSPC');
      const { written, cap } = r['tmp written']?.value as { written: number; cap: number };
      expect(written).toBeLessThanOrEqual(cap);
    });

    it("shows none of the host's environment variables, only a minimal set", () => {
      const hostEnv = host.env;
      // A command inherits the container's environment (the 'env' probe sees it). pid 1's own is not
      // the command's to read under runc (the keeper runs as a user of its own); gVisor shows it.
      if (runtime === 'runc') expectRefused(r, 'pid 1 env', 'EACCES');
      for (const probeName of runtime === 'runc' ? ['env', 'shell env'] : ['env', 'shell env', 'pid 1 env']) {
        const env = r[probeName]?.value as Record<string, string>;
        expect({ probeName, env: typeof env }).toEqual({ probeName, env: 'object' });
        expect({ probeName, canary: Object.values(env).some((v) => v.includes(host.canary.value)) }).toEqual({ probeName, canary: false });
        expect({ probeName, unexpected: Object.keys(env).filter((k) => !MINIMAL_ENV.has(k)) }).toEqual({ probeName, unexpected: [] });
        const copied = Object.keys(env).filter((k) => k !== 'LANG' && k !== 'SHLVL' && k !== '_' && hostEnv[k] !== undefined && hostEnv[k] === env[k]);
        expect({ probeName, copiedFromHost: copied }).toEqual({ probeName, copiedFromHost: [] });
      }
      expect(Object.keys(r['env']?.value as object)).not.toContain('DOCKER_HOST');
    });

    it('mounts nothing from the host but the working copy and the engine-managed name files', () => {
      const allowed = ['/', '/etc/hostname', '/etc/hosts', '/etc/resolv.conf', '/tmp', '/workspace'];
      const mounts = r['mount points']?.value as string[];
      expect({ unexpectedMounts: mounts.filter((m) => !allowed.includes(m)) }).toEqual({ unexpectedMounts: [] });
      expect(mounts).toEqual(expect.arrayContaining(['/', '/tmp', '/workspace']));
    });

    it('has no Docker socket, nor any unix socket, anywhere', () => {
      expect(r['docker.sock anywhere']).toMatchObject({ ok: true, value: [] });
      expect(r['unix sockets anywhere']).toMatchObject({ ok: true, value: [] });
      expect(r['docker socket paths']).toMatchObject({ ok: true, value: [] });
      expect(r['mounts naming docker']).toMatchObject({ ok: true, value: [] });
    });

    it('leaves the context-excluded files out of the working copy, the uncommitted patch and git objects', () => {
      const files = r['workspace files']?.value as string[];
      for (const p of repo.excludedPaths) expect({ excluded: p, present: files.includes(p) }).toEqual({ excluded: p, present: false });
      for (const p of ['secrets/new.txt', 'config/prod.key', 'notes/inside.txt']) expect({ excluded: p, present: files.includes(p) }).toEqual({ excluded: p, present: false });
      for (const p of repo.ordinaryPaths.filter((p) => !p.startsWith('notes/'))) expect({ ordinary: p, present: files.includes(p) }).toEqual({ ordinary: p, present: true });
      expect(info.includedUncommitted).toBe(true);
      expect(r['readme']).toMatchObject({ ok: true, value: expect.stringContaining('An uncommitted line.') });
      expect([...info.excluded].sort()).toEqual(expect.arrayContaining([...repo.excludedPaths, 'notes/inside.txt']));
    });

    it('holds none of the excluded secrets in any file it can read, nor in git objects', () => {
      expect(r['secrets in any readable file']).toMatchObject({ ok: true, value: [] });
      expect(r['secrets in git objects']).toMatchObject({ ok: true, value: { found: [] } });
    });

    it('answers file_not_found for an excluded file through the file operations, and search finds no secret', async () => {
      const missing = await refusal(host.client.read(info.sandboxId, { path: '.env' }));
      expect({ status: missing.status, code: missing.code }).toEqual({ status: 404, code: 'file_not_found' });
      expectSentence(missing.message, 'file_not_found');
      for (const secret of Object.values(repo.secrets)) {
        const found = await host.client.search(info.sandboxId, { pattern: secret });
        expect({ secret, matches: found.matches }).toEqual({ secret, matches: [] });
      }
    });
  });
});
