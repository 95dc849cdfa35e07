import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import { within } from '../within';

/**
 * What makes two sandboxes interchangeable before a session is known: the image (an environment's
 * image id, or the sandbox image), the environment's variables, the runtime, the resource profile
 * baked into the container and its disk, and the security profiles it was created with.
 */
export interface ShellSpec {
  image: string;
  env: string[];
  runtime: 'runc' | 'runsc';
  cpus: number;
  memoryMb: number;
  pids: number;
  diskMb: number;
  /** The validated seccomp profile (compact JSON). */
  seccompProfile: string;
  apparmorProfile: string | null;
}

/**
 * A sandbox without a session: its host directory, its disk made and mounted, `git init` done, and
 * its hardened container created and started, waiting for a working copy.
 */
export interface Shell {
  sandboxId: string;
  containerId: string;
  dir: string;
  key: string;
  /** The engine's id of the image when the shell was made (a rebuilt tag makes it stale). */
  imageId: string | null;
  madeAt: number;
  /** Set by a checked-out kind's fill: the working copy made ahead (the caller's own type). */
  checkout?: unknown;
}

/**
 * A kind whose shells are also filled ahead: a repository at a ref checked out (never with a session's
 * uncommitted changes). Its id names everything the fill depends on (source and access, ref,
 * exclusions, environment), so a shell filled for one request is only ever taken by an identical one.
 */
export interface CheckoutKind {
  id: string;
  fill: (shell: Shell) => Promise<void>;
  /**
   * Of these shells filled ahead, those that no longer hold what the ref names (a commit moved it since),
   * the ref read once for all. Asked by a pass at most every `refCheckMs` per kind: the shells it names
   * are replaced by ones filled at the new commit, so a session opened a little after a push finds its
   * checkout made ahead too. A failure to say (the repository unreachable for a moment) keeps them;
   * taking a shell checks its ref again.
   */
  outdated?: (shells: Shell[]) => Promise<Shell[]>;
}

/**
 * How often, at most, a pass reads the ref of each kind checked out ahead to find shells a new commit
 * made stale: a local repository's refs are read in process, a URL's with `git ls-remote`.
 */
export const REF_CHECK_MS = 10_000;

/** How long a pass waits for a ref's reading (a URL's `git ls-remote`) before it gives up on it for this pass. */
export const REF_READ_TIMEOUT_MS = 15_000;

/** A new sandbox id: never reused, so what is not owned now never will be again. */
export function newSandboxId(): string {
  return `sbx-${randomBytes(8).toString('hex')}`;
}

export function shellKey(spec: ShellSpec): string {
  return createHash('sha256')
    .update(JSON.stringify([spec.image, [...spec.env].sort(), spec.runtime, spec.cpus, spec.memoryMb, spec.pids, spec.diskMb, spec.seccompProfile, spec.apparmorProfile]))
    .digest('hex')
    .slice(0, 32);
}

export interface WarmPoolOptions {
  /** Shells kept ready per key; 0 disables the pool. */
  size: number;
  /** Keys kept warm at once (the most recently asked for); the configured ones count among them. */
  maxKeys: number;
  /** A key nobody asked for in this long is no longer kept warm (the configured ones are). */
  idleKeyMs: number;
  /** A shell older than this is replaced (it was made under the profiles of its time). */
  maxShellAgeMs: number;
  /** Below this fraction of the host's memory available, no shell is made. */
  memoryFloor: number;
  /** Live sandboxes and the exec-host's cap: live + pooled never exceeds it. */
  capacity: () => { live: number; max: number };
  /** Makes a shell of this id (the pool owns the id from before the call). */
  make: (spec: ShellSpec, key: string, sandboxId: string) => Promise<Shell>;
  destroy: (shell: Shell) => Promise<void>;
  /** The engine's id of an image now, to find stale shells; null when it has none. */
  imageId: (image: string) => Promise<string | null>;
  /** False when a shell's container is known to have stopped (an engine restart): it is replaced. */
  alive?: (shell: Shell) => Promise<boolean>;
  /** Fraction of the host's memory available (MemAvailable / MemTotal). */
  memoryAvailable?: () => Promise<number>;
  /** How often a pass reads the ref of a kind checked out ahead, at most (default REF_CHECK_MS). */
  refCheckMs?: number;
  /** How long a pass waits for that reading before it keeps the shells as they are (default REF_READ_TIMEOUT_MS). */
  refReadTimeoutMs?: number;
  log?: (message: string) => void;
}

