import Docker from 'dockerode';
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { PassThrough, type Duplex, type Readable } from 'node:stream';
import { chooseCgroups, EngineCgroups, killAllButInit, type CgroupAccess, type CgroupLayout, type CgroupLayoutChoice, type ContainerCgroup, type EngineControl } from './cgroups';
import { toDockerCreateOptions } from './docker-options';
import { within } from '../within';
import { compileContainerOptions, compiledFilterOf, seccompProfileOf, toExecOptions } from './seccomp-launcher';
import { RUNNER_MAX_FRAME, RunnerLost, runnerExecOptions, SandboxRunner } from './runner';
import {
  LABEL_INSTANCE,
  LABEL_MANAGED,
  runtimeFamily,
  KEEPER_UID,
  SANDBOX_GID,
  SANDBOX_UID,
  type ContainerRef,
  type CgroupReport,
  type ContainerStatus,
  type EngineInfo,
  type ExecOutcome,
  type ExecSpec,
  type ImageBuild,
  type ImageInfo,
  type ResourceCounters,
  type SandboxContainerSpec,
  type SandboxDriver,
} from './sandbox.driver';

type ContainerEvent = 'die' | 'oom';

/** Settles when an engine stream is over, however it ends (an error included: the caller reads the status). */
function streamDone(stream: Readable): Promise<void> {
  return new Promise((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
}

interface ExecContext {
  runtime: string;
  profile: string | null;
  compiled: string | null;
  /** The container's memory cap in bytes (0: none). */
  memoryBytes: number;
  /** The container's process cap for the sandbox user (RLIMIT_NPROC under runsc; 0: none). */
  processes: number;
}

/**
 * Under gVisor the sandbox's whole kernel lives in the memory cgroup: a command that reaches the cap
 * takes the sandbox down with it, not just itself. So every command there starts with its address
 * space capped at the sandbox's memory (RLIMIT_AS, hard and soft, which the sandbox user cannot raise):
 * an allocation past it fails inside the command (ENOMEM, MemoryError), which ends the command and
 * leaves the sandbox running, as the kernel's OOM killer does under runc.
 */
export function withMemoryCap(command: string, runtime: string, memoryBytes: number): string {
  if (runtime !== 'runsc' || memoryBytes <= 0) return command;
  return `ulimit -v ${Math.floor(memoryBytes / 1024)}\n${command}`;
}

/**
 * How many of the sandbox user's processes are kept out of a command's reach under gVisor: the kill
 * that ends the command is a process of that same user, and a kill that cannot be spawned leaves the
 * exec-host nothing but stopping the sandbox.
 */
export function processHeadroom(processes: number): number {
  return Math.min(32, Math.max(4, Math.floor(processes / 8)));
}

/**
 * Under gVisor the process cap is RLIMIT_NPROC of the sandbox user (see RUNSC_PIDS_BACKSTOP), and the
 * exec-host's kill is a new process of that user. A fork bomb that filled the cap would leave no room
 * for it, and the sandbox would be lost. So every command there starts with a lower RLIMIT_NPROC
 * (hard and soft, which the sandbox user cannot raise again): the bomb's forks fail with EAGAIN at
 * `processes - processHeadroom(processes)`, and the kill, started with the container's full limit,
 * still has room. Under runc the kill goes through the freezer cgroup and needs no new process.
 */
export function withProcessCap(command: string, runtime: string, processes: number): string {
  if (runtime !== 'runsc' || processes <= 0) return command;
  return `ulimit -u ${Math.max(1, processes - processHeadroom(processes))}\n${command}`;
}

/** Every per-command cap of a runtime, in front of the command (the command's text is unchanged). */
export function withCommandCaps(command: string, runtime: string, caps: { memoryBytes: number; processes: number }): string {
  return withProcessCap(withMemoryCap(command, runtime, caps.memoryBytes), runtime, caps.processes);
}

/** Repeats kill(-1) until it finds nothing to signal (exit 0), or gives up after 1000 rounds (exit 2). */
export const KILL_EVERY_PROCESS = 'n=0; while kill -KILL -1 2>/dev/null; do n=$((n+1)); if [ "$n" -ge 1000 ]; then exit 2; fi; done; exit 0';

function statusCode(e: unknown): number | undefined {
  return (e as { statusCode?: number }).statusCode;
}

/** How many times a container's removal is asked of an engine that answered it with a failure of its own. */
const REMOVE_ATTEMPTS = 3;

/** How long a removal waits for the container to exit after its kill before it asks the engine to remove it anyway. */
const ENDED_WAIT_MS = 60_000;

/** How long a command killed by SIGKILL waits for the engine's `oom` event, where that event is the only OOM count. */
const OOM_EVENT_GRACE_MS = 1_000;

export interface DockerDriverOptions {
  /** How to reach the engine; by default DOCKER_HOST, else /var/run/docker.sock. */
  docker?: Docker.DockerOptions;
  /** Where the host's / is, for its cgroup files and /proc (tests: a recorded tree). */
  cgroupRoot?: string;
  /** `auto` (the layout the host has) or one forced: LEMNISCATE_CGROUP_LAYOUT. */
  cgroupLayout?: CgroupLayoutChoice;
  /** Tests only: the cgroup access itself, given the engine's part. */
  cgroupAccess?: (engine: EngineControl) => CgroupAccess;
  /** How long to wait before asking the engine again for a removal it failed (default 2 s). */
  removeRetryMs?: number;
  /** How long a removal waits for the container to exit after its kill (default 60 s). */
  endedWaitMs?: number;
  /**
   * Commands through the sandbox's runner, one per sandbox (default); false: an engine exec per
   * command, as for an image without a runner (LEMNISCATE_SANDBOX_RUNNER=off, config.ts).
   */
  runner?: boolean;
  /** Tests only: where the runner is looked for in the image (an image without one). */
  runnerPath?: string;
}

/** One container's cgroup as this driver reaches it, found once from its init and kept while it lives. */
interface ContainerCgroupState {
  id: string;
  initPid: number;
  runtime: 'runc' | 'runsc';
  cgroup: ContainerCgroup;
  /** The layout this container is handled through: the driver's, or the engine when its files were not found. */
  layout: CgroupLayout;
}

/** The SandboxDriver on a Docker engine (dockerode). */
export class DockerSandboxDriver implements SandboxDriver {
  private readonly docker: Docker;
  private readonly listeners = new Map<string, Set<(e: ContainerEvent) => void>>();
  private readonly containerCgroups = new Map<string, ContainerCgroupState>();
  /** The layout chosen at start-up. */
  private readonly cgroupAccess: CgroupAccess;
  /** The engine layer, for containers whose cgroup files cannot be found from here. */
  private readonly engineCgroups: CgroupAccess;
  /** The latest reason a container was handled a weaker way than the layout promises, for health. */
  private readonly cgroupNotes = new Map<'located' | 'killed', string>();
  /** The engine's `oom` events per container since the event stream started. */
  private readonly oomEvents = new Map<string, number>();
  /** Containers this driver stopped itself: their death is not an out-of-memory kill. */
  private readonly stoppedByHost = new Set<string>();
  /** Each container's runtime and the seccomp profile it was created with, for the launcher. */
  private readonly execContexts = new Map<string, ExecContext>();
  /** Profiles compiled to BPF for the image's static loader, by image and profile; null: use the launcher. */
  private readonly compiledFilters = new Map<string, Promise<string | null>>();
  /** Each container's runner (null: its image has none, or it did not start: commands go the engine's way). */
  private readonly runners = new Map<string, Promise<SandboxRunner | null>>();
  private readonly runnerEnabled: boolean;
  private readonly runnerPath: string | undefined;
  private events: Readable | null = null;
  private eventsStarting: Promise<void> | null = null;
  private closed = false;
  private readonly removeRetryMs: number;
  private readonly endedWaitMs: number;

  /** Chooses the cgroup layout at once (see chooseCgroups); a forced layout the host lacks throws a CgroupError. */
  constructor(options: DockerDriverOptions = {}) {
    this.docker = new Docker(options.docker);
    this.removeRetryMs = options.removeRetryMs ?? 2_000;
    this.endedWaitMs = options.endedWaitMs ?? ENDED_WAIT_MS;
    this.runnerEnabled = options.runner ?? true;
    this.runnerPath = options.runnerPath;
    const engine = this.engineControl();
    this.engineCgroups = new EngineCgroups(engine, path.join(options.cgroupRoot ?? '/', 'proc'));
    this.cgroupAccess = options.cgroupAccess ? options.cgroupAccess(engine) : chooseCgroups({ root: options.cgroupRoot ?? '/', layout: options.cgroupLayout ?? 'auto' }, engine);
  }

  cgroups(): CgroupReport {
    const notes = [...this.cgroupNotes.values()];
    const message = [this.cgroupAccess.message, ...notes].filter(Boolean).join(' ');
    return { layout: this.cgroupAccess.layout, ...(message ? { message } : {}) };
  }

  /** The engine's part of the engine layer. */
  private engineControl(): EngineControl {
    return {
      pause: async (id) => {
        await this.docker.getContainer(id).pause();
      },
      unpause: async (id) => {
        await this.docker.getContainer(id).unpause();
      },
      top: async (id) => {
        const top = (await this.docker.getContainer(id).top()) as { Titles?: string[]; Processes?: string[][] };
        const column = (top.Titles ?? []).indexOf('PID');
        if (column < 0) throw new Error(`The engine listed the processes of container ${id.slice(0, 12)} without a PID column.`);
        return (top.Processes ?? []).map((row) => Number(row[column]));
      },
      oomKills: (id) => (this.events ? (this.oomEvents.get(id) ?? 0) : null),
    };
  }

  async info(): Promise<EngineInfo> {
    try {
      const info = (await this.docker.info()) as { ServerVersion?: string; Runtimes?: Record<string, unknown> };
      return { reachable: true, version: info.ServerVersion ?? null, runtimes: Object.keys(info.Runtimes ?? {}) };
    } catch (e) {
      return { reachable: false, version: null, runtimes: [], message: `The container engine does not answer: ${(e as Error).message}` };
    }
  }

  async imagePresent(image: string): Promise<boolean> {
    try {
      await this.docker.getImage(image).inspect();
      return true;
    } catch (e) {
      if (statusCode(e) === 404) return false;
      throw e;
    }
  }

  async imageInfo(image: string): Promise<ImageInfo | null> {
    try {
      const info = await this.docker.getImage(image).inspect();
      return { id: info.Id, layers: info.RootFS?.Layers ?? [] };
    } catch (e) {
      if (statusCode(e) === 404) return null;
      throw e;
    }
  }

  async buildImage(context: NodeJS.ReadableStream, build: ImageBuild): Promise<string> {
    const stream = await this.docker.buildImage(context, {
      t: build.tag,
      dockerfile: build.dockerfile,
      buildargs: build.buildArgs,
      labels: build.labels,
      // RUN steps have no network: dependencies come in through the set-up commands and the mirrors.
      networkmode: 'none',
      rm: true,
      forcerm: true,
      abortSignal: build.signal,
    });
    let failure: string | null = null;
    await new Promise<void>((resolve, reject) => {
      this.docker.modem.followProgress(
        stream,
        (err: Error | null) => (err ? reject(err) : resolve()),
        (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
          if (event.stream) for (const line of event.stream.split('\n')) if (line.trim() !== '') build.onOutput(line);
          if (event.error) {
            failure = event.errorDetail?.message ?? event.error;
            build.onOutput(failure);
          }
        },
      );
    });
    if (failure) throw new Error(failure);
    const info = await this.imageInfo(build.tag);
    if (!info) throw new Error(`the build ended without an image tagged ${build.tag}`);
    return info.id;
  }

  async removeImage(image: string): Promise<void> {
    try {
      await this.docker.getImage(image).remove({ force: false, noprune: false });
    } catch (e) {
      if (statusCode(e) === 404) return;
      throw e;
    }
  }

  async createAndStart(spec: SandboxContainerSpec): Promise<string> {
    await this.ensureEvents();
    const container = await this.docker.createContainer(toDockerCreateOptions(spec));
    try {
      await container.start();
    } catch (e) {
      await this.remove(container.id);
      throw e;
    }
    return container.id;
  }

  async warmUp(containerId: string): Promise<void> {
    await Promise.all([this.execContext(containerId), this.containerCgroup(containerId)]);
    // Started now, not waited for: it comes up while the working copy is filled (or while the
    // sandbox waits in the pool), and the first command waits for it if it has not.
    void this.runnerFor(containerId);
  }

  /** The container's runner, started when it has none yet or its last one is gone; null: the engine's way. */
  private async runnerFor(containerId: string): Promise<SandboxRunner | null> {
    if (!this.runnerEnabled) return null;
    const known = this.runners.get(containerId);
    if (known) {
      const runner = await known;
      if (runner === null || runner.alive) return runner;
      if (this.runners.get(containerId) !== known) return this.runnerFor(containerId);
    }
    // Under gVisor (2022-12) a process may open the descriptors of an undumpable process of its own
    // user through /proc/PID/fd: a command could write the runner's frames or answer in its place.
    // There every command stays an engine exec (docs/decisions/0016).
    const starting = this.execContext(containerId)
      .then(({ runtime }) => (runtime === 'runc' ? SandboxRunner.start(this.docker, containerId, runnerExecOptions(this.runnerPath)) : null))
      .catch(() => null);
    this.runners.set(containerId, starting);
    return starting;
  }

  /** The container's runner if one is up; never starts one. */
  private async liveRunner(containerId: string): Promise<SandboxRunner | null> {
    const runner = await (this.runners.get(containerId) ?? null);
    return runner?.alive ? runner : null;
  }

  async status(containerId: string): Promise<ContainerStatus | null> {
    try {
      const s = (await this.docker.getContainer(containerId).inspect()).State;
      return { running: s.Running, exitCode: s.Running ? null : s.ExitCode, oomKilled: s.OOMKilled, stoppedByHost: this.stoppedByHost.has(containerId) };
    } catch (e) {
      if (statusCode(e) === 404) return null;
      throw e;
    }
  }

  async exec(containerId: string, spec: ExecSpec): Promise<ExecOutcome> {
    await this.ensureEvents();
    if (spec.stdin === undefined && Buffer.byteLength(spec.command, 'utf8') < RUNNER_MAX_FRAME / 2) {
      const runner = await this.runnerFor(containerId);
      if (runner) return this.execThroughRunner(containerId, runner, spec);
    }
    return this.execThroughEngine(containerId, spec);
  }

  /**
   * One command through the sandbox's runner: no engine call on the way. The same program in front of
   * the command (`bash -c`), the same user, directory and environment as an engine exec; the same
   * reading of the container's death and OOM events.
   */
  private async execThroughRunner(containerId: string, runner: SandboxRunner, spec: ExecSpec): Promise<ExecOutcome> {
    const watch = this.watch(containerId);
    const onAbort = () => {
      // The kill ends the command (its runner answers its end); a runner that cannot kill (stopped by
      // the command) gives way to the engine's kill, which ends the runner too and so the command's wait.
      void this.killAllUserProcesses(containerId)
        .catch(() => this.stop(containerId))
        .catch(() => undefined);
    };
    try {
      // runc only: the per-command caps of withCommandCaps are gVisor's, so the command goes as it is.
      const ran = runner.run(spec.command, spec.onStdout, spec.onStderr);
      if (spec.signal.aborted) onAbort();
      else spec.signal.addEventListener('abort', onAbort, { once: true });
      const ended = await Promise.race([ran, watch.gone.then(() => 'died' as const)]);
      if (ended === 'died' || watch.died) {
        ran.catch(() => undefined);
        return { exitCode: null, containerDied: true, oomEvent: watch.oom };
      }
      if (ended === 137 && !watch.oom && !spec.signal.aborted && (await this.oomOnlyFromEvents(containerId))) {
        await Promise.race([watch.oomArrived, new Promise((r) => setTimeout(r, OOM_EVENT_GRACE_MS).unref())]);
      }
      return { exitCode: ended, containerDied: false, oomEvent: watch.oom && (await this.oomOnlyFromEvents(containerId)) };
    } catch (e) {
      const st = await this.status(containerId).catch(() => null);
      if (!st || !st.running) return { exitCode: null, containerDied: true, oomEvent: watch.oom || Boolean(st?.oomKilled) };
      if (e instanceof RunnerLost) {
        // The runner ended under the command (the command signalled it, or the kernel's OOM killer
        // chose it): how the command ended is not known. The kill after it goes the engine's way.
        spec.onStderr(Buffer.from(`The sandbox's command runner ended while the command ran (${runner.reason}); the command's processes are killed.\n`));
        return { exitCode: null, containerDied: false, oomEvent: watch.oom };
      }
      // The runner could not start it (no process left under the cap): said on stderr, as a shell would.
      spec.onStderr(Buffer.from(`${(e as Error).message}\n`));
      return { exitCode: 126, containerDied: false, oomEvent: false };
    } finally {
      spec.signal.removeEventListener('abort', onAbort);
      watch.off();
    }
  }

  /** The container's `die` and `oom` events while one command runs: as flags, and as promises to race. */
  private watch(containerId: string): { readonly died: boolean; readonly oom: boolean; gone: Promise<void>; oomArrived: Promise<void>; off: () => void } {
    let wake: () => void = () => undefined;
    let oomSeen: () => void = () => undefined;
    const state = {
      died: false,
      oom: false,
      gone: new Promise<void>((resolve) => (wake = resolve)),
      oomArrived: new Promise<void>((resolve) => (oomSeen = resolve)),
      off: () => undefined as void,
    };
    state.off = this.on(containerId, (e) => {
      if (e === 'oom') {
        state.oom = true;
        oomSeen();
      }
      if (e === 'die') {
        state.died = true;
        wake();
      }
    });
    return state;
  }

  private async execThroughEngine(containerId: string, spec: ExecSpec): Promise<ExecOutcome> {
    const watch = this.watch(containerId);
    try {
      const { runtime, profile, compiled, memoryBytes, processes } = await this.execContext(containerId);
      const exec = await this.docker
        .getContainer(containerId)
        .exec(toExecOptions(withCommandCaps(spec.command, runtime, { memoryBytes, processes }), runtime, profile, compiled, spec.stdin !== undefined));
      const stream = (await exec.start({ hijack: true, stdin: spec.stdin !== undefined })) as unknown as Duplex;
      // The end of the input half-closes the connection: the engine then closes the command's stdin.
      if (spec.stdin) spec.stdin.pipe(stream);
      const out = new PassThrough();
      const err = new PassThrough();
      out.on('data', (b: Buffer) => spec.onStdout(b));
      err.on('data', (b: Buffer) => spec.onStderr(b));
      this.docker.modem.demuxStream(stream, out, err);
      const ended = streamDone(stream);
      const onAbort = () => {
        // The kill ends the command's stream; if the sandbox is wedged the stream is cut after a grace period.
        // Never an unhandled rejection: a container the engine cannot kill (a zombie under gVisor after a
        // fork bomb) is left to the stream cut below and to the reaper; the exec-host itself stays up.
        void this.killAllUserProcesses(containerId)
          .catch(() => this.stop(containerId))
          .catch(() => undefined);
        setTimeout(() => stream.destroy(), 5_000).unref();
      };
      if (spec.signal.aborted) onAbort();
      else spec.signal.addEventListener('abort', onAbort, { once: true });
      await Promise.race([ended, watch.gone]);
      spec.signal.removeEventListener('abort', onAbort);
      if (watch.died) {
        stream.destroy();
        return { exitCode: null, containerDied: true, oomEvent: watch.oom };
      }
      const inspected = await exec.inspect();
      if (inspected.Running) {
        // The stream was cut while the process still ran: report it as lost rather than guess a status.
        const st = await this.status(containerId);
        return { exitCode: null, containerDied: !st?.running, oomEvent: watch.oom };
      }
      if (inspected.ExitCode === 137 && !watch.oom && !spec.signal.aborted && (await this.oomOnlyFromEvents(containerId))) {
        // The kernel's OOM killer sends SIGKILL; the engine's event may trail the command's end by a
        // few milliseconds, and without cgroup files that event is the only sign of it.
        await Promise.race([watch.oomArrived, new Promise((r) => setTimeout(r, OOM_EVENT_GRACE_MS).unref())]);
      }
      // The engine's events trail the kernel, by seconds on a loaded host: an oom event seen during this
      // command may be the previous command's. Where the cgroup's own counters are read (before and
      // after each command, by the caller), they decide; the event speaks only where it is all there is.
      return { exitCode: inspected.ExitCode ?? null, containerDied: false, oomEvent: watch.oom && (await this.oomOnlyFromEvents(containerId)) };
    } catch (e) {
      const st = await this.status(containerId).catch(() => null);
      if (!st || !st.running) return { exitCode: null, containerDied: true, oomEvent: watch.oom || Boolean(st?.oomKilled) };
      throw e;
    } finally {
      watch.off();
    }
  }

  /**
   * The sandbox's runner first, where it is up (kill(-1) from inside, no new process: decision 0016).
   * Otherwise, runc: the container's processes are host processes, killed through its cgroup
   * (killAllButInit), which works with the pids cap exhausted. runsc: gVisor's processes are not host
   * processes (the cgroup holds gVisor itself), so they are killed from inside; so is a runc
   * container whose processes this exec-host cannot reach.
   */
  async killAllUserProcesses(containerId: string): Promise<void> {
    const runner = await this.liveRunner(containerId);
    if (runner) {
      try {
        await runner.kill();
        return;
      } catch {
        // Stopped, ended or answering that something is left: the engine's way below ends every
        // process of the sandbox user, the runner included; the next command starts another.
        runner.close();
      }
    }
    const c = await this.containerCgroup(containerId);
    if (c && c.runtime !== 'runsc') {
      const result = await killAllButInit(c.cgroup, c.initPid, { uid: KEEPER_UID });
      if (result.killed) return;
      this.cgroupNotes.set('killed', `Container ${containerId.slice(0, 12)}'s processes were killed from inside the sandbox instead (${c.layout} layout): ${result.reason}`);
    }
    await this.killFromInside(containerId);
  }

  private async killFromInside(containerId: string): Promise<void> {
    // kill(-1) spares pid 1 and the caller, and as the sandbox uid it reaches nothing else. Under runc
    // it runs in one pass over the process table under its lock; gVisor's walks the tasks while a
    // spinning fork loop keeps adding some, so it is repeated, from this one process (the shell's
    // builtin kill needs no fork), until nothing is left to signal.
    const exec = await this.docker.getContainer(containerId).exec({
      Cmd: ['/bin/bash', '-c', KILL_EVERY_PROCESS],
      User: `${SANDBOX_UID}:${SANDBOX_GID}`,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    });
    const stream = (await exec.start({ hijack: true, stdin: false })) as unknown as Readable;
    stream.resume();
    await streamDone(stream);
    // 0: nothing is left. Anything else: the kill itself could not run, or could not finish.
    const { ExitCode } = await exec.inspect();
    if (ExitCode !== 0) throw new Error(`kill -1 could not run in the sandbox (exit ${String(ExitCode)}).`);
  }

  async stop(containerId: string): Promise<void> {
    this.stoppedByHost.add(containerId);
    try {
      await this.docker.getContainer(containerId).kill({ signal: 'SIGKILL' });
    } catch (e) {
      const code = statusCode(e);
      if (code === 404 || code === 304 || code === 409) return;
      throw e;
    }
  }

  async counters(containerId: string): Promise<ResourceCounters> {
    await this.ensureEvents().catch(() => undefined);
    const c = await this.containerCgroup(containerId);
    return c ? c.cgroup.counters() : { oomKills: null, pidsLimitHits: null };
  }

  /** True when the container's OOM kills are known from the engine's events alone (no memory cgroup file to read). */
  private async oomOnlyFromEvents(containerId: string): Promise<boolean> {
    const c = await this.containerCgroup(containerId).catch(() => null);
    if (!c) return true;
    return c.layout === 'engine' || (await c.cgroup.counters()).oomKills === null;
  }

  /**
   * The container's cgroup through the layout chosen at start-up, else through the engine when its
   * files cannot be found from this exec-host's view (its own cgroup namespace, another pid namespace).
   */
  private async containerCgroup(containerId: string): Promise<ContainerCgroupState | null> {
    const cached = this.containerCgroups.get(containerId);
    if (cached) return cached;
    let target: { id: string; initPid: number };
    let runtime: 'runc' | 'runsc';
    try {
      const info = await this.docker.getContainer(containerId).inspect();
      target = { id: info.Id, initPid: info.State.Pid };
      runtime = runtimeFamily(info.HostConfig.Runtime ?? 'runc');
    } catch {
      return null;
    }
    if (!target.initPid) return null;
    let layout: CgroupLayout = this.cgroupAccess.layout;
    let cgroup = await this.cgroupAccess.locate(target);
    if (!cgroup && layout !== 'engine') {
      this.cgroupNotes.set(
        'located',
        `The cgroup of container ${target.id.slice(0, 12)} is not among the cgroup files this exec-host sees (as when it runs in a cgroup or pid namespace of its own), so that container is handled through the engine.`,
      );
      layout = 'engine';
      cgroup = await this.engineCgroups.locate(target);
    }
    if (!cgroup) return null;
    const state = { ...target, runtime, cgroup, layout };
    this.containerCgroups.set(containerId, state);
    return state;
  }

  /** Read from the engine, so a restarted exec-host passes the profile the container really has. */
  private async execContext(containerId: string): Promise<ExecContext> {
    const cached = this.execContexts.get(containerId);
    if (cached) return cached;
    const { HostConfig, Image } = await this.docker.getContainer(containerId).inspect();
    const runtime = runtimeFamily(HostConfig.Runtime ?? 'runc');
    const profile = seccompProfileOf(HostConfig.SecurityOpt);
    const compiled = runtime === 'runsc' && profile !== null ? await this.compiledFilter(Image, profile) : null;
    const nproc = (HostConfig.Ulimits ?? []).find((u) => u.Name === 'nproc');
    const context = { runtime, profile, compiled, memoryBytes: HostConfig.Memory ?? 0, processes: nproc?.Hard ?? 0 };
    this.execContexts.set(containerId, context);
    return context;
  }

  /** Compiled once per image and profile; concurrent first commands share the one compilation. */
  private compiledFilter(image: string, profile: string): Promise<string | null> {
    const key = `${image}\0${createHash('sha256').update(profile).digest('hex')}`;
    let compiled = this.compiledFilters.get(key);
    if (!compiled) {
      compiled = this.compileProfile(image, profile).catch(() => null);
      this.compiledFilters.set(key, compiled);
    }
    return compiled;
  }

  /**
   * Runs the image's launcher with `--export-bpf` in a throwaway container (runc, no network, nothing
   * of any session) and keeps the program it prints. Any failure (an image without the loader, an
   * engine error, output that is not a whole program) answers null: commands then start through the
   * launcher, which applies the profile itself. Never a command without the filter.
   */
  private async compileProfile(image: string, profile: string): Promise<string | null> {
    const container = await this.docker.createContainer(compileContainerOptions(image, profile, { 'lemniscate.purpose': 'seccomp-compile' }));
    try {
      const stream = (await container.attach({ stream: true, stdout: true, stderr: true })) as unknown as Readable;
      const out = new PassThrough();
      let stdout = '';
      out.on('data', (b: Buffer) => (stdout += b.toString('utf8')));
      this.docker.modem.demuxStream(stream, out, new PassThrough().resume());
      const ended = streamDone(stream);
      await container.start();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), 60_000)));
      const waited = await Promise.race([container.wait() as Promise<{ StatusCode: number }>, timedOut]);
      clearTimeout(timer);
      if (waited === 'timeout' || waited.StatusCode !== 0) return null;
      await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
      return compiledFilterOf(stdout);
    } finally {
      await container.remove({ force: true }).catch(() => undefined);
    }
  }

  async remove(containerId: string): Promise<void> {
    const runner = this.runners.get(containerId);
    this.runners.delete(containerId);
    void runner?.then((r) => r?.close());
    try {
      await this.endAndRemove(containerId);
    } finally {
      this.containerCgroups.delete(containerId);
      this.oomEvents.delete(containerId);
      this.execContexts.delete(containerId);
      this.stoppedByHost.delete(containerId);
    }
  }

  private async endAndRemove(containerId: string): Promise<void> {
    // Ended first, as the host's doing (stop: a command it cuts short is not reported as killed by the
    // kernel), with as long as it takes (bounded): the engine's forced removal waits only 10 s for the
    // container to exit after its kill and then fails, which a gVisor sandbox ending many tasks on a
    // loaded host can exceed. Whatever this step meets (gone, not running, no answer), the removal follows.
    await this.stop(containerId).catch(() => undefined);
    const container = this.docker.getContainer(containerId);
    await within(container.wait({ condition: 'not-running' }) as Promise<unknown>, this.endedWaitMs).catch(() => undefined);
    for (let attempt = 1; ; attempt++) {
      try {
        await container.remove({ force: true, v: true });
        return;
      } catch (e) {
        const code = statusCode(e);
        // 404: already gone; 409 "removal already in progress": someone else is finishing the job.
        if (code === 404 || code === 304 || code === 409) return;
        // The engine's own kill can give up on a container still ending ("failed to exit within 10
        // seconds of kill", "is zombie and can not be killed"); a moment later it has exited and goes.
        if (code === undefined || code < 500 || attempt >= REMOVE_ATTEMPTS) throw e;
        await new Promise((resolve) => setTimeout(resolve, this.removeRetryMs));
      }
    }
  }

  async listManaged(instance: string): Promise<ContainerRef[]> {
    const list = await this.docker.listContainers({
      all: true,
      filters: JSON.stringify({ label: [`${LABEL_MANAGED}=1`, `${LABEL_INSTANCE}=${instance}`] }),
    });
    return list.map((c) => ({ id: c.Id, name: (c.Names[0] ?? '').replace(/^\//, ''), labels: c.Labels, running: c.State === 'running' }));
  }

  close(): void {
    this.closed = true;
    this.events?.destroy();
    this.events = null;
  }

  private on(containerId: string, fn: (e: ContainerEvent) => void): () => void {
    let set = this.listeners.get(containerId);
    if (!set) this.listeners.set(containerId, (set = new Set()));
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0) this.listeners.delete(containerId);
    };
  }

  /** One event stream for all managed containers: a container dying mid-command ends the command at once. */
  private async ensureEvents(): Promise<void> {
    if (this.events || this.closed) return;
    if (this.eventsStarting) return this.eventsStarting;
    this.eventsStarting = (async () => {
      const stream = (await this.docker.getEvents({
        filters: JSON.stringify({ type: ['container'], event: ['die', 'oom'], label: [`${LABEL_MANAGED}=1`] }),
      })) as unknown as Readable;
      this.events = stream;
      let buffer = '';
      stream.on('data', (chunk: Buffer) => {
        buffer += chunk.toString('utf8');
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!line) continue;
          try {
            const ev = JSON.parse(line) as { id?: string; Action?: string; status?: string };
            const action = (ev.Action ?? ev.status) as ContainerEvent | undefined;
            if (ev.id && action === 'oom') this.oomEvents.set(ev.id, (this.oomEvents.get(ev.id) ?? 0) + 1);
            if (ev.id && (action === 'die' || action === 'oom')) this.listeners.get(ev.id)?.forEach((fn) => fn(action));
          } catch {
            // a malformed event line is skipped; the exec still ends on its own stream
          }
        }
      });
      const reset = () => {
        if (this.events === stream) this.events = null;
      };
      stream.once('end', reset);
      stream.once('close', reset);
      stream.once('error', reset);
    })().finally(() => (this.eventsStarting = null));
    return this.eventsStarting;
  }
}
