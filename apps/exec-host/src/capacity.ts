import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * How many sandboxes a host carries, and when a new one is refused.
 *
 * An idle sandbox costs the host memory and process ids, not CPU; bench/sandbox/density.mjs measures
 * both (bench/README.md, "Density"). On a 2-CPU, 24 GiB host: an idle runc sandbox ≈ 5 MiB and ≈ 14
 * process ids (containerd-shim's threads, pid 1 and its sleep, the disk's kernel thread); an idle runsc
 * sandbox ≈ 16–18 MiB and ≈ 58 process ids new, ≈ 20 MiB and ≈ 125 after a command that ran four
 * processes at once (gVisor's ptrace platform keeps a host stub process per address space, with a
 * thread per sentry thread that ran in it). The budgets below are per sandbox of either runtime, with
 * room for some work done in it; the checks at each creation (capacityRefusal) cover the rest.
 */
const MiB = 1024 * 1024;
export const IDLE_SANDBOX_MEMORY_BYTES = 48 * MiB;
export const IDLE_SANDBOX_PROCESS_IDS = 96;
/** The share of process ids never given to sandboxes: the rest of the host needs them. */
export const PROCESS_ID_RESERVE_PERCENT = 10;
export const DEFAULT_MEMORY_FLOOR_PERCENT = 10;
/** The default cap where the host cannot be read (no /proc): the cap of earlier releases. */
export const FALLBACK_MAX_SANDBOXES = 50;
/** The most a heartbeat may announce (ExecHostHeartbeat.capacity). */
export const MAX_SANDBOXES_LIMIT = 100_000;

export interface HostResources {
  memTotalBytes: number;
  memAvailableBytes: number;
  /** The most tasks the kernel gives process ids to: the lower of kernel.pid_max and kernel.threads-max. */
  processIdLimit: number;
  /** Tasks (threads) on the host now, each holding a process id. */
  processIdsInUse: number;
}

/** Where the cap came from: LEMNISCATE_EXEC_HOST_MAX_SANDBOXES, the host's memory or process ids, or the fallback. */
export type CapacitySource = 'setting' | 'memory' | 'process ids' | 'fallback';

export interface CapacityLimits {
  maxSandboxes: number;
  maxSandboxesFrom: CapacitySource;
  /** New sandboxes are refused while MemAvailable is below this share of MemTotal (0: never). */
  memoryFloorPercent: number;
  /** Where the kernel's /proc is (tests: a tree of their own). */
  procRoot: string;
}

/** The host's memory and process ids from /proc; null where they cannot be read. */
export function readHostResources(procRoot = '/proc'): HostResources | null {
  try {
    const meminfo = readFileSync(path.join(procRoot, 'meminfo'), 'utf8');
    const kib = (key: string) => {
      const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(meminfo);
      if (!m) throw new Error(`no ${key} in meminfo`);
      return Number(m[1]) * 1024;
    };
    const number = (file: string) => {
      const n = Number(readFileSync(path.join(procRoot, file), 'utf8').trim());
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${file} is not a number`);
      return n;
    };
    // The fourth field of loadavg is "runnable/total" scheduling entities.
    const tasks = Number(/^\S+ \S+ \S+ \d+\/(\d+)/.exec(readFileSync(path.join(procRoot, 'loadavg'), 'utf8'))?.[1]);
    if (!Number.isFinite(tasks)) throw new Error('loadavg has no task count');
    return {
      memTotalBytes: kib('MemTotal'),
      memAvailableBytes: kib('MemAvailable'),
      processIdLimit: Math.min(number('sys/kernel/pid_max'), number('sys/kernel/threads-max')),
      processIdsInUse: tasks,
    };
  } catch {
    return null;
  }
}

/**
 * The cap when LEMNISCATE_EXEC_HOST_MAX_SANDBOXES is not set: as many idle sandboxes as the memory
 * above the floor holds at IDLE_SANDBOX_MEMORY_BYTES each, and as the process ids outside the reserve
 * hold at IDLE_SANDBOX_PROCESS_IDS each, whichever is fewer.
 */
export function defaultMaxSandboxes(host: HostResources | null, memoryFloorPercent: number): { max: number; from: CapacitySource } {
  if (!host) return { max: FALLBACK_MAX_SANDBOXES, from: 'fallback' };
  const byMemory = Math.floor((host.memTotalBytes * (100 - memoryFloorPercent)) / 100 / IDLE_SANDBOX_MEMORY_BYTES);
  const byProcessIds = Math.floor((host.processIdLimit * (100 - PROCESS_ID_RESERVE_PERCENT)) / 100 / IDLE_SANDBOX_PROCESS_IDS);
  const max = Math.max(1, Math.min(byMemory, byProcessIds, MAX_SANDBOXES_LIMIT));
  return { max, from: byProcessIds < byMemory ? 'process ids' : 'memory' };
}

const gib = (bytes: number) => `${(bytes / 1024 / MiB).toFixed(1)} GiB`;
const sandboxes = (n: number) => `${n} ${n === 1 ? 'sandbox' : 'sandboxes'}`;

function capSource(from: CapacitySource): string {
  switch (from) {
    case 'setting':
      return 'LEMNISCATE_EXEC_HOST_MAX_SANDBOXES';
    case 'memory':
      return "computed at start from this host's memory";
    case 'process ids':
      return "computed at start from this host's process ids";
    case 'fallback':
      return 'the default where the host cannot be measured';
  }
}

/**
 * Why a new sandbox is refused now, as one sentence, or null: the cap is reached, the host's available
 * memory is below the floor, or its process ids are nearly all taken. `live` counts the sandboxes this
 * exec-host runs. The host is read at the moment of the decision.
 */
export function capacityRefusal(live: number, limits: CapacityLimits, host: HostResources | null = readHostResources(limits.procRoot)): string | null {
  if (live >= limits.maxSandboxes) {
    return `This exec-host already runs its maximum of ${sandboxes(limits.maxSandboxes)} (${capSource(limits.maxSandboxesFrom)}).`;
  }
  if (!host) return null;
  const floorBytes = (host.memTotalBytes * limits.memoryFloorPercent) / 100;
  if (limits.memoryFloorPercent > 0 && host.memAvailableBytes < floorBytes) {
    return `This exec-host takes no new sandbox while its host has less than ${limits.memoryFloorPercent} % of its memory available (${gib(host.memAvailableBytes)} of ${gib(host.memTotalBytes)}, ${sandboxes(live)} running here).`;
  }
  const processIdCeiling = (host.processIdLimit * (100 - PROCESS_ID_RESERVE_PERCENT)) / 100;
  if (host.processIdsInUse >= processIdCeiling) {
    return `This exec-host takes no new sandbox while its host uses ${host.processIdsInUse} of its ${host.processIdLimit} process ids (over ${100 - PROCESS_ID_RESERVE_PERCENT} %, ${sandboxes(live)} running here); kernel.pid_max can be raised.`;
  }
  return null;
}