interface KeyState {
  spec: ShellSpec;
  /** For a checked-out kind: what fills each shell after it is made. */
  fill?: (shell: Shell) => Promise<void>;
  /** For a checked-out kind: which filled shells no longer hold what the ref names (CheckoutKind.outdated). */
  outdated?: (shells: Shell[]) => Promise<Shell[]>;
  /** When the ref of a checked-out kind was last read by a pass. */
  refCheckedAt?: number;
  /** True while that reading has not answered (past the pass's wait): no second one is started beside it. */
  refReading?: boolean;
  ready: Shell[];
  making: number;
  lastAskedAt: number;
  /** Configured at start: kept warm even when nobody asks. */
  pinned: boolean;
}

export interface WarmPoolStats {
  /** Shells wanted: size × keys, bounded by the capacity left. */
  target: number;
  ready: number;
  making: number;
  keys: { key: string; image: string; runtime: 'runc' | 'runsc'; ready: number }[];
  /** Sessions that started from a warm shell, and those that found none. */
  hits: number;
  misses: number;
  /** Why the pool is below its target now, if it is (memory, capacity), as a sentence. */
  held: string | null;
}

/** MemAvailable / MemTotal from /proc/meminfo (1 where it cannot be read). */
export async function hostMemoryAvailable(): Promise<number> {
  try {
    const text = await fs.readFile('/proc/meminfo', 'utf8');
    const total = Number(/^MemTotal:\s+(\d+)/m.exec(text)?.[1]);
    const available = Number(/^MemAvailable:\s+(\d+)/m.exec(text)?.[1]);
    return total > 0 && Number.isFinite(available) ? available / total : 1;
  } catch {
    return 1;
  }
}

/**
 * Warm sandboxes per key (S1, L1): made ahead with every hardening of a cold one (the same code makes
 * both), taken by one session each, never returned: a session's sandbox is destroyed when it ends,
 * and the pool makes a new one in the background. Nothing of a session or a project is in a shell
 * before it is taken: its working copy is fetched and checked out only then.
 */
export class WarmPool {
  private readonly keys = new Map<string, KeyState>();
  private readonly owned = new Set<string>();
  private filling: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private hits = 0;
  private misses = 0;
  private held: string | null = null;

  constructor(private readonly o: WarmPoolOptions) {}

  get enabled(): boolean {
    return this.o.size > 0;
  }

  /** Keeps `spec` warm from now on, even when nobody asks for it (the sandbox image on each runtime). */
  pin(spec: ShellSpec): void {
    if (!this.enabled) return;
    const key = shellKey(spec);
    const state = this.keys.get(key);
    if (state) state.pinned = true;
    else this.keys.set(key, { spec, ready: [], making: 0, lastAskedAt: Date.now(), pinned: true });
  }

  /** Starts the background refill (and a periodic pass for stale shells and idle keys). */
  start(periodMs = 10_000): void {
    if (!this.enabled) return;
    this.timer = setInterval(() => this.refill(), periodMs);
    this.timer.unref();
    this.refill();
  }

  /** True while a shell of this id is the pool's (ready or being made): the reaper leaves it alone. */
  owns(sandboxId: string): boolean {
    return this.owned.has(sandboxId);
  }

  /** Pooled shells, ready now. */
  size(): number {
    let n = 0;
    for (const k of this.keys.values()) n += k.ready.length;
    return n;
  }

