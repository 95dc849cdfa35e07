import {
  DEFAULT_CONTEXT_EXCLUSIONS,
  DEFAULT_SANDBOX_LIMITS,
  SESSION_DEFAULT_PROFILE,
  type ChangesResponse,
  type CreateSandboxRequestParsed,
  type DestroySandboxResponse,
  type ExecClass,
  type ExecExit,
  type ExecHostHealth,
  type ExecRequest,
  type SandboxInfo,
  type SandboxLimits,
} from '@lemniscate/contracts';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { ensureAppArmor, type AppArmorState } from './apparmor';
import { capacityRefusal } from './capacity';
import type { ExecHostConfig } from './config';
import { LABEL_INSTANCE, LABEL_MANAGED, LABEL_SANDBOX, LABEL_SESSION, type SandboxDriver } from './driver/sandbox.driver';
import { McpRelay } from './mcp/mcp-relay';
import { ExecHostError } from './errors';
import { OutputCapper, type Stream } from './exec/output-cap';
import { loadSeccompProfile } from './seccomp';
import { seccompEnforcement } from './driver/seccomp-launcher';
import { createDisk, destroyDisk, diskToolsAvailable } from './workspace/disk';
import type { EnvironmentService, SandboxEnvironment } from './environment/environment.service';
import { FileOperations } from './workspace/file-ops';
import { within } from './within';
import type { GitRepo } from './workspace/git';
import { ObjectCache } from './workspace/object-cache';
import { resolveSource, WorkingCopy, type PreparedState } from './workspace/working-copy';
import { hostMemoryAvailable, newSandboxId, shellKey, WarmPool, type CheckoutKind, type Shell, type ShellSpec, type WarmPoolStats } from './pool/warm-pool';

const TMPFS_BYTES = 128 * 1024 * 1024;
const OPEN_FILES = 4096;
const DISK_FULL_MARGIN_BYTES = 1024 * 1024;
const SIGXFSZ_EXIT = 128 + 25;
/** How long a destroy waits for the kill after the last command before it removes the container anyway. */
const KILL_BEFORE_REMOVAL_MS = 10_000;
/** How a failed allocation shows on stderr (Python, glibc/strerror, C++, shells, Node). */
const NO_MEMORY = ['MemoryError', 'Cannot allocate memory', 'std::bad_alloc', 'out of memory', 'Out of memory', 'heap out of memory'];

interface SandboxRecord {
  info: SandboxInfo;
  containerId: string;
  dir: string;
  wc: WorkingCopy;
  ops: FileOperations;
  commandRunning: boolean;
  /** Serialises everything that touches the working copy; also held while stragglers are killed. */
  lock: Promise<void>;
  destroying: boolean;
  /** The kill of what the last command left running, while it is under way. */
  killing: Promise<void> | null;
}

const CLASS_MESSAGES: Record<ExecClass, string> = {
  oom: 'The command ran out of memory and was killed (memory cap of the sandbox).',
  timeout: 'The command ran over its time limit and was killed with every process it started.',
  pids_limit: 'The command hit the cap on processes; forks beyond it failed.',
  disk_full: 'The working copy is full: the disk cap of the sandbox was reached.',
  file_size_limit: 'The command tried to write a file larger than the sandbox allows.',
  sandbox_lost: 'The sandbox stopped while the command ran; it has to be recreated.',
  output_truncated: 'The output went over its cap; the rest was dropped.',
};

interface ExecObserver {
  onOutput(stream: Stream, text: string): void;
  /** What the command reads on stdin (a local MCP server's messages); otherwise stdin is not attached. */
  stdin?: NodeJS.ReadableStream;
}

