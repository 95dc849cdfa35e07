import {
  DEFAULT_CONTEXT_EXCLUSIONS,
  DEFAULT_SANDBOX_LIMITS,
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
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { ensureAppArmor, type AppArmorState } from './apparmor';
import { capacityRefusal } from './capacity';
import type { ExecHostConfig } from './config';
import { LABEL_INSTANCE, LABEL_MANAGED, LABEL_SANDBOX, LABEL_SESSION, type SandboxDriver } from './driver/sandbox.driver';
import { ExecHostError } from './errors';
import { OutputCapper, type Stream } from './exec/output-cap';
import { loadSeccompProfile } from './seccomp';
import { seccompEnforcement } from './driver/seccomp-launcher';
import { createDisk, destroyDisk, diskToolsAvailable } from './workspace/disk';
import type { EnvironmentService } from './environment/environment.service';
import { FileOperations } from './workspace/file-ops';
import type { GitRepo } from './workspace/git';
import { resolveSource, WorkingCopy } from './workspace/working-copy';

const TMPFS_BYTES = 128 * 1024 * 1024;
const OPEN_FILES = 4096;
const DISK_FULL_MARGIN_BYTES = 1024 * 1024;
const SIGXFSZ_EXIT = 128 + 25;
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
}

/** Sandbox lifecycle and every operation on a sandbox. One instance per exec-host. */
export class SandboxService {
  private readonly sandboxes = new Map<string, SandboxRecord>();
  /** Sandboxes between their first directory and their registration; the reaper leaves them alone. */
  readonly creating = new Set<string>();
  /** Sandboxes already forgotten by the API whose container and directory are still being removed. */
  private readonly destroying = new Map<string, Promise<void>>();
  private apparmor: AppArmorState = { state: 'unavailable', profile: 'lemniscate-sandbox' };

