import type Docker from 'dockerode';
import { KEEPER_GID, KEEPER_UID, WORKSPACE_DIR, type SandboxContainerSpec } from './sandbox.driver';

/**
 * pid 1 of every sandbox: a shell that reaps orphans and cannot be signalled from inside its pid
 * namespace. That is what lets `kill -KILL -1` end every process of a command, its whole tree
 * included, without stopping the container (docker-init would exit with its only child). It runs as
 * KEEPER_UID, so no command can write into it (`/proc/1/mem`) and live on as pid 1; every command
 * runs as SANDBOX_UID (toExecOptions).
 */
export const KEEPER_SCRIPT = 'trap "" TERM INT HUP; while :; do sleep 3600 & wait; done';

/** The only environment a sandbox gets: nothing from the host (S6). */
export const SANDBOX_ENV = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/tmp', 'LANG=C.UTF-8'];

/**
 * Under gVisor the pids cgroup counts the sentry's host threads, not the sandbox's processes: a tight
 * cgroup cap crashes the sentry. There the process cap is RLIMIT_NPROC, enforced by gVisor's own
 * kernel (private to the sandbox), and the cgroup keeps a generous backstop for the host's sake.
 * Under runc RLIMIT_NPROC would count every sandbox's uid 10001 on the host, so the cgroup is the cap.
 */
export const RUNSC_PIDS_BACKSTOP = 16_384;

/** The hardened container definition (G04, G05, S1–S4, S6). Pure, so a unit test can check every flag. */
export function toDockerCreateOptions(spec: SandboxContainerSpec): Docker.ContainerCreateOptions {
  const securityOpt = ['no-new-privileges:true', `seccomp=${spec.seccompProfile}`];
  if (spec.apparmorProfile) securityOpt.push(`apparmor=${spec.apparmorProfile}`);
  return {
    name: spec.name,
    Image: spec.image,
    Cmd: ['/bin/bash', '-c', KEEPER_SCRIPT],
    Entrypoint: [],
    User: `${KEEPER_UID}:${KEEPER_GID}`,
    WorkingDir: WORKSPACE_DIR,
    Env: [...SANDBOX_ENV, ...(spec.env ?? [])],
    Labels: { ...spec.labels },
    Hostname: 'sandbox',
    NetworkDisabled: true,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    OpenStdin: false,
    Tty: false,
    HostConfig: {
      Runtime: spec.engineRuntime ?? spec.runtime,
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': `rw,noexec,nosuid,nodev,size=${spec.tmpfsBytes},mode=1777` },
      CapDrop: ['ALL'],
      CapAdd: [],
      Privileged: false,
      SecurityOpt: securityOpt,
      PidsLimit: spec.runtime === 'runsc' ? Math.max(RUNSC_PIDS_BACKSTOP, spec.pids) : spec.pids,
      Memory: spec.memoryBytes,
      MemorySwap: spec.memoryBytes,
      NanoCpus: Math.round(spec.cpus * 1e9),
      Ulimits: [
        { Name: 'nofile', Soft: spec.openFiles, Hard: spec.openFiles },
        { Name: 'fsize', Soft: spec.fileSizeBytes, Hard: spec.fileSizeBytes },
        ...(spec.runtime === 'runsc' ? [{ Name: 'nproc', Soft: spec.pids, Hard: spec.pids }] : []),
      ],
      // pid 1 is KEEPER_SCRIPT, which reaps orphans itself (see above).
      Init: false,
      Mounts: [
        { Type: 'bind', Source: spec.workspaceHostPath, Target: WORKSPACE_DIR, ReadOnly: false, BindOptions: { Propagation: 'rprivate' } },
        ...(spec.extraMounts ?? []).map((m) => ({ Type: 'bind' as const, Source: m.source, Target: m.target, ReadOnly: m.readOnly, BindOptions: { Propagation: 'rprivate' as const } })),
      ],
      Binds: [],
      Devices: [],
      IpcMode: 'private',
      PidMode: '',
      UsernsMode: '',
      Dns: [],
      DnsSearch: [],
      ExtraHosts: [],
      RestartPolicy: { Name: 'no' },
      AutoRemove: false,
      LogConfig: { Type: 'none', Config: {} },
      OomKillDisable: false,
    },
  };
}
