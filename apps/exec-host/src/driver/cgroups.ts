/**
 * A container's cgroup, reached the way this host allows: the files of cgroup v1, the files of the
 * unified hierarchy (v2), or only what the container engine offers on both. Chosen once at start-up
 * (`chooseCgroups`); the driver then asks one small interface to freeze a container, list its
 * processes and read its counters, whatever the layout.
 *
 * Neither layout's own "kill everything" is used: v2's `cgroup.kill` ends every process of the
 * cgroup, pid 1 included, and pid 1 is the sandbox (a reaping shell that has to survive every
 * command, decision 0005). So the kill is the same on every layout: freeze, SIGKILL every process
 * but the container's init, thaw (`killAllButInit`). Ending the whole container is the engine's kill
 * (`stop`), which works on every layout, so `cgroup.kill` is not needed for that either.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type { ResourceCounters } from './sandbox.driver';

export const CGROUP_LAYOUTS = ['v1', 'v2', 'engine'] as const;
export type CgroupLayout = (typeof CGROUP_LAYOUTS)[number];
export type CgroupLayoutChoice = 'auto' | CgroupLayout;

/** How long a freeze may take before the kill goes ahead anyway (a task in uninterruptible sleep delays it). */
export const FREEZE_DEADLINE_MS = 1_000;

/** What the exec-host does with one container's cgroup. */
export interface ContainerCgroup {
  /**
   * Asks for every process of the container to be frozen. True once frozen; false when the freeze
   * was asked for but not reached within FREEZE_DEADLINE_MS. Rejects when it cannot be asked for.
   */
  freeze(): Promise<boolean>;
  thaw(): Promise<void>;
  /** Every process of the container as this exec-host's pids, its init included. Rejects rather than guess. */
  procs(): Promise<number[]>;
  /** Null for what the layout cannot know (or a file missing or malformed). */
  counters(): Promise<ResourceCounters>;
}

/** A container as the engine describes it: its full id and the pid of its init on the engine's host. */
export interface CgroupTarget {
  id: string;
  initPid: number;
}

export interface CgroupAccess {
  readonly layout: CgroupLayout;
  /** A sentence for the health report when the layout is weaker than the files. */
  readonly message?: string;
  /** The container's cgroup, or null when it cannot be resolved from this exec-host's view. */
  locate(target: CgroupTarget): Promise<ContainerCgroup | null>;
}

/** The engine's part of the engine layer (the Docker driver implements it with dockerode). */
export interface EngineControl {
  pause(containerId: string): Promise<void>;
  unpause(containerId: string): Promise<void>;
  /** The pids the engine lists for the container (`docker top`): pids of the engine's host. */
  top(containerId: string): Promise<number[]>;
  /** The engine's `oom` events for the container while the exec-host listened; null while it does not listen. */
  oomKills(containerId: string): number | null;
}

/** A refusal of a forced layout, or of a container the layout cannot handle, as a sentence. */
export class CgroupError extends Error {}

// ───────────────────────────── reading files

async function readText(file: string): Promise<string | null> {
  try {
    return await fsp.readFile(file, 'utf8');
  } catch {
    return null;
  }
}

/** `key N` on a line of its own (memory.events, memory.oom_control, pids.events); null when absent or malformed. */
export async function readCounter(file: string, key: string): Promise<number | null> {
  const text = await readText(file);
  if (text === null) return null;
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m?.[1] !== undefined ? Number(m[1]) : null;
}

/**
 * cgroup.procs of a cgroup and of every cgroup below it. A 0 is a process outside this exec-host's
 * pid namespace (the kernel cannot name it here), and kill(0) would signal the exec-host's own group:
 * refused, as is anything that is not a pid.
 */
export async function procsUnder(dir: string): Promise<number[]> {
  const text = await fsp.readFile(path.join(dir, 'cgroup.procs'), 'utf8');
  const pids: number[] = [];
  for (const line of text.split('\n').filter(Boolean)) {
    if (!/^\d+$/.test(line) || Number(line) === 0) {
      throw new CgroupError(`${path.join(dir, 'cgroup.procs')} lists "${line}", which is not a process this exec-host can see.`);
    }
    pids.push(Number(line));
  }
  const entries = await fsp.readdir(dir, { withFileTypes: true });
  for (const entry of entries.filter((e) => e.isDirectory())) pids.push(...(await procsUnder(path.join(dir, entry.name))));
  return pids;
}