/** Sandbox lifecycle and every operation on a sandbox. One instance per exec-host. */
export class SandboxService {
  private readonly sandboxes = new Map<string, SandboxRecord>();
  /** Local MCP servers (AG7): each runs as a command of its sandbox, with stdin attached. */
  readonly mcp = new McpRelay({
    outputCap: (sandboxId) => this.record(sandboxId).info.limits.outputCapBytes,
    run: (sandboxId, command, timeoutMs, io, signal) => this.exec(sandboxId, { command, timeoutMs }, io, signal),
  });
  /** Sandboxes between their first directory and their registration; the reaper leaves them alone. */
  readonly creating = new Set<string>();
  /** Creations past the capacity check and not yet finished (each holds a place under the cap). */
  private reserved = 0;
  /** Sandboxes already forgotten by the API whose container and directory are still being removed. */
  private readonly destroying = new Map<string, Promise<void>>();
  private apparmor: AppArmorState = { state: 'unavailable', profile: 'lemniscate-sandbox' };
  /** Git objects fetched once and borrowed by every later working copy of the same source and access. */
  readonly objects: ObjectCache;
  /** Warm sandboxes made ahead (LEMNISCATE_EXEC_HOST_WARM_POOL); disabled at size 0. */
  readonly pool: WarmPool;

  constructor(
    private readonly config: ExecHostConfig,
    private readonly driver: SandboxDriver,
    /** Project environments; without it every sandbox starts from the sandbox image. */
    private readonly environments: EnvironmentService | null = null,
  ) {
    this.objects = new ObjectCache(path.join(config.stateDir, 'objects'));
    this.pool = new WarmPool({
      size: config.warmPool.size,
      maxKeys: config.warmPool.maxKeys,
      idleKeyMs: config.warmPool.idleKeyMinutes * 60_000,
      maxShellAgeMs: config.warmPool.maxAgeMinutes * 60_000,
      memoryFloor: config.warmPool.memoryFloor,
      refCheckMs: config.warmPool.refCheckSeconds * 1000,
      capacity: () => ({ live: this.sandboxes.size + this.creating.size, max: this.config.maxSandboxes }),
      make: (spec, key, sandboxId) => this.makeShell(spec, key, sandboxId),
      destroy: (shell) => this.cleanup(shell.containerId, shell.dir),
      imageId: async (image) => (await this.driver.imageInfo(image))?.id ?? null,
      memoryAvailable: hostMemoryAvailable,
      alive: async (shell) => (await this.driver.status(shell.containerId).catch(() => undefined))?.running !== false,
      log: (m) => this.log(m),
    });
  }

  /** Where the pool's sentences go (the exec-host's logger once it is built). */
  log: (message: string) => void = () => undefined;

  /**
   * Keeps the sandbox image warm with the profile sessions ask for under the policy's defaults
   * (SESSION_DEFAULT_PROFILE) on each runtime the engine has,
   * and starts the pool's refill; environments and other profiles are kept warm once asked for.
   */
  async startPool(): Promise<void> {
    if (!this.pool.enabled) return;
    const seccomp = loadSeccompProfile(this.config.seccompProfilePath, this.config.seccompSchemaPath);
    const engine = await this.driver.info();
    if (seccomp.valid && engine.reachable) {
      for (const runtime of this.config.warmPool.runtimes) {
        if (engine.runtimes.includes(runtime))
          this.pool.pin(this.shellSpec(runtime, { ...DEFAULT_SANDBOX_LIMITS, ...SESSION_DEFAULT_PROFILE }, { image: this.config.image, env: [] }, seccomp.profile));
      }
    }
    this.pool.start();
  }

  poolStats(): WarmPoolStats {
    return this.pool.stats();
  }

  get sandboxesDir(): string {
    return path.join(this.config.stateDir, 'sandboxes');
  }

  /** Start-up checks; a failure is one sentence and the exec-host does not start. */
  async init(): Promise<void> {
    const seccomp = loadSeccompProfile(this.config.seccompProfilePath, this.config.seccompSchemaPath);
    if (!seccomp.valid) throw new ExecHostError('sandbox_setup_failed', `The exec-host will not start: ${seccomp.message}`);
    this.apparmor = await ensureAppArmor(this.config.apparmorProfilePath);
    if (this.apparmor.state === 'failed') throw new ExecHostError('sandbox_setup_failed', `The exec-host will not start: ${this.apparmor.message}`);
    await fs.mkdir(this.sandboxesDir, { recursive: true, mode: 0o700 });
    await fs.chmod(this.config.stateDir, 0o700);
    await fs.chmod(this.sandboxesDir, 0o700);
  }

  get apparmorState(): AppArmorState {
    return this.apparmor;
  }

  ids(): string[] {
    return [...this.sandboxes.keys()];
  }

