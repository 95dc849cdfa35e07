import type Docker from 'dockerode';
import { SANDBOX_ENV } from './docker-options';
import { SANDBOX_GID, SANDBOX_UID, WORKSPACE_DIR } from './sandbox.driver';

/**
 * This host's gVisor (2022-12, `--oci-seccomp`) applies the container's seccomp profile to pid 1 only
 * (google/gvisor#12693). Under runsc every command is therefore started by this launcher, installed
 * root-owned in the read-only image by images/sandbox/rootfs-setup.sh: it applies the profile to itself
 * with libseccomp, then runs `bash -c COMMAND`, and refuses (exit 126) rather than run a command
 * unfiltered. Under runc Docker's own filter already covers exec, so the launcher's cost is not paid
 * there (docs/decisions/0008-seccomp-under-gvisor-exec.md).
 */
export const SECCOMP_LAUNCHER = '/usr/local/lib/lemniscate/seccomp-exec';
/** The launcher reads the profile from this variable and removes it before running the command. */
export const SECCOMP_LAUNCHER_ENV = 'LEMNISCATE_SANDBOX_SECCOMP';

/**
 * The profile a container was created with, as the engine reports it in HostConfig.SecurityOpt: the
 * exact text validated before the create, never anything the sandbox could have written. null when
 * the container has none inline (the launcher then refuses every command).
 */
export function seccompProfileOf(securityOpt: readonly string[] | null | undefined): string | null {
  const opt = securityOpt?.find((o) => o.startsWith('seccomp=') || o.startsWith('seccomp:'));
  const profile = opt?.slice('seccomp='.length);
  return profile?.startsWith('{') ? profile : null;
}

/** How one command is started: as the sandbox user in the working copy, with the sandbox environment. */
export function toExecOptions(command: string, runtime: string, seccompProfile: string | null): Docker.ExecCreateOptions {
  const launched = runtime === 'runsc';
  return {
    Cmd: launched ? [SECCOMP_LAUNCHER, command] : ['/bin/bash', '-c', command],
    User: `${SANDBOX_UID}:${SANDBOX_GID}`,
    WorkingDir: WORKSPACE_DIR,
    Env: [...SANDBOX_ENV, ...(launched && seccompProfile ? [`${SECCOMP_LAUNCHER_ENV}=${seccompProfile}`] : [])],
    AttachStdin: false,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    Privileged: false,
  };
}

/** What health says applies the profile, so an operator knows how gVisor sandboxes get it. */
export function seccompEnforcement(runscRegistered: boolean): string {
  const runc = 'Under runc the engine applies the profile to every process of the sandbox.';
  if (!runscRegistered) return runc;
  return `${runc} Under runsc, whose release here applies it to the first process only, every command applies it to itself through the sandbox image's launcher (${SECCOMP_LAUNCHER}) and is refused if it cannot.`;
}