/** Re-reads `file` every few milliseconds until `test` holds or the deadline passes (v1's freezer.state announces nothing). */
async function pollUntil(file: string, test: (text: string) => boolean, deadlineMs: number): Promise<boolean> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const text = await readText(file);
    if (text !== null && test(text)) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Waits for `file` to satisfy `test`, woken by its change notifications: the kernel notifies a
 * change of cgroup.events (inotify), so the frozen state is awaited, not polled. Falls back to
 * polling where the file cannot be watched.
 */
function untilFileSays(file: string, test: (text: string) => boolean, deadlineMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let watcher: fs.FSWatcher | null = null;
    let done = false;
    const finish = (value: boolean) => {
      if (done) return;
      done = true;
      watcher?.close();
      clearTimeout(timer);
      resolve(value);
    };
    const check = () => void readText(file).then((text) => text !== null && test(text) && finish(true));
    const timer = setTimeout(() => finish(false), deadlineMs);
    try {
      watcher = fs.watch(file, check);
      watcher.on('error', () => undefined);
    } catch {
      void pollUntil(file, test, deadlineMs).then(finish);
      return;
    }
    check();
  });
}

// ───────────────────────────── which cgroup is the container's

/**
 * True when `cgroupPath` (from /proc/<pid>/cgroup) is the container's own cgroup as this exec-host
 * sees it. `/` is where a process in a private cgroup namespace sees itself, and `/..` where it sees a
 * cgroup outside its namespace; neither resolves under this exec-host's /sys/fs/cgroup. Docker names
 * every container cgroup after the container (`/docker/<id>`, `/system.slice/docker-<id>.scope`), so
 * a path without the id is some other process's (a pid reused in another pid namespace): not guessed.
 */
export function isContainerPath(cgroupPath: string, containerId: string): boolean {
  if (!cgroupPath.startsWith('/') || cgroupPath === '/' || containerId.length < 12) return false;
  const segments = cgroupPath.split('/');
  if (segments.includes('..')) return false;
  return (segments[segments.length - 1] ?? '').includes(containerId);
}

/** The v1 hierarchies' paths by controller (`4:memory:/docker/<id>`; co-mounted `2:cpu,cpuacct:/…` counts for each). */
export function v1Paths(procCgroup: string): Map<string, string> {
  const paths = new Map<string, string>();
  for (const line of procCgroup.split('\n')) {
    const m = /^\d+:([^:]+):(.*)$/.exec(line);
    if (!m?.[1] || m[2] === undefined) continue;
    for (const controller of m[1].split(',')) paths.set(controller, m[2]);
  }
  return paths;
}

/** The unified hierarchy's path (`0::/system.slice/docker-<id>.scope`); null when the process has none. */
export function v2Path(procCgroup: string): string | null {
  const line = procCgroup.split('\n').find((l) => l.startsWith('0::'));
  return line === undefined ? null : line.slice(3);
}

async function isDirectory(dir: string): Promise<boolean> {
  return (await fsp.stat(dir).catch(() => null))?.isDirectory() ?? false;
}

// ───────────────────────────── v1

const V1_CONTROLLERS = ['freezer', 'pids', 'memory'] as const;
type V1Dirs = Record<(typeof V1_CONTROLLERS)[number], string>;

class V1Cgroup implements ContainerCgroup {
  constructor(private readonly dirs: V1Dirs) {}

  private get state(): string {
    return path.join(this.dirs.freezer, 'freezer.state');
  }

  async freeze(): Promise<boolean> {
    await fsp.writeFile(this.state, 'FROZEN');
    return pollUntil(this.state, (t) => t.trim() === 'FROZEN', FREEZE_DEADLINE_MS);
  }

  async thaw(): Promise<void> {
    await fsp.writeFile(this.state, 'THAWED');
  }

  procs(): Promise<number[]> {
    return procsUnder(this.dirs.pids);
  }

