import { SANDBOX_ENV, toDockerCreateOptions } from '../../../src/driver/docker-options';
import {
  SECCOMP_LAUNCHER,
  SECCOMP_LAUNCHER_ENV,
  SECCOMP_LOADER,
  SECCOMP_LOADER_ENV,
  compileContainerOptions,
  compiledFilterOf,
  seccompEnforcement,
  seccompProfileOf,
  toExecOptions,
} from '../../../src/driver/seccomp-launcher';
import type { SandboxContainerSpec } from '../../../src/driver/sandbox.driver';

const profile = '{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}';

describe('toExecOptions', () => {
  it("under gVisor, starts the command through the seccomp launcher with the container's own profile (S1)", () => {
    const e = toExecOptions('npm test && echo "done"', 'runsc', profile);
    expect(e.Cmd).toEqual([SECCOMP_LAUNCHER, 'npm test && echo "done"']);
    expect(e.Env).toEqual([...SANDBOX_ENV, `${SECCOMP_LAUNCHER_ENV}=${profile}`]);
  });

  it('under gVisor without a profile, passes none, so the launcher refuses the command', () => {
    const e = toExecOptions('true', 'runsc', null);
    expect(e.Cmd).toEqual([SECCOMP_LAUNCHER, 'true']);
    expect(e.Env).toEqual([...SANDBOX_ENV]);
  });

  it('under gVisor with the profile compiled, starts the command through the static loader with the program only', () => {
    const e = toExecOptions('npm test', 'runsc', profile, 'IAAAAAQAAAA=');
    expect(e.Cmd).toEqual([SECCOMP_LOADER, 'npm test']);
    expect(e.Env).toEqual([...SANDBOX_ENV, `${SECCOMP_LOADER_ENV}=IAAAAAQAAAA=`]);
  });

  it('a compiled program without the profile it came from is never used: the launcher refuses instead', () => {
    const e = toExecOptions('true', 'runsc', null, 'IAAAAAQAAAA=');
    expect(e.Cmd).toEqual([SECCOMP_LAUNCHER, 'true']);
    expect(e.Env).toEqual([...SANDBOX_ENV]);
  });

  it('under runc, where the engine filters exec itself, runs bash directly and passes no profile', () => {
    const e = toExecOptions('make', 'runc', profile);
    expect(e.Cmd).toEqual(['/bin/bash', '-c', 'make']);
    expect(e.Env).toEqual([...SANDBOX_ENV]);
  });

  it.each(['runc', 'runsc'])('under %s, runs as the unprivileged sandbox user in the working copy, without a terminal', (runtime) => {
    const e = toExecOptions('true', runtime, profile);
    expect(e).toMatchObject({ User: '10001:10001', WorkingDir: '/workspace', Privileged: false, Tty: false, AttachStdin: false });
  });
});

describe('compiledFilterOf', () => {
  const program = Buffer.alloc(16, 7);

  it('keeps a whole BPF program printed as one base64 line', () => {
    expect(compiledFilterOf(`${program.toString('base64')}\n`)).toBe(program.toString('base64'));
  });

  it.each([
    ['nothing', ''],
    ['a partial instruction', Buffer.alloc(12).toString('base64')],
    ['text that is not base64', 'not base64!'],
    ['two lines', `${program.toString('base64')}\n${program.toString('base64')}`],
    ['more than the kernel accepts', Buffer.alloc(4097 * 8).toString('base64')],
  ])('refuses %s, so commands fall back to the launcher', (_case, output) => {
    expect(compiledFilterOf(output)).toBeNull();
  });
});

describe('compileContainerOptions', () => {
  it('compiles in a throwaway container with nothing of a session: runc, no network, read-only, no capabilities, capped', () => {
    const o = compileContainerOptions('sha256:abc', profile, { 'lemniscate.purpose': 'seccomp-compile' });
    expect(o.Cmd).toEqual([SECCOMP_LAUNCHER, '--export-bpf']);
    expect(o.Env).toEqual([...SANDBOX_ENV, `${SECCOMP_LAUNCHER_ENV}=${profile}`]);
    expect(o).toMatchObject({ Image: 'sha256:abc', User: '10001:10001', NetworkDisabled: true });
    expect(o.HostConfig).toMatchObject({ Runtime: 'runc', NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges:true'], PidsLimit: 16 });
    expect(o.HostConfig!.Binds ?? []).toEqual([]);
    expect(o.HostConfig!.Mounts ?? []).toEqual([]);
  });
});

describe('seccompProfileOf', () => {
  it('reads the inline profile back from the security options the container was created with', () => {
    const spec = { seccompProfile: profile, runtime: 'runsc', labels: {}, pids: 64 } as unknown as SandboxContainerSpec;
    expect(seccompProfileOf(toDockerCreateOptions(spec).HostConfig!.SecurityOpt)).toBe(profile);
    expect(seccompProfileOf(['no-new-privileges:true', `seccomp:${profile}`])).toBe(profile);
  });

  it('finds none without options, without a seccomp option, or with unconfined or a file path', () => {
    expect(seccompProfileOf(undefined)).toBeNull();
    expect(seccompProfileOf(null)).toBeNull();
    expect(seccompProfileOf(['no-new-privileges:true'])).toBeNull();
    expect(seccompProfileOf(['seccomp=unconfined'])).toBeNull();
    expect(seccompProfileOf(['seccomp=/etc/docker/seccomp.json'])).toBeNull();
  });
});

describe('seccompEnforcement', () => {
  it('says the engine applies the profile under runc, and names the launcher when runsc is registered', () => {
    expect(seccompEnforcement(false)).toBe('Under runc the engine applies the profile to every process of the sandbox.');
    expect(seccompEnforcement(true)).toContain(
      `every command applies it to itself through the sandbox image's launcher (${SECCOMP_LAUNCHER}, or its static loader ${SECCOMP_LOADER} with the profile compiled once)`,
    );
  });
});