  /**
   * True while anything of sandbox `id` is this exec-host's to manage: being created, live, or being
   * destroyed. Read at the moment of a decision, never from an earlier snapshot: sandbox ids are never
   * reused, so what is not owned now never will be again and may be removed.
   */
  owns(id: string): boolean {
    return this.creating.has(id) || this.sandboxes.has(id) || this.destroying.has(id) || this.pool.owns(id) || (this.environments?.owns(id) ?? false);
  }

  async health(): Promise<ExecHostHealth> {
    const engine = await this.driver.info();
    const image = engine.reachable ? await this.driver.imagePresent(this.config.image).catch(() => false) : false;
    const seccomp = loadSeccompProfile(this.config.seccompProfilePath, this.config.seccompSchemaPath);
    const disk = await diskToolsAvailable();
    const runtimes = { runc: engine.runtimes.includes('runc'), runsc: engine.runtimes.includes('runsc') };
    const ok = engine.reachable && image && seccomp.valid && disk.available && runtimes.runc && this.apparmor.state !== 'failed';
    return {
      status: ok ? 'ok' : 'degraded',
      engine: { reachable: engine.reachable, version: engine.version, ...(engine.message ? { message: engine.message } : {}) },
      runtimes,
      image: { name: this.config.image, present: image },
      seccomp: { path: this.config.seccompProfilePath, valid: seccomp.valid, message: seccomp.valid ? seccompEnforcement(runtimes.runsc) : seccomp.message },
      apparmor: this.apparmor,
      diskCap: { mechanism: 'ext4-loop', available: disk.available, ...(disk.message ? { message: disk.message } : {}) },
      cgroups: this.driver.cgroups(),
      sandboxes: this.sandboxes.size,
      warmPool: (({ target, ready, hits, misses, held }) => ({ size: this.config.warmPool.size, target, ready, hits, misses, held }))(this.pool.stats()),
    };
  }