  async counters(): Promise<ResourceCounters> {
    const [oomKills, pidsLimitHits] = await Promise.all([readCounter(path.join(this.dirs.memory, 'memory.oom_control'), 'oom_kill'), readCounter(path.join(this.dirs.pids, 'pids.events'), 'max')]);
    return { oomKills, pidsLimitHits };
  }
}

/** cgroup v1: one hierarchy per controller under /sys/fs/cgroup (also on hybrid hosts, for these controllers). */
export class CgroupsV1 implements CgroupAccess {
  readonly layout = 'v1' as const;
  constructor(private readonly where: { mount: string; proc: string }) {}

  async locate(target: CgroupTarget): Promise<ContainerCgroup | null> {
    const text = await readText(path.join(this.where.proc, String(target.initPid), 'cgroup'));
    if (text === null) return null;
    const paths = v1Paths(text);
    const dirs: Partial<V1Dirs> = {};
    for (const controller of V1_CONTROLLERS) {
      const p = paths.get(controller);
      if (p === undefined || !isContainerPath(p, target.id)) return null;
      const dir = path.join(this.where.mount, controller, p);
      if (!(await isDirectory(dir))) return null;
      dirs[controller] = dir;
    }
    return new V1Cgroup(dirs as V1Dirs);
  }
}

// ───────────────────────────── v2

class V2Cgroup implements ContainerCgroup {
  constructor(private readonly dir: string) {}

  async freeze(): Promise<boolean> {
    await fsp.writeFile(path.join(this.dir, 'cgroup.freeze'), '1');
    // The write only asks; the cgroup is frozen when the kernel says so in cgroup.events.
    return untilFileSays(path.join(this.dir, 'cgroup.events'), (t) => /^frozen 1$/m.test(t), FREEZE_DEADLINE_MS);
  }

  async thaw(): Promise<void> {
    await fsp.writeFile(path.join(this.dir, 'cgroup.freeze'), '0');
  }

  procs(): Promise<number[]> {
    return procsUnder(this.dir);
  }

  async counters(): Promise<ResourceCounters> {
    const [oomKills, pidsLimitHits] = await Promise.all([readCounter(path.join(this.dir, 'memory.events'), 'oom_kill'), readCounter(path.join(this.dir, 'pids.events'), 'max')]);
    return { oomKills, pidsLimitHits };
  }
}

/** cgroup v2: the unified hierarchy, one directory per container with every controller's files in it. */
export class CgroupsV2 implements CgroupAccess {
  readonly layout = 'v2' as const;
  constructor(private readonly where: { mount: string; proc: string }) {}

  async locate(target: CgroupTarget): Promise<ContainerCgroup | null> {
    const text = await readText(path.join(this.where.proc, String(target.initPid), 'cgroup'));
    const p = text === null ? null : v2Path(text);
    if (p === null || !isContainerPath(p, target.id)) return null;
    const dir = path.join(this.where.mount, p);
    if (!(await isDirectory(dir))) return null;
    return new V2Cgroup(dir);
  }
}

// ───────────────────────────── engine

/** A process's mount and pid namespaces as /proc names them; null when there is no such process here. */
async function namespacesOf(proc: string, pid: number | 'self'): Promise<string | null> {
  try {
    const [mnt, pidNs] = await Promise.all([fsp.readlink(path.join(proc, String(pid), 'ns/mnt')), fsp.readlink(path.join(proc, String(pid), 'ns/pid'))]);
    return `${mnt} ${pidNs}`;
  } catch {
    return null;
  }
}

class EngineCgroup implements ContainerCgroup {
  constructor(
    private readonly engine: EngineControl,
    private readonly proc: string,
    private readonly target: CgroupTarget,
  ) {}

  async freeze(): Promise<boolean> {
    // The engine answers once the container is frozen (the freezer of either layout, under runc).
    await this.engine.pause(this.target.id);
    return true;
  }

  thaw(): Promise<void> {
    return this.engine.unpause(this.target.id);
  }

