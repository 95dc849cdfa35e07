// The launcher that applies the seccomp profile to each command under gVisor, exercised directly in
// a hardened container of the real image: it filters, passes the command's output and status through,
// and refuses (exit 126, one sentence, command not run) whenever the profile cannot be applied.
import Docker from 'dockerode';
import * as path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { DEFAULT_IMAGE, repositoryRoot } from '../../src/config';
import { KEEPER_SCRIPT, SANDBOX_ENV } from '../../src/driver/docker-options';
import { DockerSandboxDriver } from '../../src/driver/docker.driver';
import { SECCOMP_LAUNCHER, SECCOMP_LAUNCHER_ENV, SECCOMP_LOADER, SECCOMP_LOADER_ENV, compileContainerOptions, compiledFilterOf } from '../../src/driver/seccomp-launcher';
import { loadSeccompProfile } from '../../src/seccomp';

const docker = new Docker();
const image = process.env.LEMNISCATE_SANDBOX_IMAGE ?? DEFAULT_IMAGE;
const root = repositoryRoot();
const checked = loadSeccompProfile(path.join(root, 'images/sandbox/seccomp.json'), path.join(root, 'images/sandbox/seccomp.schema.json'));
if (!checked.valid) throw new Error(checked.message);
const profile = checked.profile;

type Run = { code: number | null; stdout: string; stderr: string };

/** Everything a multiplexed engine stream carries, once it ends. */
function collect(stream: Readable): Promise<{ stdout: string; stderr: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.on('data', (b: Buffer) => (stdout += b.toString('utf8')));
  err.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
  docker.modem.demuxStream(stream, out, err);
  return new Promise((resolve, reject) => {
    stream.once('end', () => resolve({ stdout, stderr }));
    stream.once('error', reject);
  });
}

async function run(container: Docker.Container, Cmd: string[], env: string[]): Promise<Run> {
  const exec = await container.exec({ Cmd, User: '10001:10001', WorkingDir: '/tmp', Env: [...SANDBOX_ENV, ...env], AttachStdout: true, AttachStderr: true, Tty: false });
  const output = await collect((await exec.start({ hijack: true, stdin: false })) as unknown as Readable);
  return { code: (await exec.inspect()).ExitCode, ...output };
}

const launch = (container: Docker.Container, command: string, profileText: string | null) =>
  run(container, [SECCOMP_LAUNCHER, command], profileText === null ? [] : [`${SECCOMP_LAUNCHER_ENV}=${profileText}`]);

function withEntry(extra: object): string {
  const p = JSON.parse(profile) as { syscalls: object[] };
  return JSON.stringify({ ...p, syscalls: [...p.syscalls, extra] });
}

async function hardenedContainer(runtime: string): Promise<Docker.Container> {
  const container = await docker.createContainer({
    Image: image,
    Cmd: ['/bin/bash', '-c', KEEPER_SCRIPT],
    Entrypoint: [],
    User: '10001:10001',
    Env: [...SANDBOX_ENV],
    Labels: { 'lemniscate.test': 'seccomp-launcher' },
    NetworkDisabled: true,
    HostConfig: {
      Runtime: runtime,
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': 'rw,noexec,nosuid,nodev,size=16m,mode=1777' },
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true', `seccomp=${profile}`],
      AutoRemove: false,
    },
  });
  await container.start();
  return container;
}