  async create(req: CreateSandboxRequestParsed): Promise<SandboxInfo> {
    const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...(req.limits ?? {}) };
    for (const s of this.sandboxes.values()) {
      if (s.info.sessionId === req.sessionId) {
        throw new ExecHostError('session_has_sandbox', `Session ${req.sessionId} already has sandbox ${s.info.sandboxId}; one session gets one sandbox.`);
      }
    }
    // The cap, the host's memory floor and its process ids, read now (capacity.ts). Creations under
    // way hold their place from here, so concurrent requests cannot together pass the cap.
    const refusal = capacityRefusal(this.sandboxes.size + this.reserved, this.config);
    if (refusal) throw new ExecHostError('sandbox_limit_reached', refusal);
    this.reserved += 1;
    try {
      return await this.createReserved(req, limits);
    } finally {
      this.reserved -= 1;
    }
  }

  private async createReserved(req: CreateSandboxRequestParsed, limits: SandboxLimits): Promise<SandboxInfo> {
    const source = await resolveSource(req.repository.source, req.repository.access);
    const seccomp = loadSeccompProfile(this.config.seccompProfilePath, this.config.seccompSchemaPath);
    if (!seccomp.valid) throw new ExecHostError('sandbox_setup_failed', `No sandbox is created without a valid seccomp profile: ${seccomp.message}`);
    // The project's environment, read at its default ref: refused here, before anything is created, when it is not ready.
    const environment = this.environments ? await this.environments.forSandbox(req.environment) : { key: null, image: this.config.image, env: [], snapshot: null };
    const spec = this.shellSpec(req.runtime, limits, environment, seccomp.profile);
    const exclusions = [...DEFAULT_CONTEXT_EXCLUSIONS, ...(req.contextExclusions ?? [])];
    const ref = req.repository.ref;
    const patch = req.uncommittedPatch && req.uncommittedPatch.trim() !== '' ? req.uncommittedPatch : undefined;
    // Shells checked out ahead that no longer hold what the ref names now (its commit, its branch).
    const outdated = async (shells: Shell[]): Promise<Shell[]> => {
      const [first] = shells;
      if (!first) return [];
      const now = await WorkingCopy.resolveRef({ repo: this.repoOf(first.dir), source, ...(ref ? { ref } : {}) });
      return shells.filter((made) => {
        const state = made.checkout as PreparedState | undefined;
        return !state || (now.expected ?? now.want) !== state.baseCommit || now.branch !== state.branch;
      });
    };
    // Without uncommitted changes, the next session of the same repository, ref and environment finds
    // its working copy checked out ahead; a kind's id names all a fill depends on, so a shell filled
    // for one repository and access is never handed to a request for another.
    const checkout: CheckoutKind | undefined = patch
      ? undefined
      : {
          id: createHash('sha256')
            .update(JSON.stringify([this.objects.keyOf(source), ref ?? null, exclusions, environment.key, environment.snapshot?.tarPath ?? null]))
            .digest('hex')
            .slice(0, 32),
          fill: async (made) => {
            made.checkout = await this.fill(made.dir, { source, ref, exclusions, snapshot: environment.snapshot });
          },
          outdated,
        };
    // A warm shell of the same kind when the pool has one: made by makeShell, as a cold one is below.
    // A shell taken is no longer the pool's: it is this creation's from the same tick, before any
    // await, so the reaper never finds it owned by nobody.
    let shell = this.pool.take(spec, checkout);
    if (shell) this.creating.add(shell.sandboxId);
    let ahead: PreparedState | null = null;
    let stale: Shell | null = null;
    if (shell?.checkout) {
      // Checked out ahead: still what the ref names? Otherwise an empty shell (or a cold one) instead.
      if ((await outdated([shell]).catch(() => [shell])).length === 0) {
        ahead = shell.checkout as PreparedState;
      } else {
        // Given up once this creation is over, so removing it does not slow this one down (at once
        // when no empty shell is ready: a cold creation follows, which may be refused before its end).
        stale = shell;
        shell = this.pool.take(spec);
        if (shell) this.creating.add(shell.sandboxId);
        else stale = this.giveUp(stale);
      }
    }
    const pooled = shell !== null;
    if (!shell) {
      const engine = await this.driver.info();
      if (!engine.reachable) throw new ExecHostError('engine_unavailable', engine.message ?? 'The container engine does not answer.');
      if (!engine.runtimes.includes(req.runtime)) {
        throw new ExecHostError('runtime_unavailable', `The runtime ${req.runtime} is not available on this exec-host's container engine.`);
      }
      if (!(await this.driver.imagePresent(this.config.image))) {
        throw new ExecHostError('sandbox_setup_failed', `The sandbox image ${this.config.image} is missing; build it with "npm run setup".`);
      }
      const disk = await diskToolsAvailable();
      if (!disk.available) throw new ExecHostError('sandbox_setup_failed', disk.message ?? 'The disk cap cannot be set up.');
    }
    const sandboxId = shell?.sandboxId ?? newSandboxId();
    const dir = shell?.dir ?? path.join(this.sandboxesDir, sandboxId);
    const repo = this.repoOf(dir);
    this.creating.add(sandboxId);
    try {
      shell ??= await this.makeShell(spec, shellKey(spec), sandboxId, req.sessionId);
      const state = ahead ?? (await this.fill(dir, { source, ref, patch, exclusions, snapshot: environment.snapshot }));
      const now = new Date();
      const info: SandboxInfo = {
        sandboxId,
        sessionId: req.sessionId,
        runtime: req.runtime,
        state: 'ready',
        baseCommit: state.baseCommit,
        branch: state.branch,
        includedUncommitted: state.includedUncommitted,
        fingerprint: state.fingerprint,
        excluded: state.excluded,
        environment: { key: environment.key, image: environment.key ? environment.image : this.config.image },
        limits,
        pooled,
        createdAt: now.toISOString(),
        expiresAt: new Date(now.getTime() + limits.lifetimeMinutes * 60_000).toISOString(),
      };
      const wc = new WorkingCopy(repo, state);
      this.sandboxes.set(sandboxId, { info, containerId: shell.containerId, dir, wc, ops: new FileOperations(wc), commandRunning: false, lock: Promise.resolve(), destroying: false, killing: null });
      return { ...info };
    } catch (e) {
      await this.cleanup(shell?.containerId ?? null, dir).catch(() => undefined);
      if (e instanceof ExecHostError) throw e;
      throw new ExecHostError('sandbox_setup_failed', `The sandbox could not be prepared, and nothing was left behind: ${(e as Error).message.split('\n')[0]}`);
    } finally {
      this.creating.delete(sandboxId);
      if (stale) this.giveUp(stale);
      // The pool makes the next warm sandbox now, not while this one was being filled.
      this.pool.refill();
    }
  }

  /** Destroys a taken shell that will not be used, in the background; owned until it is gone. */
  private giveUp(shell: Shell): null {
    void this.pool.discard(shell).finally(() => this.creating.delete(shell.sandboxId));
    return null;
  }

  /** A shell's working copy: the repository at its ref, the uncommitted changes, the environment's snapshot. */
  private async fill(
    dir: string,
    w: { source: Awaited<ReturnType<typeof resolveSource>>; ref: string | undefined; patch?: string; exclusions: string[]; snapshot: SandboxEnvironment['snapshot'] },
  ): Promise<PreparedState> {
    const repo = this.repoOf(dir);
    const state = await WorkingCopy.prepare({
      repo,
      source: w.source,
      initialised: true,
      objects: this.objects,
      ...(w.ref ? { ref: w.ref } : {}),
      ...(w.patch ? { uncommittedPatch: w.patch } : {}),
      exclusions: w.exclusions,
    });
    if (w.snapshot && this.environments) await this.environments.restore(w.snapshot, repo);
    return state;
  }

  private repoOf(dir: string): GitRepo {
    return { gitDir: path.join(dir, 'git'), workTree: path.join(dir, 'work'), home: path.join(dir, 'home') };
  }

  /** What a sandbox of this runtime, resource profile and environment is made of before its session is known. */
  private shellSpec(runtime: 'runc' | 'runsc', limits: SandboxLimits, environment: { image: string; env: string[] }, seccompProfile: string): ShellSpec {
    return {
      image: environment.image,
      env: environment.env,
      runtime,
      cpus: limits.cpus,
      memoryMb: limits.memoryMb,
      pids: limits.pids,
      diskMb: limits.diskMb,
      seccompProfile,
      apparmorProfile: this.apparmor.state === 'enforced' ? this.apparmor.profile : null,
    };
  }

  /**
   * Everything of a sandbox that does not depend on its session: the host directory, the capped disk
   * mounted at the working copy, an empty git directory, and the hardened container started on it.
   * Cold sandboxes and warm ones are made here alike; only a cold one's container is labelled with its
   * session (a warm one's session is not known when it is made, and labels cannot change). On failure
   * nothing is left behind.
   */
  async makeShell(spec: ShellSpec, key: string, sandboxId: string, sessionId?: string): Promise<Shell> {
    const dir = path.join(this.sandboxesDir, sandboxId);
    const repo = this.repoOf(dir);
    let containerId: string | null = null;
    try {
      await fs.mkdir(dir, { mode: 0o700 });
      await fs.mkdir(repo.home, { mode: 0o700 });
      await createDisk(path.join(dir, 'disk.img'), repo.workTree, spec.diskMb);
      await WorkingCopy.init(repo);
      containerId = await this.driver.createAndStart({
        name: `lemniscate-${sandboxId}`,
        image: spec.image,
        env: spec.env,
        runtime: spec.runtime,
        labels: { [LABEL_MANAGED]: '1', [LABEL_SANDBOX]: sandboxId, [LABEL_INSTANCE]: this.config.instance, ...(sessionId ? { [LABEL_SESSION]: sessionId } : {}) },
        workspaceHostPath: repo.workTree,
        cpus: spec.cpus,
        memoryBytes: spec.memoryMb * 1024 * 1024,
        pids: spec.pids,
        tmpfsBytes: Math.min(TMPFS_BYTES, Math.floor((spec.memoryMb * 1024 * 1024) / 4)),
        fileSizeBytes: spec.diskMb * 1024 * 1024,
        openFiles: OPEN_FILES,
        seccompProfile: spec.seccompProfile,
        apparmorProfile: spec.apparmorProfile,
      });
      await this.driver.warmUp?.(containerId);
      return { sandboxId, containerId, dir, key, imageId: (await this.driver.imageInfo(spec.image).catch(() => null))?.id ?? null, madeAt: Date.now() };
    } catch (e) {
      await this.cleanup(containerId, dir).catch(() => undefined);
      throw e;
    }
  }

  list(): SandboxInfo[] {
    return [...this.sandboxes.values()].map((s) => this.view(s));
  }

  get(id: string): SandboxInfo {
    return this.view(this.record(id));
  }

  /** Idempotent: a sandbox already gone is reported as such, not as an error. */
  async destroy(id: string): Promise<DestroySandboxResponse> {
    const rec = this.sandboxes.get(id);
    if (!rec) {
      // A destroy already under way: answer once it is over, so "not there" is true when said.
      await this.destroying.get(id)?.catch(() => undefined);
      return { sandboxId: id, destroyed: false };
    }
    rec.destroying = true;
    // Forgotten by the API at once, but owned until its clean-up is over, so the reaper leaves it alone.
    // A kill already under way after the last command is an engine exec: the container is removed once
    // it is over (bounded), not beside it — under gVisor an exec racing the container's end can leave
    // the container unkillable for the engine ("failed to exit within 10 seconds of kill").
    const killing = rec.killing;
    const done = (killing ? within(killing, KILL_BEFORE_REMOVAL_MS).catch(() => undefined) : Promise.resolve())
      .then(() => this.cleanup(rec.containerId, rec.dir))
      .finally(() => this.destroying.delete(id));
    this.destroying.set(id, done);
    this.sandboxes.delete(id);
    try {
      await done;
    } catch (e) {
      // The working copy is gone either way (cleanup removes it before it throws); the container,
      // now owned by nobody, is an orphan the reaper removes on its next pass.
      throw new ExecHostError(
        'engine_unavailable',
        `The container engine did not remove the container of sandbox ${id} (${(e as Error).message.trim()}); the sandbox is gone from this exec-host and its container is removed on the reaper's next pass.`,
      );
    }
    return { sandboxId: id, destroyed: true };
  }

  /** Destroys every sandbox and every warm one (shut-down). */
  async destroyAll(): Promise<void> {
    await Promise.all([this.pool.close(), ...this.ids().map((id) => this.destroy(id).catch(() => undefined))]);
  }

  /**
   * Removes a container and its host directory (disk image unmounted first). Idempotent. The disk is
   * unmounted and the directory removed even when the engine could not remove the container (a gVisor
   * sandbox slow to stop): a mount left behind would keep the directory, and the reaper retries the
   * container by its label.
   */
  async cleanup(containerId: string | null, dir: string): Promise<void> {
    let removal: unknown = null;
    if (containerId) await this.driver.remove(containerId).catch((e: unknown) => (removal = e));
    await destroyDisk(path.join(dir, 'disk.img'), path.join(dir, 'work'));
    await fs.rm(dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 200 });
    if (removal) throw removal;
  }

  /** Marks a live sandbox lost if its container really is stopped now (asked after any earlier listing). */
  async markLostIfStopped(id: string, containerId: string): Promise<boolean> {
    const rec = this.sandboxes.get(id);
    if (!rec || rec.containerId !== containerId || rec.info.state === 'lost') return false;
    const st = await this.driver.status(containerId).catch(() => undefined);
    // An engine that did not answer proves nothing; a container gone (null) or stopped does.
    if (st === undefined || st?.running) return false;
    if (this.sandboxes.get(id) !== rec) return false;
    rec.info.state = 'lost';
    return true;
  }

  containerOf(id: string): string | undefined {
    return this.sandboxes.get(id)?.containerId;
  }

  expired(now = Date.now()): string[] {
    return [...this.sandboxes.values()].filter((s) => Date.parse(s.info.expiresAt) <= now).map((s) => s.info.sandboxId);
  }

  async exec(id: string, req: ExecRequest, observer: ExecObserver, signal?: AbortSignal): Promise<Omit<ExecExit, 'type'>> {
    const rec = this.record(id);
    if (rec.commandRunning) throw new ExecHostError('sandbox_busy', 'A command is already running in this sandbox; one runs at a time.');
    if (rec.info.state === 'lost') throw new ExecHostError('sandbox_lost', 'This sandbox stopped on its own; destroy it and create a new one.');
    rec.commandRunning = true;
    const release = await this.acquire(rec);
    let cleanupNeeded = true;
    try {
      // The clean-up after the previous command may have found the sandbox dead while we waited.
      if ((rec.info.state as SandboxInfo['state']) === 'lost') {
        cleanupNeeded = false;
        throw new ExecHostError('sandbox_lost', 'This sandbox stopped on its own; destroy it and create a new one.');
      }
      const limitMs = rec.info.limits.commandTimeoutSeconds * 1000;
      const timeoutMs = Math.min(req.timeoutMs ?? limitMs, limitMs);
      const before = await this.driver.counters(rec.containerId);
      const abort = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        abort.abort();
      }, timeoutMs);
      const onClientGone = () => abort.abort();
      signal?.addEventListener('abort', onClientGone, { once: true });
      let sawNoSpace = false;
      let sawForkRefused = false;
      let sawNoMemory = false;
      const capper = new OutputCapper(rec.info.limits.outputCapBytes, (stream, text) => observer.onOutput(stream, text));
      const watch = (stream: Stream) => (b: Buffer) => {
        if (!sawNoSpace && b.includes('No space left on device')) sawNoSpace = true;
        if (!sawForkRefused && b.includes('fork: ') && b.includes('Resource temporarily unavailable')) sawForkRefused = true;
        if (!sawNoMemory && stream === 'stderr' && NO_MEMORY.some((m) => b.includes(m))) sawNoMemory = true;
        capper.push(stream, b);
      };
      const started = Date.now();
      let outcome;
      try {
        outcome = await this.driver.exec(rec.containerId, {
          command: req.command,
          onStdout: watch('stdout'),
          onStderr: watch('stderr'),
          signal: abort.signal,
          ...(observer.stdin ? { stdin: observer.stdin } : {}),
        });
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onClientGone);
      }
      capper.end();
      const durationMs = Date.now() - started;
      const classes: ExecClass[] = [];
      if (outcome.containerDied) {
        cleanupNeeded = false;
        rec.info.state = 'lost';
        const st = await this.driver.status(rec.containerId).catch(() => null);
        // Under gVisor the sandbox's kernel is what the host OOM killer ends: no event, no flag, only a
        // SIGKILL nobody else sent (the exec-host records its own stops).
        const killedByKernel = st !== null && st.exitCode === 137 && !st.stoppedByHost;
        if (outcome.oomEvent || st?.oomKilled || killedByKernel) classes.push('oom');
        if (timedOut) classes.push('timeout');
        if (sawForkRefused) classes.push('pids_limit');
        classes.push('sandbox_lost');
      } else {
        const after = await this.driver.counters(rec.containerId);
        // Under gVisor a command meets the memory cap as a failed allocation (see withMemoryCap).
        const refusedMemory = rec.info.runtime === 'runsc' && sawNoMemory && outcome.exitCode !== 0;
        if (outcome.oomEvent || refusedMemory || (after.oomKills !== null && before.oomKills !== null && after.oomKills > before.oomKills)) classes.push('oom');
        if (timedOut) classes.push('timeout');
        if (sawForkRefused || (after.pidsLimitHits !== null && before.pidsLimitHits !== null && after.pidsLimitHits > before.pidsLimitHits)) classes.push('pids_limit');
        if (sawNoSpace || (await this.diskNearlyFull(rec))) classes.push('disk_full');
        if (outcome.exitCode === SIGXFSZ_EXIT) classes.push('file_size_limit');
        // Under gVisor an out-of-memory kill may take the sandbox's kernel down a moment after the
        // command's stream ended: look again briefly, so the report matches what is left.
        if (classes.includes('oom') && rec.info.runtime === 'runsc' && (await this.diedShortly(rec.containerId))) {
          cleanupNeeded = false;
          rec.info.state = 'lost';
          classes.push('sandbox_lost');
        }
      }
      if (capper.truncated) classes.push('output_truncated');
      const cls = classes[0] ?? null;
      return {
        exitCode: outcome.exitCode,
        durationMs,
        timedOut,
        truncated: capper.truncated,
        class: cls,
        classes,
        ...(cls ? { message: CLASS_MESSAGES[cls] } : {}),
      };
    } catch (e) {
      if (e instanceof ExecHostError) throw e;
      const st = await this.driver.status(rec.containerId).catch(() => null);
      if (!st?.running) {
        rec.info.state = 'lost';
        cleanupNeeded = false;
        throw new ExecHostError('sandbox_lost', 'The sandbox stopped on its own; destroy it and create a new one.');
      }
      throw e;
    } finally {
      rec.commandRunning = false;
      // No process outlives its command: background processes are killed before anything else may
      // touch the working copy, so host-side file operations never race a process of the sandbox.
      // A sandbox being destroyed needs no kill: its processes end with its container.
      if (cleanupNeeded && !rec.destroying) {
        const killing = this.driver
          .killAllUserProcesses(rec.containerId)
          .catch(async () => {
            // Processes that cannot be killed from inside (gVisor out of tasks) end with the container.
            rec.info.state = 'lost';
            await this.driver.stop(rec.containerId).catch(() => undefined);
          })
          .finally(() => {
            if (rec.killing === killing) rec.killing = null;
            release();
          });
        rec.killing = killing;
      } else {
        release();
      }
    }
  }

  read(id: string, p: string, offset?: number, limit?: number) {
    return this.withWorkingCopy(id, (rec) => rec.ops.read(p, offset, limit));
  }

  listFiles(id: string, p: string) {
    return this.withWorkingCopy(id, (rec) => rec.ops.list(p));
  }

  search(id: string, pattern: string, p: string | undefined, regex: boolean, caseSensitive: boolean, maxMatches: number) {
    return this.withWorkingCopy(id, (rec) => rec.ops.search(pattern, p, regex, caseSensitive, maxMatches));
  }

  proposeWrite(id: string, p: string, content: string) {
    return this.withWorkingCopy(id, (rec) => rec.ops.proposeWrite(p, content));
  }

  proposeEdit(id: string, p: string, oldString: string, newString: string) {
    return this.withWorkingCopy(id, (rec) => rec.ops.proposeEdit(p, oldString, newString));
  }

  apply(id: string, diff: string) {
    return this.withWorkingCopy(id, (rec) => rec.ops.apply(diff));
  }

  changes(id: string): Promise<ChangesResponse> {
    return this.withWorkingCopy(id, (rec) => rec.wc.changes());
  }

  accept(id: string, paths: string[]) {
    return this.withWorkingCopy(id, async (rec) => ({ paths: await rec.wc.accept(paths) }));
  }

  revert(id: string, paths: string[]) {
    return this.withWorkingCopy(id, async (rec) => ({ paths: await rec.wc.revert(paths) }));
  }

  patch(id: string) {
    return this.withWorkingCopy(id, async (rec) => ({
      baseCommit: rec.info.baseCommit,
      includedUncommitted: rec.info.includedUncommitted,
      ...(await rec.wc.patch()),
    }));
  }

  private async withWorkingCopy<T>(id: string, fn: (rec: SandboxRecord) => T | Promise<T>): Promise<T> {
    const rec = this.record(id);
    if (rec.commandRunning) throw new ExecHostError('sandbox_busy', 'A command is running in this sandbox; file operations wait until it ends.');
    const release = await this.acquire(rec);
    try {
      if (rec.destroying) throw new ExecHostError('sandbox_not_found', `There is no sandbox ${id} on this exec-host (it is being destroyed).`);
      return await fn(rec);
    } finally {
      release();
    }
  }

  private async acquire(rec: SandboxRecord): Promise<() => void> {
    const previous = rec.lock;
    let release!: () => void;
    rec.lock = new Promise<void>((resolve) => (release = resolve));
    await previous;
    return release;
  }

  private record(id: string): SandboxRecord {
    const rec = this.sandboxes.get(id);
    if (!rec) throw new ExecHostError('sandbox_not_found', `There is no sandbox ${id} on this exec-host.`);
    return rec;
  }

  private view(rec: SandboxRecord): SandboxInfo {
    const state = rec.info.state === 'lost' ? 'lost' : rec.commandRunning ? 'busy' : 'ready';
    return { ...rec.info, state, excluded: [...rec.info.excluded] };
  }

  /** True when the container stops within a short grace period (polled; there is no event to await here). */
  private async diedShortly(containerId: string, graceMs = 2_000): Promise<boolean> {
    const deadline = Date.now() + graceMs;
    for (;;) {
      const st = await this.driver.status(containerId).catch(() => null);
      if (!st?.running) return true;
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private async diskNearlyFull(rec: SandboxRecord): Promise<boolean> {
    try {
      const st = await fs.statfs(rec.wc.repo.workTree);
      return st.bavail * st.bsize < DISK_FULL_MARGIN_BYTES;
    } catch {
      return false;
    }
  }
}