  /**
   * The engine's pids are pids of its host. They are this exec-host's only when it shares that pid
   * namespace; otherwise the same numbers name other processes, or none. So every listed pid must be
   * a process here in the namespaces of the container's init, and that init in namespaces other
   * than the exec-host's own; anything else is refused.
   */
  async procs(): Promise<number[]> {
    const { id, initPid } = this.target;
    const pids = await this.engine.top(id);
    const [own, init] = await Promise.all([namespacesOf(this.proc, 'self'), namespacesOf(this.proc, initPid)]);
    const elsewhere = 'this exec-host does not share the container engine’s pid namespace, so the engine’s process ids are not its own';
    if (init === null) throw new CgroupError(`The container's init (pid ${initPid} for the engine) is not a process here: ${elsewhere}.`);
    if (init === own) throw new CgroupError(`Pid ${initPid} here is not the container's init but a process in the exec-host's own namespaces: ${elsewhere}.`);
    for (const pid of pids) {
      const ns = await namespacesOf(this.proc, pid);
      if (ns !== init)
        throw new CgroupError(
          `Pid ${pid}, which the engine lists for container ${id.slice(0, 12)}, is ${ns === null ? 'not a process here' : 'not in the container’s namespaces here'}: ${elsewhere}.`,
        );
    }
    return pids;
  }

  async counters(): Promise<ResourceCounters> {
    // The engine counts no refused forks: pids_limit then comes from a refused fork in the output alone.
    return { oomKills: this.engine.oomKills(this.target.id), pidsLimitHits: null };
  }
}

/** Only the engine: pause/unpause, its process list, its oom events. Works on both layouts, under any runtime. */
export class EngineCgroups implements CgroupAccess {
  readonly layout = 'engine' as const;
  constructor(
    private readonly engine: EngineControl,
    private readonly proc: string,
    readonly message?: string,
  ) {}

  async locate(target: CgroupTarget): Promise<ContainerCgroup | null> {
    return target.initPid > 0 ? new EngineCgroup(this.engine, this.proc, target) : null;
  }
}

// ───────────────────────────── the kill

export type KillResult = { killed: true } | { killed: false; reason: string };

/**
 * Freeze, SIGKILL every process but the container's init, thaw — what `runc kill --all` does, minus
 * pid 1. Frozen, nothing can fork while the list is read and killed, so it works with the pids cap
 * exhausted, where an exec into the container could not even start. A freeze not reached in time
 * still kills what is listed (better than nothing; the next command's kill catches a straggler).
 * Not killed at all when the freeze cannot be asked for or the processes cannot be known for sure:
 * the caller then kills another way. A thaw that fails rejects: a container left frozen is lost.
 */