  constructor(
    private readonly config: ExecHostConfig,
    private readonly driver: SandboxDriver,
    /** Project environments; without it every sandbox starts from the sandbox image. */
    private readonly environments: EnvironmentService | null = null,
  ) {}

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
    return this.creating.has(id) || this.sandboxes.has(id) || this.destroying.has(id) || (this.environments?.owns(id) ?? false);
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
    };
  }

  async create(req: CreateSandboxRequestParsed): Promise<SandboxInfo> {
    const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...(req.limits ?? {}) };
    for (const s of this.sandboxes.values()) {
      if (s.info.sessionId === req.sessionId) {
        throw new ExecHostError('session_has_sandbox', `Session ${req.sessionId} already has sandbox ${s.info.sandboxId}; one session gets one sandbox.`);
      }
    }
    // The cap, the host's memory floor and its process ids, read now (capacity.ts).
    const refusal = capacityRefusal(this.sandboxes.size, this.config);
    if (refusal) throw new ExecHostError('sandbox_limit_reached', refusal);
    const source = await resolveSource(req.repository.source, req.repository.access);
    const seccomp = loadSeccompProfile(this.config.seccompProfilePath, this.config.seccompSchemaPath);
    if (!seccomp.valid) throw new ExecHostError('sandbox_setup_failed', `No sandbox is created without a valid seccomp profile: ${seccomp.message}`);
    const engine = await this.driver.info();
    if (!engine.reachable) throw new ExecHostError('engine_unavailable', engine.message ?? 'The container engine does not answer.');
    if (!engine.runtimes.includes(req.runtime)) {
      throw new ExecHostError('runtime_unavailable', `The runtime ${req.runtime} is not available on this exec-host's container engine.`);
    }
    if (!(await this.driver.imagePresent(this.config.image))) {
      throw new ExecHostError('sandbox_setup_failed', `The sandbox image ${this.config.image} is missing; build it with "npm run setup".`);
    }
    // The project's environment, read at its default ref: refused here, before anything is created, when it is not ready.
    const environment = this.environments ? await this.environments.forSandbox(req.environment) : { key: null, image: this.config.image, env: [], snapshot: null };
    const disk = await diskToolsAvailable();
    if (!disk.available) throw new ExecHostError('sandbox_setup_failed', disk.message ?? 'The disk cap cannot be set up.');

    const sandboxId = `sbx-${randomBytes(8).toString('hex')}`;
    const dir = path.join(this.sandboxesDir, sandboxId);
    const repo: GitRepo = { gitDir: path.join(dir, 'git'), workTree: path.join(dir, 'work'), home: path.join(dir, 'home') };
    let containerId: string | null = null;
    this.creating.add(sandboxId);
    try {
      await fs.mkdir(dir, { mode: 0o700 });
      await fs.mkdir(repo.home, { mode: 0o700 });
      await createDisk(path.join(dir, 'disk.img'), repo.workTree, limits.diskMb);
      const state = await WorkingCopy.prepare({
        repo,
        source,
        ...(req.repository.ref ? { ref: req.repository.ref } : {}),
        ...(req.uncommittedPatch ? { uncommittedPatch: req.uncommittedPatch } : {}),
        exclusions: [...DEFAULT_CONTEXT_EXCLUSIONS, ...(req.contextExclusions ?? [])],
      });
      if (environment.snapshot && this.environments) await this.environments.restore(environment.snapshot, repo);
      containerId = await this.driver.createAndStart({
        name: `lemniscate-${sandboxId}`,
        image: environment.image,
        env: environment.env,
        runtime: req.runtime,
        labels: { [LABEL_MANAGED]: '1', [LABEL_SESSION]: req.sessionId, [LABEL_SANDBOX]: sandboxId, [LABEL_INSTANCE]: this.config.instance },
        workspaceHostPath: repo.workTree,
        cpus: limits.cpus,
        memoryBytes: limits.memoryMb * 1024 * 1024,
        pids: limits.pids,
        tmpfsBytes: Math.min(TMPFS_BYTES, Math.floor((limits.memoryMb * 1024 * 1024) / 4)),
        fileSizeBytes: limits.diskMb * 1024 * 1024,
        openFiles: OPEN_FILES,
        seccompProfile: seccomp.profile,
        apparmorProfile: this.apparmor.state === 'enforced' ? this.apparmor.profile : null,
      });
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
        createdAt: now.toISOString(),
        expiresAt: new Date(now.getTime() + limits.lifetimeMinutes * 60_000).toISOString(),
      };
      const wc = new WorkingCopy(repo, state);
      this.sandboxes.set(sandboxId, { info, containerId, dir, wc, ops: new FileOperations(wc), commandRunning: false, lock: Promise.resolve(), destroying: false });
      return { ...info };
    } catch (e) {
      await this.cleanup(containerId, dir).catch(() => undefined);
      if (e instanceof ExecHostError) throw e;
      throw new ExecHostError('sandbox_setup_failed', `The sandbox could not be prepared, and nothing was left behind: ${(e as Error).message.split('\n')[0]}`);
    } finally {
      this.creating.delete(sandboxId);
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
    const done = this.cleanup(rec.containerId, rec.dir).finally(() => this.destroying.delete(id));
    this.destroying.set(id, done);
    this.sandboxes.delete(id);
    await done;
    return { sandboxId: id, destroyed: true };
  }

  async destroyAll(): Promise<void> {
    await Promise.all(this.ids().map((id) => this.destroy(id).catch(() => undefined)));
  }

  /** Removes a container and its host directory (disk image unmounted first). Idempotent. */
  async cleanup(containerId: string | null, dir: string): Promise<void> {
    if (containerId) await this.driver.remove(containerId);
    await destroyDisk(path.join(dir, 'disk.img'), path.join(dir, 'work'));
    await fs.rm(dir, { recursive: true, force: true });
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
        outcome = await this.driver.exec(rec.containerId, { command: req.command, onStdout: watch('stdout'), onStderr: watch('stderr'), signal: abort.signal });
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
      if (cleanupNeeded) {
        void this.driver
          .killAllUserProcesses(rec.containerId)
          .catch(async () => {
            // Processes that cannot be killed from inside (gVisor out of tasks) end with the container.
            rec.info.state = 'lost';
            await this.driver.stop(rec.containerId).catch(() => undefined);
          })
          .finally(release);
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
