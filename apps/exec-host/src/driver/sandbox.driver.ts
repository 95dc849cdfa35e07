/**
 * The narrow port in front of the container engine. Nothing outside driver/docker.*.ts knows about
 * dockerode; tests of the services can run against this interface alone.
 */

export const SANDBOX_DRIVER = Symbol('SANDBOX_DRIVER');

export const LABEL_MANAGED = 'lemniscate.managed';
export const LABEL_SESSION = 'lemniscate.session';
export const LABEL_SANDBOX = 'lemniscate.sandbox';
export const LABEL_INSTANCE = 'lemniscate.exec-host';

/** The runtime family of an engine runtime name: `runsc-setup` is gVisor like `runsc`. */
export function runtimeFamily(engineRuntime: string): 'runc' | 'runsc' {
  return engineRuntime === 'runsc' || engineRuntime.startsWith('runsc-') ? 'runsc' : 'runc';
}

/** gVisor for a set-up: as `runsc`, plus `--host-uds=open` so the set-up reaches its egress socket. */
export const RUNSC_SETUP_RUNTIME = 'runsc-setup';

export const SANDBOX_UID = 10001;
export const SANDBOX_GID = 10001;
/**
 * The sandbox's pid 1 (the keeper, KEEPER_SCRIPT) runs as a user of its own, never the sandbox user's:
 * a command may signal, trace, or write the memory (`/proc/PID/mem`) of processes of its own user
 * only, so it cannot take the keeper over and outlive its kill through it. Nothing runs as this
 * user but the keeper and its `sleep`; it owns no file.
 */
export const KEEPER_UID = 10000;
export const KEEPER_GID = 10000;
export const WORKSPACE_DIR = '/workspace';

export interface SandboxContainerSpec {
  name: string;
  image: string;
  runtime: 'runc' | 'runsc';
  labels: Record<string, string>;
  /** Host directory bound at /workspace: the only writable volume. */
  workspaceHostPath: string;
  cpus: number;
  memoryBytes: number;
  pids: number;
  tmpfsBytes: number;
  fileSizeBytes: number;
  openFiles: number;
  /** Validated seccomp profile as compact JSON. */
  seccompProfile: string;
  /** AppArmor profile name, or null when the host kernel has none. */
  apparmorProfile: string | null;
  /**
   * The engine's name of the runtime when it is not `runtime` itself: a variant of the same family
   * (the set-up's `runsc-setup`, gVisor allowed to connect to its egress socket).
   */
  engineRuntime?: string;
  /** Variables added to the sandbox's fixed environment (a devcontainer's containerEnv; a set-up's proxy). */
  env?: string[];
  /** Host paths bound besides the working copy (a set-up's egress socket and CA bundle), read-only unless said. */
  extraMounts?: { source: string; target: string; readOnly: boolean }[];
}

/** What the engine knows of a local image. */
export interface ImageInfo {
  id: string;
  /** Its filesystem layers, bottom first: an image derives from another when their layers start alike. */
  layers: string[];
}

export interface ImageBuild {
  tag: string;
  /** The Dockerfile's path inside the context. */
  dockerfile: string;
  buildArgs: Record<string, string>;
  labels: Record<string, string>;
  onOutput: (line: string) => void;
  signal: AbortSignal;
}

export interface ContainerRef {
  id: string;
  name: string;
  labels: Record<string, string>;
  running: boolean;
}

export interface ContainerStatus {
  running: boolean;
  exitCode: number | null;
  oomKilled: boolean;
  /** The exec-host stopped it (a sandbox whose processes could not be killed), so a SIGKILL exit is not an OOM. */
  stoppedByHost: boolean;
}

/** Counters of the container's cgroup that tell why a command failed; null where the layout cannot know them. */
export interface ResourceCounters {
  oomKills: number | null;
  pidsLimitHits: number | null;
}

/** How the exec-host reaches its containers' cgroups (health): the files of v1 or v2, or only the engine. */
export interface CgroupReport {
  layout: 'v1' | 'v2' | 'engine';
  /** What is weaker than the files, as sentences; absent when nothing is. */
  message?: string;
}

export interface ExecSpec {
  command: string;
  /** Called with raw bytes as they arrive. */
  onStdout: (chunk: Buffer) => void;
  onStderr: (chunk: Buffer) => void;
  /** Aborting kills every process of the sandbox user and resolves with what is known. */
  signal: AbortSignal;
  /** What the command reads on its stdin (a local MCP server's messages); none: stdin is not attached. */
  stdin?: NodeJS.ReadableStream;
}

export interface ExecOutcome {
  exitCode: number | null;
  /** The container stopped while the command ran. */
  containerDied: boolean;
  oomEvent: boolean;
}

export interface EngineInfo {
  reachable: boolean;
  version: string | null;
  runtimes: string[];
  message?: string;
}

export interface SandboxDriver {
  info(): Promise<EngineInfo>;
  imagePresent(image: string): Promise<boolean>;
  /** Creates and starts the container; returns its id. */
  createAndStart(spec: SandboxContainerSpec): Promise<string>;
  /**
   * Learns now what the first command would otherwise look up (the container's runtime, profile and
   * cgroup), so a sandbox made ahead of its session runs its first command as fast as its next ones.
   */
  warmUp?(containerId: string): Promise<void>;
  status(containerId: string): Promise<ContainerStatus | null>;
  exec(containerId: string, spec: ExecSpec): Promise<ExecOutcome>;
  /** Sends SIGKILL to every process of the sandbox user; the container's pid 1 survives, and so does the sandbox's runner when it does the kill. */
  killAllUserProcesses(containerId: string): Promise<void>;
  /** Stops the container at once (the sandbox is then lost); used when its processes cannot be killed from inside. */
  stop(containerId: string): Promise<void>;
  counters(containerId: string): Promise<ResourceCounters>;
  /** The cgroup layout chosen at start-up, and what is weaker than it promises. */
  cgroups(): CgroupReport;
  /** Removes the container; a container already gone (404) or already stopped (304) is success. */
  remove(containerId: string): Promise<void>;
  listManaged(instance: string): Promise<ContainerRef[]>;
  /** Null when the engine has no such image. */
  imageInfo(image: string): Promise<ImageInfo | null>;
  /** Builds an image from a tar context with no network; resolves with its id, rejects with the build's last error line. */
  buildImage(context: NodeJS.ReadableStream, build: ImageBuild): Promise<string>;
  /** Removes an image by tag or id; one already gone is success. */
  removeImage(image: string): Promise<void>;
}