export async function killAllButInit(cgroup: ContainerCgroup, initPid: number, keeper?: { uid: number; proc?: string }): Promise<KillResult> {
  if (keeper && (await onlyKeeperLeft(cgroup, initPid, keeper.uid, keeper.proc).catch(() => false))) return { killed: true };
  try {
    await cgroup.freeze();
  } catch (e) {
    await cgroup.thaw().catch(() => undefined);
    return { killed: false, reason: (e as Error).message };
  }
  let pids: number[];
  try {
    pids = await cgroup.procs();
  } catch (e) {
    await cgroup.thaw();
    return { killed: false, reason: (e as Error).message };
  }
  try {
    for (const pid of pids) {
      if (pid === initPid || pid <= 1 || pid === process.pid) continue;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  } finally {
    await cgroup.thaw();
  }
  return { killed: true };
}

/**
 * True when every process of the container but its init runs as the keeper's user, which no command
 * can become, signal or write into (a command's processes and all they start keep the sandbox
 * user: no capability, no setuid): then nothing of a command is left and the freeze is not needed.
 * The list is read again after the users: a process that ended in between, its pid taken by
 * another, changes it. Anything it cannot read answers false, and the caller freezes and kills.
 */
export async function onlyKeeperLeft(cgroup: ContainerCgroup, initPid: number, keeperUid: number, proc = '/proc'): Promise<boolean> {
  const before = await cgroup.procs();
  for (const pid of before) {
    if (pid === initPid) continue;
    const status = await readText(path.join(proc, String(pid), 'status'));
    const uids = status === null ? null : /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$/m.exec(status);
    if (!uids || uids.slice(1).some((u) => Number(u) !== keeperUid)) return false;
  }
  const after = await cgroup.procs();
  const listed = new Set(before);
  return after.length === before.length && after.every((pid) => listed.has(pid));
}

// ───────────────────────────── the choice at start-up

export interface LayoutFound {
  layout: CgroupLayout;
  /** A clause saying what was found, for the health report and for a refusal. */
  found: string;
}

function accessible(file: string, mode: number): boolean {
  try {
    fs.accessSync(file, mode);
    return true;
  } catch {
    return false;
  }
}

/**
 * What `root`/sys/fs/cgroup offers: `cgroup.controllers` at its top is the unified hierarchy (v2);
 * freezer, pids and memory directories are v1, also beside a `unified` directory (a hybrid host,
 * where these controllers are v1's). Usable only when this exec-host may write there (not a
 * read-only mount, as /sys/fs/cgroup is in an unprivileged container); otherwise the engine.
 */
export function probeLayout(root: string): LayoutFound {
  const mount = path.join(root, 'sys/fs/cgroup');
  const rw = fs.constants.R_OK | fs.constants.W_OK;
  if (fs.existsSync(path.join(mount, 'cgroup.controllers'))) {
    if (accessible(path.join(mount, 'cgroup.controllers'), fs.constants.R_OK) && accessible(mount, rw)) return { layout: 'v2', found: `${mount} is the unified hierarchy (cgroup v2)` };
    return { layout: 'engine', found: `${mount} is the unified hierarchy (cgroup v2), but this exec-host cannot write to it` };
  }
  const present = V1_CONTROLLERS.filter((c) => fs.statSync(path.join(mount, c), { throwIfNoEntry: false })?.isDirectory());
  if (present.length === V1_CONTROLLERS.length) {
    const hybrid = fs.existsSync(path.join(mount, 'unified')) ? ' beside a unified hierarchy (a hybrid host)' : '';
    if (accessible(path.join(mount, 'freezer'), rw) && accessible(path.join(mount, 'pids'), fs.constants.R_OK) && accessible(path.join(mount, 'memory'), fs.constants.R_OK)) {
      return { layout: 'v1', found: `${mount} has the cgroup v1 freezer, pids and memory controllers${hybrid}` };
    }
    return { layout: 'engine', found: `${mount} has the cgroup v1 controllers${hybrid}, but this exec-host cannot write to its freezer` };
  }
  if (present.length > 0)
    return { layout: 'engine', found: `${mount} has only the ${present.join(' and ')} controller${present.length > 1 ? 's' : ''} of cgroup v1 (freezer, pids and memory are all needed)` };
  return { layout: 'engine', found: `there is no cgroup filesystem at ${mount}` };
}

/** What the engine layer cannot do as well as the files, for the health report. */
export function engineMessage(why: string): string {
  return (
    `The exec-host uses the container engine instead of cgroup files (${why}): a command's processes are frozen with pause and listed by the engine, ` +
    'which is only usable when the exec-host shares the host’s pid namespace (otherwise runc sandboxes are killed from inside, which fails while a fork bomb holds every process slot); ' +
    'out-of-memory kills are counted from the engine’s events; hits of the process cap are not counted, only a refused fork in the output says so.'
  );
}

/**
 * The layout for this exec-host, once, at start-up: the one the host has (`auto`), or the one forced
 * (`LEMNISCATE_CGROUP_LAYOUT`); forcing v1 or v2 on a host without it is refused with a sentence.
 */
export function chooseCgroups(options: { root?: string; layout?: CgroupLayoutChoice }, engine: EngineControl): CgroupAccess {
  const root = options.root ?? '/';
  const wanted = options.layout ?? 'auto';
  const where = { mount: path.join(root, 'sys/fs/cgroup'), proc: path.join(root, 'proc') };
  if (wanted === 'engine') return new EngineCgroups(engine, where.proc, engineMessage('LEMNISCATE_CGROUP_LAYOUT is engine'));
  const probe = probeLayout(root);
  if (wanted !== 'auto' && probe.layout !== wanted) {
    throw new CgroupError(`LEMNISCATE_CGROUP_LAYOUT is ${wanted}, but ${probe.found}: set it to auto, or to the layout this host has.`);
  }
  if (probe.layout === 'v1') return new CgroupsV1(where);
  if (probe.layout === 'v2') return new CgroupsV2(where);
  return new EngineCgroups(engine, where.proc, engineMessage(probe.found));
}