describe.each(['runc', 'runsc'])('seccomp launcher under %s', (runtime) => {
  let container: Docker.Container;

  beforeAll(async () => {
    container = await hardenedContainer(runtime);
  }, 60_000);

  afterAll(async () => {
    await container?.remove({ force: true });
  });

  it('is root-owned and not writable by the sandbox user', async () => {
    const r = await run(container, ['/usr/bin/find', SECCOMP_LAUNCHER, '-printf', '%u %m'], []);
    expect(r).toEqual({ code: 0, stdout: 'root 755', stderr: '' });
  });

  it('runs the command under the filter: seccomp mode 2, namespaces and netlink refused', async () => {
    const r = await launch(
      container,
      'grep "^Seccomp:" /proc/self/status; unshare -U true; python3 -c "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)" 2>&1 | tail -n 1',
      profile,
    );
    expect(r.stdout).toBe('Seccomp:\t2\nPermissionError: [Errno 1] Operation not permitted\n');
    expect(r.stderr).toBe('unshare: unshare failed: Operation not permitted\n');
  });

  it('translates the argument rules: clone with a namespace flag refused, plain fork allowed, clone3 ENOSYS', async () => {
    const script = [
      'import ctypes, os, platform',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'nr = {"x86_64": (56, 435), "aarch64": (220, 435)}[platform.machine()]',
      'r = libc.syscall(nr[0], 0x10000000 | 17, 0, 0, 0, 0)',
      'print("clone CLONE_NEWUSER", r, os.strerror(ctypes.get_errno()))',
      'r = libc.syscall(nr[1], 0, 0)',
      'print("clone3", r, os.strerror(ctypes.get_errno()))',
      'pid = os.fork()',
      'if pid == 0: os._exit(3)',
      'print("fork", os.waitpid(pid, 0)[1] >> 8)',
    ].join('\n');
    const r = await launch(container, `python3 -c '${script}'`, profile);
    expect(r).toEqual({ code: 0, stdout: 'clone CLONE_NEWUSER -1 Operation not permitted\nclone3 -1 Function not implemented\nfork 3\n', stderr: '' });
  });

  it("passes output and exit status through, and keeps the profile out of the command's environment", async () => {
    const r = await launch(container, 'echo out; echo err >&2; env | grep -c ^LEMNISCATE_; printf %s "$HOME"; exit 7', profile);
    expect(r).toEqual({ code: 7, stdout: 'out\n0\n/tmp', stderr: 'err\n' });
  });

  it('skips a system call name the architecture does not have, keeping the rest', async () => {
    const r = await launch(container, 'grep "^Seccomp:" /proc/self/status', withEntry({ names: ['no_such_syscall'], action: 'SCMP_ACT_ALLOW' }));
    expect(r).toEqual({ code: 0, stdout: 'Seccomp:\t2\n', stderr: '' });
  });

  it.each([
    ['no profile at all', null, 'no seccomp profile was passed to the launcher.'],
    ['an empty profile', '', 'no seccomp profile was passed to the launcher.'],
    ['a profile that is not JSON', '{"defaultAction":', 'the seccomp profile could not be applied ('],
    ['a profile that allows by default', JSON.stringify({ ...JSON.parse(profile), defaultAction: 'SCMP_ACT_ALLOW' }), 'its default action does not deny'],
    ['an action it does not know', withEntry({ names: ['read'], action: 'SCMP_ACT_TRACE' }), "the action 'SCMP_ACT_TRACE' is not one the launcher knows"],
    [
      'an unknown comparison',
      withEntry({ names: ['read'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: 1, op: 'SCMP_CMP_BOGUS' }] }),
      "the comparison 'SCMP_CMP_BOGUS' is not one the launcher knows",
    ],
  ])('refuses to run the command given %s (exit 126, one sentence)', async (_case, text, reason) => {
    const r = await launch(container, 'echo ran', text);
    expect(r.code).toBe(126);
    expect(r.stdout).toBe('');
    expect(r.stderr.startsWith('The command was not run: ')).toBe(true);
    expect(r.stderr).toContain(reason);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('refuses a call without exactly one command', async () => {
    const r = await run(container, [SECCOMP_LAUNCHER, 'echo', 'ran'], [`${SECCOMP_LAUNCHER_ENV}=${profile}`]);
    expect(r).toEqual({ code: 126, stdout: '', stderr: 'The command was not run: the launcher takes exactly one argument, the command.\n' });
  });
});

/** Compiles the profile as the exec-host does: the image's launcher with --export-bpf in a throwaway container. */
async function compile(profileText: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const container = await docker.createContainer(compileContainerOptions(image, profileText, { 'lemniscate.test': 'seccomp-compile' }));
  try {
    const output = collect((await container.attach({ stream: true, stdout: true, stderr: true })) as unknown as Readable);
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    return { code: StatusCode, ...(await output) };
  } finally {
    await container.remove({ force: true });
  }
}

describe('the compiled profile (the static loader, ADR 0008)', () => {
  let compiled: string;

  beforeAll(async () => {
    const r = await compile(profile);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const program = compiledFilterOf(r.stdout);
    expect(program).not.toBeNull();
    compiled = program!;
  }, 60_000);

  it('the export refuses a profile it cannot translate, like the launcher, and prints no program', async () => {
    const r = await compile(JSON.stringify({ ...JSON.parse(profile), defaultAction: 'SCMP_ACT_ALLOW' }));
    expect(r.code).toBe(126);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('its default action does not deny');
  }, 60_000);

  describe.each(['runc', 'runsc'])('loaded under %s', (runtime) => {
    let container: Docker.Container;
    const load = (command: string, program: string | null) => run(container, [SECCOMP_LOADER, command], program === null ? [] : [`${SECCOMP_LOADER_ENV}=${program}`]);

    beforeAll(async () => {
      container = await hardenedContainer(runtime);
    }, 60_000);

    afterAll(async () => {
      await container?.remove({ force: true });
    });

    it('is root-owned and not writable by the sandbox user', async () => {
      const r = await run(container, ['/usr/bin/find', SECCOMP_LOADER, '-printf', '%u %m'], []);
      expect(r).toEqual({ code: 0, stdout: 'root 755', stderr: '' });
    });

    it('runs the command under the same filter: seccomp mode 2, namespaces and netlink refused, fork allowed', async () => {
      const r = await load(
        'grep "^Seccomp:" /proc/self/status; unshare -U true; python3 -c "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)" 2>&1 | tail -n 1; (exit 3) & wait $!; echo "fork $?"',
        compiled,
      );
      expect(r.stdout).toBe('Seccomp:\t2\nPermissionError: [Errno 1] Operation not permitted\nfork 3\n');
      expect(r.stderr).toBe('unshare: unshare failed: Operation not permitted\n');
    });

    it("passes output and exit status through, and keeps the program out of the command's environment", async () => {
      const r = await load('echo out; echo err >&2; env | grep -c ^LEMNISCATE_; exit 7', compiled);
      expect(r).toEqual({ code: 7, stdout: 'out\n0\n', stderr: 'err\n' });
    });

    it.each([
      ['no program at all', null, 'no compiled seccomp filter was passed to the loader.'],
      ['an empty program', '', 'no compiled seccomp filter was passed to the loader.'],
      ['text that is not base64', 'not base64!', 'the compiled seccomp filter is not a whole BPF program.'],
      ['a partial instruction', 'AAAA', 'the compiled seccomp filter is not a whole BPF program.'],
      ['a whole program the kernel rejects (no return)', Buffer.alloc(8).toString('base64'), 'the kernel refused the seccomp filter'],
    ])('refuses to run the command given %s (exit 126, one sentence)', async (_case, program, reason) => {
      const r = await load('echo ran', program);
      expect(r.code).toBe(126);
      expect(r.stdout).toBe('');
      expect(r.stderr.startsWith('The command was not run: ')).toBe(true);
      expect(r.stderr).toContain(reason);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    });

    it('refuses a call without exactly one command', async () => {
      const r = await run(container, [SECCOMP_LOADER, 'echo', 'ran'], [`${SECCOMP_LOADER_ENV}=${compiled}`]);
      expect(r).toEqual({ code: 126, stdout: '', stderr: 'The command was not run: the loader takes exactly one argument, the command.\n' });
    });
  });

  it("the driver compiles a gVisor sandbox's profile once and starts its commands through the loader", async () => {
    const driver = new DockerSandboxDriver();
    const first = await hardenedContainer('runsc');
    const second = await hardenedContainer('runsc');
    try {
      const execOnce = async (c: Docker.Container) => {
        let stdout = '';
        const outcome = await driver.exec(c.id, {
          command: 'grep "^Seccomp:" /proc/self/status; unshare -U true 2>/dev/null || echo refused',
          onStdout: (b) => (stdout += b.toString('utf8')),
          onStderr: () => undefined,
          signal: new AbortController().signal,
        });
        return { exitCode: outcome.exitCode, stdout };
      };
      expect(await execOnce(first)).toEqual({ exitCode: 0, stdout: 'Seccomp:\t2\nrefused\n' });
      expect(await execOnce(second)).toEqual({ exitCode: 0, stdout: 'Seccomp:\t2\nrefused\n' });
      const inner = driver as unknown as { compiledFilters: Map<string, Promise<string | null>>; execContexts: Map<string, { compiled: string | null }> };
      expect(inner.compiledFilters.size).toBe(1);
      expect(await [...inner.compiledFilters.values()][0]).toBe(compiled);
      expect(inner.execContexts.get(first.id)?.compiled).toBe(compiled);
      // No throwaway container is left behind.
      expect(await docker.listContainers({ all: true, filters: { label: ['lemniscate.purpose=seccomp-compile'] } })).toEqual([]);
    } finally {
      await first.remove({ force: true });
      await second.remove({ force: true });
      driver.close();
    }
  }, 120_000);
});
