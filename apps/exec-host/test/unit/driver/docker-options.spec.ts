import { KEEPER_SCRIPT, RUNSC_PIDS_BACKSTOP, SANDBOX_ENV, toDockerCreateOptions } from '../../../src/driver/docker-options';
import type { SandboxContainerSpec } from '../../../src/driver/sandbox.driver';

const spec: SandboxContainerSpec = {
  name: 'lemniscate-sbx-1',
  image: 'lemniscate/sandbox:current',
  runtime: 'runsc',
  labels: { 'lemniscate.managed': '1', 'lemniscate.session': 's-1' },
  workspaceHostPath: '/var/lib/lemniscate/exec-host/sandboxes/sbx-1/work',
  cpus: 1.5,
  memoryBytes: 512 * 1024 * 1024,
  pids: 256,
  tmpfsBytes: 64 * 1024 * 1024,
  fileSizeBytes: 1024 * 1024 * 1024,
  openFiles: 4096,
  seccompProfile: '{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[]}',
  apparmorProfile: 'lemniscate-sandbox',
};

describe('toDockerCreateOptions', () => {
  const o = toDockerCreateOptions(spec);
  const h = o.HostConfig!;

  it('gives the container no network at all (G05, S3)', () => {
    expect(h.NetworkMode).toBe('none');
    expect(o.NetworkDisabled).toBe(true);
    expect(h.Dns).toEqual([]);
    expect(h.ExtraHosts).toEqual([]);
  });

  it('makes the root file system read-only with a capped noexec tmpfs as /tmp only (S2)', () => {
    expect(h.ReadonlyRootfs).toBe(true);
    expect(h.Tmpfs).toEqual({ '/tmp': `rw,noexec,nosuid,nodev,size=${64 * 1024 * 1024},mode=1777` });
  });

  it('drops every capability and privilege (S1)', () => {
    expect(h.CapDrop).toEqual(['ALL']);
    expect(h.CapAdd).toEqual([]);
    expect(h.Privileged).toBe(false);
    expect(h.SecurityOpt).toContain('no-new-privileges:true');
    // pid 1 (the keeper) runs as a user of its own; every command runs as the sandbox user.
    expect(o.User).toBe('10000:10000');
  });

  it('applies the validated seccomp profile inline and AppArmor when given', () => {
    expect(h.SecurityOpt).toContain(`seccomp=${spec.seccompProfile}`);
    expect(h.SecurityOpt).toContain('apparmor=lemniscate-sandbox');
    const without = toDockerCreateOptions({ ...spec, apparmorProfile: null }).HostConfig!;
    expect(without.SecurityOpt!.some((s: string) => s.startsWith('apparmor='))).toBe(false);
    expect(without.SecurityOpt).toContain('no-new-privileges:true');
  });

  it('caps memory with swap equal, CPU, open files and file size (S4)', () => {
    expect(h.Memory).toBe(512 * 1024 * 1024);
    expect(h.MemorySwap).toBe(h.Memory);
    expect(h.NanoCpus).toBe(1_500_000_000);
    expect(h.Ulimits).toEqual(
      expect.arrayContaining([
        { Name: 'nofile', Soft: 4096, Hard: 4096 },
        { Name: 'fsize', Soft: 1024 * 1024 * 1024, Hard: 1024 * 1024 * 1024 },
      ]),
    );
  });

  it('caps processes with the pids cgroup under runc', () => {
    const runc = toDockerCreateOptions({ ...spec, runtime: 'runc' }).HostConfig!;
    expect(runc.PidsLimit).toBe(256);
    expect(runc.Ulimits!.some((u) => u.Name === 'nproc')).toBe(false);
  });

  it('caps processes inside gVisor with RLIMIT_NPROC, keeping the cgroup as a backstop for the sentry', () => {
    expect(h.Ulimits).toContainEqual({ Name: 'nproc', Soft: 256, Hard: 256 });
    expect(h.PidsLimit).toBe(RUNSC_PIDS_BACKSTOP);
  });

  it('mounts the working copy as the only volume, and nothing else from the host (S2, S6)', () => {
    expect(h.Mounts).toEqual([{ Type: 'bind', Source: spec.workspaceHostPath, Target: '/workspace', ReadOnly: false, BindOptions: { Propagation: 'rprivate' } }]);
    expect(h.Binds).toEqual([]);
    expect(h.Devices).toEqual([]);
    expect(JSON.stringify(o)).not.toContain('docker.sock');
    expect(o.WorkingDir).toBe('/workspace');
  });

  it('passes no host environment, only a minimal PATH, HOME and LANG (S6)', () => {
    expect(o.Env).toEqual(SANDBOX_ENV);
    expect(o.Env!.map((e) => e.split('=')[0])).toEqual(['PATH', 'HOME', 'LANG']);
  });

  it('runs the chosen runtime, labelled with the session, private namespaces, no restart', () => {
    expect(h.Runtime).toBe('runsc');
    expect(o.Labels).toEqual(spec.labels);
    expect(h.IpcMode).toBe('private');
    expect(h.PidMode).toBe('');
    expect(h.UsernsMode).toBe('');
    expect(h.RestartPolicy).toEqual({ Name: 'no' });
  });

  it('runs a reaping pid 1 that kill -1 cannot end, instead of docker-init', () => {
    expect(h.Init).toBe(false);
    expect(o.Cmd).toEqual(['/bin/bash', '-c', KEEPER_SCRIPT]);
    expect(toDockerCreateOptions({ ...spec, runtime: 'runc' }).Cmd).toEqual(['/bin/bash', '-c', KEEPER_SCRIPT]);
    expect(o.Entrypoint).toEqual([]);
  });
});