  /**
   * A ready shell of `spec`'s kind, now the caller's (no longer the pool's), or null: one checked out
   * ahead for `checkout` first when it is given, else an empty one. Either way the kinds are remembered
   * as wanted. The caller asks for the refill (`refill()`) once its sandbox is ready, so making the
   * next one does not compete with filling this one for the host's CPUs and its engine.
   */
  take(spec: ShellSpec, checkout?: CheckoutKind): Shell | null {
    if (!this.enabled || this.closed) return null;
    const key = shellKey(spec);
    const state = this.want(key, spec);
    let shell: Shell | null = null;
    if (checkout) {
      const filled = this.want(`${key}:${checkout.id}`, spec, checkout);
      shell = filled.ready.shift() ?? null;
    }
    shell ??= state.ready.shift() ?? null;
    if (shell) {
      this.owned.delete(shell.sandboxId);
      this.hits++;
    } else {
      this.misses++;
      // A cold sandbox is about to be made: make room for it by giving up a shell of another kind.
      const { live, max } = this.o.capacity();
      if (live + 1 + this.size() + this.making() > max) this.evictOne(key);
    }
    return shell;
  }

  private want(key: string, spec: ShellSpec, checkout?: CheckoutKind): KeyState {
    let state = this.keys.get(key);
    if (!state) {
      state = { spec, ready: [], making: 0, lastAskedAt: Date.now(), pinned: false };
      this.keys.set(key, state);
      this.trimKeys();
    }
    if (checkout) {
      state.fill = checkout.fill;
      if (checkout.outdated) state.outdated = checkout.outdated;
    }
    state.lastAskedAt = Date.now();
    return state;
  }

  /** Gives up a shell taken but not usable (its checkout is no longer the ref's commit): destroyed in the background. */
  discard(shell: Shell): Promise<void> {
    return this.discardShell(shell);
  }

  stats(): WarmPoolStats {
    const { live, max } = this.o.capacity();
    const wanted = this.enabled ? this.keys.size * this.o.size : 0;
    return {
      target: Math.max(0, Math.min(wanted, max - live)),
      ready: this.size(),
      making: this.making(),
      keys: [...this.keys.entries()].map(([key, s]) => ({ key, image: s.spec.image, runtime: s.spec.runtime, ready: s.ready.length })),
      hits: this.hits,
      misses: this.misses,
      held: this.held,
    };
  }

  /** Destroys every ready shell and waits for those being made (shut-down). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.filling?.catch(() => undefined);
    const all = [...this.keys.values()].flatMap((k) => k.ready.splice(0));
    await Promise.all(all.map((s) => this.discardShell(s)));
  }

  /** Runs a refill pass now, or once more after the one under way. */
  refill(): void {
    if (!this.enabled || this.closed) return;
    if (this.filling) {
      this.again = true;
      return;
    }
    this.filling = this.pass()
      .catch((e) => this.o.log?.(`The warm pool could not refill: ${(e as Error).message}`))
      .finally(() => {
        this.filling = null;
        if (this.again && !this.closed) {
          this.again = false;
          this.refill();
        }
      });
  }

  /** Resolves when the pass under way (and any one asked for during it) is over; for tests and benchmarks. */
  async settled(): Promise<void> {
    while (this.filling) await this.filling.catch(() => undefined);
  }

  private making(): number {
    let n = 0;
    for (const k of this.keys.values()) n += k.making;
    return n;
  }

  private trimKeys(): void {
    const now = Date.now();
    for (const [key, s] of this.keys) {
      if (!s.pinned && now - s.lastAskedAt > this.o.idleKeyMs) this.dropKey(key);
    }
    const unpinned = [...this.keys.entries()].filter(([, s]) => !s.pinned).sort((a, b) => a[1].lastAskedAt - b[1].lastAskedAt);
    while (this.keys.size > this.o.maxKeys && unpinned.length > 0) {
      const [key] = unpinned.shift()!;
      this.dropKey(key);
    }
  }

  private dropKey(key: string): void {
    const s = this.keys.get(key);
    if (!s) return;
    this.keys.delete(key);
    for (const shell of s.ready.splice(0)) void this.discardShell(shell);
  }

  private evictOne(except: string): void {
    const candidates = [...this.keys.entries()].filter(([k, s]) => k !== except && s.ready.length > 0).sort((a, b) => a[1].lastAskedAt - b[1].lastAskedAt);
    const victim = candidates[0]?.[1].ready.pop();
    if (victim) void this.discardShell(victim);
  }

