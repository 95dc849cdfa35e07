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
 * The fast path: a static loader in the image that installs the profile already compiled to BPF (by
 * the launcher itself, `--export-bpf`, once per image and profile in a throwaway container) and runs
 * `bash -c COMMAND`; no Python start per command. Refuses (exit 126) on anything unexpected.
 */
export const SECCOMP_LOADER = '/usr/local/lib/lemniscate/seccomp-load';
export const SECCOMP_LOADER_ENV = 'LEMNISCATE_SANDBOX_SECCOMP_BPF';
/** The kernel's bound on a classic BPF program (BPF_MAXINSNS), 8 bytes an instruction. */
const MAX_BPF_BYTES = 4096 * 8;

/**
 * The compiled program as the export printed it (one base64 line), checked to be a whole BPF program
 * and normalised; null when it is not one, so the caller falls back to the launcher.
 */
export function compiledFilterOf(output: string): string | null {
  const text = output.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 !== 0) return null;
  const program = Buffer.from(text, 'base64');
  if (program.length === 0 || program.length % 8 !== 0 || program.length > MAX_BPF_BYTES) return null;
  return program.toString('base64');
}

/**
 * The throwaway container that compiles a profile: the sandbox image's own launcher under runc, no
 * network, read-only, no capabilities, capped; nothing of any session in it.
 */
export function compileContainerOptions(image: string, profile: string, labels: Record<string, string>): Docker.ContainerCreateOptions {
  return {
    Image: image,
    Cmd: [SECCOMP_LAUNCHER, '--export-bpf'],
    Env: [...SANDBOX_ENV, `${SECCOMP_LAUNCHER_ENV}=${profile}`],
    User: `${SANDBOX_UID}:${SANDBOX_GID}`,
    WorkingDir: '/',
    NetworkDisabled: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    Labels: labels,
    HostConfig: {
      Runtime: 'runc',
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      Memory: 256 * 1024 * 1024,
      MemorySwap: 256 * 1024 * 1024,
      NanoCpus: 1_000_000_000,
      PidsLimit: 16,
    },
  };
}

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

/**
 * How one command is started: as the sandbox user in the working copy, with the sandbox environment;
 * under runsc through the loader when the profile is compiled, through the launcher otherwise.
 */
export function toExecOptions(command: string, runtime: string, seccompProfile: string | null, compiledFilter: string | null = null, stdin = false): Docker.ExecCreateOptions {
  const launched = runtime === 'runsc';
  const loaded = launched && seccompProfile !== null && compiledFilter !== null;
  let env: string[] = [];
  if (loaded) env = [`${SECCOMP_LOADER_ENV}=${compiledFilter}`];
  else if (launched && seccompProfile) env = [`${SECCOMP_LAUNCHER_ENV}=${seccompProfile}`];
  return {
    Cmd: loaded ? [SECCOMP_LOADER, command] : launched ? [SECCOMP_LAUNCHER, command] : ['/bin/bash', '-c', command],
    User: `${SANDBOX_UID}:${SANDBOX_GID}`,
    WorkingDir: WORKSPACE_DIR,
    Env: [...SANDBOX_ENV, ...env],
    AttachStdin: stdin,
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
  return `${runc} Under runsc, whose release here applies it to the first process only, every command applies it to itself through the sandbox image's launcher (${SECCOMP_LAUNCHER}, or its static loader ${SECCOMP_LOADER} with the profile compiled once) and is refused if it cannot.`;
}
