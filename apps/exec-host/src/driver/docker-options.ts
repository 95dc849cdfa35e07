import type Docker from 'dockerode';
import { SANDBOX_GID, SANDBOX_UID, WORKSPACE_DIR, type SandboxContainerSpec } from './sandbox.driver';

/**
 * pid 1 of every sandbox: a shell that reaps orphans and cannot be signalled from inside its pid
 * namespace. That is what lets `kill -KILL -1` end every process of a command, its whole tree
 * included, without stopping the container (docker-init would exit with its only child).
 */
export const KEEPER_SCRIPT = 'trap "" TERM INT HUP; while :; do sleep 3600 & wait; done';

/**
 * gVisor (this release, with --oci-seccomp) applies the seccomp profile to the container's first
 * process only, not to processes started through exec. Under runsc, pid 1 therefore starts every
 * command itself, so each command inherits its filter: a relay started through exec, as a separate
 * uid the sandbox user cannot trace or signal (RELAY_UID), hands the command over through FIFOs in
 * /tmp (command, stdout, stderr, exit status; nothing stays on disk) and copies what comes back. The
 * relay's own programs (mkfifo, cat) are the only unfiltered ones; the sandbox user can at worst make
 * its own next command fail. pid 1 is immune to kill -1 as under runc.
 */
export const RUNSC_KEEPER_SCRIPT = "trap \"\" TERM INT HUP\nd=/tmp/.lemniscate\nmkdir -m 1777 \"$d\" \"$d/run\"\nwhile :; do\n  if [ ! -p \"$d/requests\" ]; then sleep 0.02; continue; fi\n  id=\n  read -r id < \"$d/requests\" || { sleep 0.1; continue; }\n  case \"$id\" in ''|*[!0-9a-f]*) continue ;; esac\n  r=\"$d/run/$id\"\n  [ -p \"$r/out\" ] && [ -p \"$r/err\" ] && [ -p \"$r/code\" ] && [ -p \"$r/cmd\" ] || continue\n  ( cd /workspace 2>/dev/null || cd /; exec /bin/bash -c \"$(cat \"$r/cmd\")\" ) 1>\"$r/out\" 2>\"$r/err\" </dev/null\n  code=$?\n  { echo \"$code\" >\"$r/code\"; } 2>/dev/null\ndone";

/** Run through exec as RELAY_UID: `bash -c RUNSC_RELAY_SCRIPT relay <command> <hex id>`. */
export const RUNSC_RELAY_SCRIPT = "d=/tmp/.lemniscate\nid=\"$2\"\nr=\"$d/run/$id\"\n[ -p \"$d/requests\" ] || mkfifo -m 0666 \"$d/requests\" || exit 125\nmkdir -m 0755 \"$r\" || exit 125\nmkfifo -m 0666 \"$r/cmd\" \"$r/out\" \"$r/err\" \"$r/code\" || exit 125\nprintf '%s' \"$1\" > \"$r/cmd\" &\nexec 3<>\"$r/code\"\ncat \"$r/out\" & o=$!\ncat \"$r/err\" >&2 & e=$!\necho \"$id\" > \"$d/requests\"\nread -r code <&3\nwait $o $e\nrm -rf \"$r\"\nexit \"${code:-125}\"";

export const RELAY_UID = 10002;

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
    Cmd: ['/bin/bash', '-c', spec.runtime === 'runsc' ? RUNSC_KEEPER_SCRIPT : KEEPER_SCRIPT],
    Entrypoint: [],
    User: `${SANDBOX_UID}:${SANDBOX_GID}`,
    WorkingDir: WORKSPACE_DIR,
    Env: [...SANDBOX_ENV],
    Labels: { ...spec.labels },
    Hostname: 'sandbox',
    NetworkDisabled: true,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    OpenStdin: false,
    Tty: false,
    HostConfig: {
      Runtime: spec.runtime,
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
      Mounts: [{ Type: 'bind', Source: spec.workspaceHostPath, Target: WORKSPACE_DIR, ReadOnly: false, BindOptions: { Propagation: 'rprivate' } }],
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