  private async discardShell(shell: Shell): Promise<void> {
    this.owned.add(shell.sandboxId);
    try {
      await this.o.destroy(shell);
    } catch (e) {
      this.o.log?.(`A warm sandbox (${shell.sandboxId}) could not be removed; the reaper will: ${(e as Error).message}`);
    } finally {
      this.owned.delete(shell.sandboxId);
    }
  }

  /**
   * One pass: drop stale shells (too old, of a rebuilt image, stopped, or checked out at a commit their
   * ref has since moved from) and idle keys, then make shells one at a time until each key has its share.
   */
  private async pass(): Promise<void> {
    this.trimKeys();
    const now = Date.now();
    const imageIds = new Map<string, string | null>();
    for (const s of this.keys.values()) {
      if (!imageIds.has(s.spec.image)) imageIds.set(s.spec.image, await this.o.imageId(s.spec.image).catch(() => null));
      const current = imageIds.get(s.spec.image) ?? null;
      const stale: Shell[] = [];
      // A copy: a shell may be taken while this pass awaits.
      for (const shell of [...s.ready]) {
        if (now - shell.madeAt > this.o.maxShellAgeMs || shell.imageId !== current || (this.o.alive && !(await this.o.alive(shell)))) stale.push(shell);
      }
      if (s.outdated && !s.refReading && now - (s.refCheckedAt ?? 0) >= (this.o.refCheckMs ?? REF_CHECK_MS)) {
        s.refCheckedAt = now;
        const filled = s.ready.filter((shell) => !stale.includes(shell));
        if (filled.length > 0) {
          s.refReading = true;
          const reading = s.outdated(filled).finally(() => (s.refReading = false));
          // A repository that does not answer holds neither this pass nor the other kinds' refills.
          stale.push(...(await within(reading, this.o.refReadTimeoutMs ?? REF_READ_TIMEOUT_MS).catch(() => [])));
        }
      }
      for (const shell of stale) {
        if (!s.ready.includes(shell)) continue;
        s.ready.splice(s.ready.indexOf(shell), 1);
        await this.discardShell(shell);
      }
    }
    this.held = null;
    for (;;) {
      if (this.closed) return;
      // The key furthest below its share, most recently asked for first.
      const next = [...this.keys.entries()]
        .filter(([, s]) => s.ready.length + s.making < this.o.size && (imageIds.get(s.spec.image) ?? null) !== null)
        .sort((a, b) => a[1].ready.length + a[1].making - (b[1].ready.length + b[1].making) || b[1].lastAskedAt - a[1].lastAskedAt)[0];
      if (!next) return;
      const { live, max } = this.o.capacity();
      if (live + this.size() + this.making() >= max) {
        this.held = `The warm pool is held below its target: this exec-host is at its cap of ${max} sandboxes with the live ones.`;
        return;
      }
      const memory = await (this.o.memoryAvailable ?? hostMemoryAvailable)();
      if (memory < this.o.memoryFloor) {
        this.held = `The warm pool is held below its target: the host has ${Math.round(memory * 100)} % of its memory available, under the pool's floor of ${Math.round(this.o.memoryFloor * 100)} %.`;
        return;
      }
      const [key, state] = next;
      state.making++;
      const sandboxId = newSandboxId();
      this.owned.add(sandboxId);
      let shell: Shell;
      try {
        shell = await this.o.make(state.spec, key, sandboxId);
      } catch (e) {
        this.owned.delete(sandboxId);
        state.making--;
        this.o.log?.(`A warm sandbox could not be made (${state.spec.runtime}, ${state.spec.image}): ${(e as Error).message}`);
        return;
      }
      if (state.fill) {
        try {
          await state.fill(shell);
        } catch (e) {
          // The repository or its access changed: this kind is no longer kept checked out.
          this.o.log?.(`A warm sandbox could not be checked out ahead, and that kind is no longer kept: ${(e as Error).message.split('\n')[0]}`);
          // Its shells already filled go too: out of the map they would stay owned, and never be removed.
          if (this.keys.get(key) === state) this.dropKey(key);
          state.making--;
          await this.discardShell(shell);
          continue;
        }
      }
      state.making--;
      if (this.closed || this.keys.get(key) !== state) {
        await this.discardShell(shell);
        continue;
      }
      state.ready.push(shell);
    }
  }
}
