// The cgroup layouts against recorded trees (test/fixtures/cgroup-*, see the README there), each
// copied to a temporary directory and read as a host's root: detection, locating a container,
// counters, freeze and thaw (the test flips cgroup.events as the kernel would), the processes, the
// kill; and the engine layer's refusal of pids it cannot vouch for, against the recorded /proc.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  CgroupError,
  CgroupsV1,
  CgroupsV2,
  chooseCgroups,
  EngineCgroups,
  FREEZE_DEADLINE_MS,
  isContainerPath,
  killAllButInit,
  onlyKeeperLeft,
  probeLayout,
  type CgroupAccess,
  type CgroupLayout,
  type ContainerCgroup,
  type EngineControl,
} from '../../../src/driver/cgroups';

const FIXTURES = path.resolve(__dirname, '../../fixtures');
const V1_ID = '620c63ac16e9daa329ed2b59054aae99bc497099786c426abb9bee33c14f382d';
const V2_ID = '3f9c1e07b2d54a6e8c0a91f4d7e25b6c8a3d0e19f47b2c65d8e1a0f93b7c4d26';
const V1_INIT = 1369;
const V2_INIT = 2817;
const v1Dir = (root: string, controller: string) => path.join(root, 'sys/fs/cgroup', controller, 'docker', V1_ID);
const v2Dir = (root: string) => path.join(root, 'sys/fs/cgroup/system.slice', `docker-${V2_ID}.scope`);
const where = (root: string) => ({ mount: path.join(root, 'sys/fs/cgroup'), proc: path.join(root, 'proc') });

type TreeName = 'v1' | 'hybrid' | 'v2' | 'empty';

const made: string[] = [];
const immutable: string[] = [];

/** A fresh copy of a recorded tree: `hybrid` is the v1 recording as made, `v1` the same without its unified hierarchy. */
function tree(name: TreeName): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `lemni-cgroup-${name}-`));
  made.push(root);
  if (name === 'empty') return root;
  fs.cpSync(path.join(FIXTURES, name === 'v2' ? 'cgroup-v2' : 'cgroup-v1'), root, { recursive: true, verbatimSymlinks: true });
  if (name === 'v1') fs.rmSync(path.join(root, 'sys/fs/cgroup/unified'), { recursive: true });
  return root;
}

/**
 * A directory this process may no longer write to. Root ignores mode bits, so as root the directory
 * is made immutable (what a read-only cgroup mount is to access(2): a refused write).
 */
function unwritable(dir: string): void {
  if (process.getuid?.() !== 0) return fs.chmodSync(dir, 0o555);
  execFileSync('chattr', ['+i', dir]);
  immutable.push(dir);
}

afterEach(() => {
  for (const dir of immutable.splice(0)) execFileSync('chattr', ['-i', dir]);
  for (const root of made.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

/** No engine: the file layouts never call it. */
const noEngine: EngineControl = {
  pause: () => Promise.reject(new Error('not used')),
  unpause: () => Promise.reject(new Error('not used')),
  top: () => Promise.reject(new Error('not used')),
  oomKills: () => null,
};

function access(layout: 'v1' | 'v2', root: string): CgroupAccess {
  return layout === 'v1' ? new CgroupsV1(where(root)) : new CgroupsV2(where(root));
}

async function located(layout: 'v1' | 'v2', root: string): Promise<ContainerCgroup> {
  const cgroup = await access(layout, root).locate(layout === 'v1' ? { id: V1_ID, initPid: V1_INIT } : { id: V2_ID, initPid: V2_INIT });
  if (!cgroup) throw new Error(`the recorded ${layout} container was not located`);
  return cgroup;
}

/** Resolves once `file` satisfies `test` (woken by its change notifications). */
function whenFile(file: string, test: (text: string) => boolean): Promise<void> {
  return new Promise((resolve) => {
    const watcher = fs.watch(file, () => check());
    const check = () => {
      if (test(fs.readFileSync(file, 'utf8'))) {
        watcher.close();
        resolve();
      }
    };
    check();
  });
}

/** Settles a promise's state without waiting for it: 'pending' when it has not settled yet. */
async function stateOf(p: Promise<unknown>): Promise<'pending' | 'settled'> {
  return Promise.race([p.then(() => 'settled' as const), new Promise<'pending'>((r) => setImmediate(() => r('pending')))]);
}

// ───────────────────────────── detection

describe('the layout found at start-up', () => {
  const found: [string, CgroupLayout, TreeName, (root: string) => void, RegExp][] = [
    ['a v2 host', 'v2', 'v2', () => undefined, /is the unified hierarchy \(cgroup v2\)$/],
    [
      'a v2 host whose cgroup mount cannot be written',
      'engine',
      'v2',
      (root) => unwritable(path.join(root, 'sys/fs/cgroup')),
      /unified hierarchy \(cgroup v2\), but this exec-host cannot write to it/,
    ],
    ['a v1 host', 'v1', 'v1', () => undefined, /has the cgroup v1 freezer, pids and memory controllers$/],
    ['a v1 host whose freezer cannot be written', 'engine', 'v1', (root) => unwritable(path.join(root, 'sys/fs/cgroup/freezer')), /cannot write to its freezer/],
    ['a hybrid host', 'v1', 'hybrid', () => undefined, /controllers beside a unified hierarchy \(a hybrid host\)$/],
    ['a host without a cgroup filesystem', 'engine', 'empty', () => undefined, /^there is no cgroup filesystem at .*\/sys\/fs\/cgroup$/],
  ];
  it.each(found)('%s: %s', (_name, layout, name, prepare, says) => {
    const root = tree(name);
    prepare(root);
    const probe = probeLayout(root);
    expect(probe.layout).toBe(layout);
    expect(probe.found).toMatch(says);
  });

  // Every subset of v1's three controllers short of all three: the engine, naming what is there.
  const controllers = ['freezer', 'pids', 'memory'];
  const subsets = [1, 2, 3, 4, 5, 6].map((mask) => controllers.filter((_, i) => mask & (1 << i)));
  it.each(subsets.map((s) => [s.join('+'), s]))('a v1 host with only %s is the engine', (_name, present) => {
    const root = tree('v1');
    for (const c of controllers.filter((c) => !(present as string[]).includes(c))) fs.rmSync(path.join(root, 'sys/fs/cgroup', c), { recursive: true });
    const probe = probeLayout(root);
    expect(probe.layout).toBe('engine');
    expect(probe.found).toContain(`has only the ${(present as string[]).join(' and ')} controller`);
  });

  // Every forced layout on every kind of host: refused with a sentence when the host lacks it.
  const hosts: TreeName[] = ['v1', 'hybrid', 'v2', 'empty'];
  const forced: ('auto' | CgroupLayout)[] = ['auto', 'v1', 'v2', 'engine'];
  const has: Record<TreeName, CgroupLayout> = { v1: 'v1', hybrid: 'v1', v2: 'v2', empty: 'engine' };
  const cells = hosts.flatMap((host) => forced.map((layout) => [host, layout] as const));
  it(`forcing a layout: ${cells.length} cells (host × LEMNISCATE_CGROUP_LAYOUT)`, () => {
    for (const [host, layout] of cells) {
      const root = tree(host);
      const choose = () => chooseCgroups({ root, layout }, noEngine);
      const expected = layout === 'auto' ? has[host] : layout;
      if (layout === 'engine' || layout === 'auto' || layout === has[host]) {
        expect({ host, layout, chosen: choose().layout }).toEqual({ host, layout, chosen: expected });
      } else {
        expect(choose).toThrow(CgroupError);
        expect(choose).toThrow(new RegExp(`^LEMNISCATE_CGROUP_LAYOUT is ${layout}, but .+: set it to auto, or to the layout this host has\\.$`));
      }
    }
  });

  it('says under engine what is weaker, as sentences', () => {
    const engine = chooseCgroups({ root: tree('empty') }, noEngine);
    expect(engine.layout).toBe('engine');
    expect(engine.message).toMatch(
      /^The exec-host uses the container engine instead of cgroup files \(there is no cgroup filesystem at .+\): .*pause.*pid namespace.*out-of-memory kills are counted from the engine’s events; hits of the process cap are not counted/,
    );
    expect(chooseCgroups({ root: tree('v2') }, noEngine).message).toBeUndefined();
  });
});

// ───────────────────────────── locating a container

describe('locating a container from its init', () => {
  it.each(['v1', 'v2'] as const)('finds the recorded %s container', async (layout) => {
    await expect(located(layout, tree(layout))).resolves.toBeDefined();
  });

  // What /proc/<pid>/cgroup may say on a v2 host that does not lead to the container: never guessed.
  const v2Unresolvable: [string, string | null][] = [
    ['the root of a private cgroup namespace (0::/)', '0::/\n'],
    ['a cgroup outside the reader’s namespace', `0::/../../system.slice/docker-${V2_ID}.scope\n`],
    ['another process (a pid reused in another pid namespace)', '0::/user.slice/user-1000.slice/session-3.scope\n'],
    ['another container', `0::/system.slice/docker-${'e'.repeat(64)}.scope\n`],
    ['only v1 lines', `4:memory:/docker/${V2_ID}\n`],
    ['nothing', ''],
    ['no such process', null],
  ];
  it.each(v2Unresolvable)('v2: null for %s', async (_name, content) => {
    const root = tree('v2');
    const file = path.join(root, 'proc', String(V2_INIT), 'cgroup');
    if (content === null) fs.rmSync(file);
    else fs.writeFileSync(file, content);
    await expect(access('v2', root).locate({ id: V2_ID, initPid: V2_INIT })).resolves.toBeNull();
  });

  it('v2: finds Docker’s cgroupfs naming too (0::/docker/<id>), and null once the cgroup is gone', async () => {
    const root = tree('v2');
    const dir = path.join(root, 'sys/fs/cgroup/docker', V2_ID);
    fs.cpSync(v2Dir(root), dir, { recursive: true });
    fs.writeFileSync(path.join(root, 'proc', String(V2_INIT), 'cgroup'), `0::/docker/${V2_ID}\n`);
    expect(await access('v2', root).locate({ id: V2_ID, initPid: V2_INIT })).not.toBeNull();
    fs.rmSync(dir, { recursive: true });
    expect(await access('v2', root).locate({ id: V2_ID, initPid: V2_INIT })).toBeNull();
  });

  // Each controller the kill and the counters need, missing from /proc/<pid>/cgroup or from the tree.
  it.each(['freezer', 'pids', 'memory'].flatMap((c) => [[c, 'line'] as const, [c, 'directory'] as const]))('v1: null without the %s %s', async (controller, what) => {
    const root = tree('v1');
    const file = path.join(root, 'proc', String(V1_INIT), 'cgroup');
    if (what === 'line') {
      const lines = fs.readFileSync(file, 'utf8').split('\n');
      fs.writeFileSync(file, lines.filter((l) => !l.split(':')[1]?.split(',').includes(controller)).join('\n'));
    } else {
      fs.rmSync(v1Dir(root, controller), { recursive: true });
    }
    await expect(access('v1', root).locate({ id: V1_ID, initPid: V1_INIT })).resolves.toBeNull();
  });

  it('v1: null when the paths are not the container’s (the host’s root cgroups)', async () => {
    const root = tree('v1');
    await expect(access('v1', root).locate({ id: V1_ID, initPid: 1021 })).resolves.toBeNull();
  });

  const paths: [string, boolean][] = [
    [`/docker/${V2_ID}`, true],
    [`/system.slice/docker-${V2_ID}.scope`, true],
    [`/kubepods/burstable/pod1/docker/${V2_ID}`, true],
    ['/', false],
    ['', false],
    [`/../docker/${V2_ID}`, false],
    [`docker/${V2_ID}`, false],
    [`/docker/${V2_ID}/..`, false],
    [`/${V2_ID}/init.scope`, false],
    ['/system.slice/docker.service', false],
  ];
  it.each(paths)('isContainerPath(%j) is %s', (p, expected) => {
    expect(isContainerPath(p, V2_ID)).toBe(expected);
  });
});

// ───────────────────────────── counters

describe('counters', () => {
  const recorded = { v1: { oomKills: 1, pidsLimitHits: 3 }, v2: { oomKills: 2, pidsLimitHits: 5 } };
  const files = {
    v1: { oomKills: (root: string) => path.join(v1Dir(root, 'memory'), 'memory.oom_control'), pidsLimitHits: (root: string) => path.join(v1Dir(root, 'pids'), 'pids.events') },
    v2: { oomKills: (root: string) => path.join(v2Dir(root), 'memory.events'), pidsLimitHits: (root: string) => path.join(v2Dir(root), 'pids.events') },
  };
  const keys = { oomKills: 'oom_kill', pidsLimitHits: 'max' };
  // What a counter file may hold, and what the counter then is (null: unknown, never a guess).
  const variants: [string, ((key: string) => string) | null, number | null | 'recorded'][] = [
    ['as recorded', () => '', 'recorded'],
    ['absent', null, null],
    ['empty', () => '', null],
    ['without the key', () => 'low 0\nhigh 0\n', null],
    ['a word for the number', (k) => `${k} many\n`, null],
    ['a negative number', (k) => `${k} -1\n`, null],
    ['the key without a number', (k) => `${k}\n`, null],
    ['the key inside another word', (k) => `x${k} 4\n`, null],
    ['a large count, among other lines', (k) => `low 0\n${k} 4294967296\nhigh 0\n`, 4294967296],
    ['zero', (k) => `${k} 0\n`, 0],
  ];
  const cells = (['v1', 'v2'] as const).flatMap((layout) => (['oomKills', 'pidsLimitHits'] as const).flatMap((counter) => variants.map((v) => [layout, counter, ...v] as const)));
  it(`reads every counter file of both layouts as present, absent or malformed: ${cells.length} cells`, async () => {
    for (const [layout, counter, variant, content, expected] of cells) {
      const root = tree(layout);
      const file = files[layout][counter](root);
      if (content === null) fs.rmSync(file);
      else if (expected !== 'recorded') fs.writeFileSync(file, content(keys[counter]));
      const counters = await (await located(layout, root)).counters();
      const other = counter === 'oomKills' ? 'pidsLimitHits' : 'oomKills';
      // One file's state never changes the other counter.
      expect({ layout, counter, variant, value: counters[counter], other: counters[other] }).toEqual({
        layout,
        counter,
        variant,
        value: expected === 'recorded' ? recorded[layout][counter] : expected,
        other: recorded[layout][other],
      });
    }
  });
});

// ───────────────────────────── freeze, thaw, processes

describe('freeze and thaw', () => {
  it('v2 writes 1 to cgroup.freeze and is frozen only when cgroup.events says frozen 1', async () => {
    const root = tree('v2');
    const dir = v2Dir(root);
    const cgroup = await located('v2', root);
    const freezing = cgroup.freeze();
    await whenFile(path.join(dir, 'cgroup.freeze'), (t) => t === '1');
    expect(await stateOf(freezing)).toBe('pending');
    // What the kernel does once every task has stopped.
    fs.writeFileSync(path.join(dir, 'cgroup.events'), 'populated 1\nfrozen 1\n');
    await expect(freezing).resolves.toBe(true);
    await cgroup.thaw();
    expect(fs.readFileSync(path.join(dir, 'cgroup.freeze'), 'utf8')).toBe('0');
  });

  it(`v2 answers false when the cgroup does not freeze within ${FREEZE_DEADLINE_MS} ms`, async () => {
    const cgroup = await located('v2', tree('v2'));
    const started = Date.now();
    await expect(cgroup.freeze()).resolves.toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(FREEZE_DEADLINE_MS - 50);
  });

  it('v1 writes FROZEN to freezer.state and waits for it to read FROZEN; thaw writes THAWED', async () => {
    const root = tree('v1');
    const cgroup = await located('v1', root);
    await expect(cgroup.freeze()).resolves.toBe(true);
    expect(fs.readFileSync(path.join(v1Dir(root, 'freezer'), 'freezer.state'), 'utf8')).toBe('FROZEN');
    await cgroup.thaw();
    expect(fs.readFileSync(path.join(v1Dir(root, 'freezer'), 'freezer.state'), 'utf8')).toBe('THAWED');
  });

  it.each(['v1', 'v2'] as const)('%s rejects a freeze once the container’s cgroup is gone', async (layout) => {
    const root = tree(layout);
    const cgroup = await located(layout, root);
    fs.rmSync(layout === 'v1' ? v1Dir(root, 'freezer') : v2Dir(root), { recursive: true });
    await expect(cgroup.freeze()).rejects.toThrow();
  });
});

describe('the processes of a container', () => {
  it('v1 lists the pids controller’s cgroup.procs', async () => {
    await expect((await located('v1', tree('v1'))).procs()).resolves.toEqual([1369, 1438]);
  });

  it('v2 lists the container’s cgroup.procs and those of the cgroups below it', async () => {
    const root = tree('v2');
    const cgroup = await located('v2', root);
    await expect(cgroup.procs()).resolves.toEqual([2817, 2869, 3104]);
    fs.mkdirSync(path.join(v2Dir(root), 'inner/deeper'), { recursive: true });
    fs.writeFileSync(path.join(v2Dir(root), 'inner/cgroup.procs'), '3200\n');
    fs.writeFileSync(path.join(v2Dir(root), 'inner/deeper/cgroup.procs'), '3201\n3202\n');
    await expect(cgroup.procs()).resolves.toEqual([2817, 2869, 3104, 3200, 3201, 3202]);
  });

  // 0 is how the kernel lists a process outside the reader's pid namespace; kill(0) would hit the exec-host's own group.
  it.each([
    ['0', '2817\n0\n'],
    ['a word', '2817\nabc\n'],
    ['a negative pid', '-5\n'],
  ])('refuses a cgroup.procs listing %s', async (_name, content) => {
    for (const layout of ['v1', 'v2'] as const) {
      const root = tree(layout);
      fs.writeFileSync(path.join(layout === 'v1' ? v1Dir(root, 'pids') : v2Dir(root), 'cgroup.procs'), content);
      await expect((await located(layout, root)).procs()).rejects.toThrow(CgroupError);
    }
  });
});

// ───────────────────────────── the kill, on real processes

describe('killAllButInit', () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
  });

  function sleeper(): { child: ChildProcess; pid: number; exited: Promise<NodeJS.Signals | null> } {
    const child = spawn('sleep', ['60'], { stdio: 'ignore' });
    children.push(child);
    return { child, pid: child.pid!, exited: new Promise((r) => child.once('exit', (_code, signal) => r(signal))) };
  }

  it.each(['v1', 'v2'] as const)('%s: freezes, SIGKILLs every listed process but the init, thaws', async (layout) => {
    const root = tree(layout);
    const [init, a, b] = [sleeper(), sleeper(), sleeper()];
    const procs = layout === 'v1' ? path.join(v1Dir(root, 'pids'), 'cgroup.procs') : path.join(v2Dir(root), 'cgroup.procs');
    fs.writeFileSync(procs, `${init.pid}\n${a.pid}\n${b.pid}\n`);
    const cgroup = await located(layout, root);
    const events = path.join(v2Dir(root), 'cgroup.events');
    if (layout === 'v2') void whenFile(path.join(v2Dir(root), 'cgroup.freeze'), (t) => t === '1').then(() => fs.writeFileSync(events, 'populated 1\nfrozen 1\n'));
    await expect(killAllButInit(cgroup, init.pid)).resolves.toEqual({ killed: true });
    await expect(a.exited).resolves.toBe('SIGKILL');
    await expect(b.exited).resolves.toBe('SIGKILL');
    expect(init.child.exitCode).toBeNull();
    expect(() => process.kill(init.pid, 0)).not.toThrow();
    const freezer = layout === 'v1' ? path.join(v1Dir(root, 'freezer'), 'freezer.state') : path.join(v2Dir(root), 'cgroup.freeze');
    expect(fs.readFileSync(freezer, 'utf8')).toBe(layout === 'v1' ? 'THAWED' : '0');
  });

  it('kills nothing and thaws when the processes cannot be known for sure', async () => {
    const root = tree('v1');
    const victim = sleeper();
    fs.writeFileSync(path.join(v1Dir(root, 'pids'), 'cgroup.procs'), `${victim.pid}\n0\n`);
    const result = await killAllButInit(await located('v1', root), V1_INIT);
    expect(result).toEqual({ killed: false, reason: expect.stringMatching(/lists "0", which is not a process this exec-host can see\.$/) });
    expect(() => process.kill(victim.pid, 0)).not.toThrow();
    expect(fs.readFileSync(path.join(v1Dir(root, 'freezer'), 'freezer.state'), 'utf8')).toBe('THAWED');
  });

  it('kills nothing when the freeze cannot be asked for', async () => {
    const root = tree('v2');
    const cgroup = await located('v2', root);
    fs.rmSync(v2Dir(root), { recursive: true });
    await expect(killAllButInit(cgroup, V2_INIT)).resolves.toMatchObject({ killed: false });
  });
});

// ───────────────────────────── the engine layer

describe('the engine layer', () => {
  /** An engine that answers from a script and records what it was asked. */
  function engine(top: number[], ooms: number | null = 0): EngineControl & { calls: string[] } {
    const calls: string[] = [];
    return {
      calls,
      pause: async (id) => void calls.push(`pause ${id}`),
      unpause: async (id) => void calls.push(`unpause ${id}`),
      top: async (id) => {
        calls.push(`top ${id}`);
        return top;
      },
      oomKills: () => ooms,
    };
  }

  async function engineCgroup(root: string, e: EngineControl): Promise<ContainerCgroup> {
    const cgroup = await new EngineCgroups(e, path.join(root, 'proc')).locate({ id: V2_ID, initPid: V2_INIT });
    if (!cgroup) throw new Error('not located');
    return cgroup;
  }

  it('pauses, lists the engine’s pids when they are the container’s processes here, unpauses', async () => {
    const e = engine([2817, 2869, 3104]);
    const cgroup = await engineCgroup(tree('v2'), e);
    await expect(cgroup.freeze()).resolves.toBe(true);
    await expect(cgroup.procs()).resolves.toEqual([2817, 2869, 3104]);
    await cgroup.thaw();
    expect(e.calls).toEqual([`pause ${V2_ID}`, `top ${V2_ID}`, `unpause ${V2_ID}`]);
  });

  // Seen from an exec-host that does not share the engine's pid namespace, the engine's pids are wrong here.
  const refusals: [string, (root: string) => void, RegExp][] = [
    ['the init is not a process here', (root) => fs.rmSync(path.join(root, 'proc', String(V2_INIT)), { recursive: true }), /container's init \(pid 2817 for the engine\) is not a process here/],
    [
      'the init here is a process in the exec-host’s own namespaces',
      (root) => {
        for (const ns of ['mnt', 'pid']) {
          fs.rmSync(path.join(root, 'proc/2817/ns', ns));
          fs.symlinkSync(fs.readlinkSync(path.join(root, 'proc/1907/ns', ns)), path.join(root, 'proc/2817/ns', ns));
        }
      },
      /Pid 2817 here is not the container's init/,
    ],
    [
      'a listed pid is not a process here',
      (root) => fs.rmSync(path.join(root, 'proc/3104'), { recursive: true }),
      /Pid 3104, which the engine lists for container 3f9c1e07b2d5, is not a process here/,
    ],
    [
      'a listed pid is in other namespaces',
      (root) => {
        fs.rmSync(path.join(root, 'proc/3104/ns/mnt'));
        fs.symlinkSync('mnt:[4026532999]', path.join(root, 'proc/3104/ns/mnt'));
      },
      /Pid 3104, .* is not in the container’s namespaces here/,
    ],
  ];
  it.each(refusals)('refuses when %s', async (_name, prepare, says) => {
    const root = tree('v2');
    prepare(root);
    const cgroup = await engineCgroup(root, engine([2817, 2869, 3104]));
    await expect(cgroup.procs()).rejects.toThrow(says);
    await expect(cgroup.procs()).rejects.toThrow(/this exec-host does not share the container engine’s pid namespace/);
  });

  it('kills nothing and unpauses when the pids are refused', async () => {
    const root = tree('v2');
    fs.rmSync(path.join(root, 'proc', String(V2_INIT)), { recursive: true });
    const e = engine([2817, 2869]);
    await expect(killAllButInit(await engineCgroup(root, e), V2_INIT)).resolves.toMatchObject({ killed: false });
    expect(e.calls).toEqual([`pause ${V2_ID}`, `top ${V2_ID}`, `unpause ${V2_ID}`]);
  });

  it.each([0, 3, null])('counts out-of-memory kills from the engine’s events (%s) and knows no pids cap hits', async (ooms) => {
    const cgroup = await engineCgroup(tree('v2'), engine([], ooms));
    await expect(cgroup.counters()).resolves.toEqual({ oomKills: ooms, pidsLimitHits: null });
  });

  it('has no cgroup for a container without an init', async () => {
    await expect(new EngineCgroups(engine([]), '/proc').locate({ id: V2_ID, initPid: 0 })).resolves.toBeNull();
  });
});

// ───────────────────────────── nothing of a command left: the kill without a freeze

describe('onlyKeeperLeft', () => {
  const INIT = 4001;
  const KEEPER = 10000;

  /** A cgroup whose process list is read from `lists` in turn (the last one repeats), counting freezes. */
  function fakeCgroup(...lists: number[][]): ContainerCgroup & { freezes: number } {
    let reads = 0;
    return {
      freezes: 0,
      async freeze() {
        this.freezes++;
        return true;
      },
      async thaw() {},
      async procs() {
        return lists[Math.min(reads++, lists.length - 1)]!;
      },
      async counters() {
        return { oomKills: null, pidsLimitHits: null };
      },
    };
  }

  /** A /proc with a status file per pid: `Uid:` real, effective, saved, filesystem. */
  function procWith(uids: Record<number, [number, number, number, number] | null>): string {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-proc-'));
    made.push(root);
    for (const [pid, ids] of Object.entries(uids)) {
      if (!ids) continue;
      fs.mkdirSync(path.join(root, pid));
      fs.writeFileSync(path.join(root, pid, 'status'), `Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t${ids.join('\t')}\nGid:\t${ids.join('\t')}\n`);
    }
    return root;
  }

  const keeper: [number, number, number, number] = [KEEPER, KEEPER, KEEPER, KEEPER];

  it("is true when every process but the init is the keeper's, in every uid, and the list holds still", async () => {
    await expect(onlyKeeperLeft(fakeCgroup([INIT, 4002]), INIT, KEEPER, procWith({ 4002: keeper }))).resolves.toBe(true);
    await expect(onlyKeeperLeft(fakeCgroup([INIT]), INIT, KEEPER, procWith({}))).resolves.toBe(true);
  });

  it.each([
    ['a process of the sandbox user', { 4002: keeper, 4003: [10001, 10001, 10001, 10001] }, [[INIT, 4002, 4003]]],
    ["the keeper's real uid with another effective one", { 4002: [KEEPER, 10001, KEEPER, KEEPER] }, [[INIT, 4002]]],
    ["the keeper's uids but another saved one", { 4002: [KEEPER, KEEPER, 0, KEEPER] }, [[INIT, 4002]]],
    ['a process gone before its status was read', { 4002: null }, [[INIT, 4002]]],
    [
      'a process that appeared while the users were read',
      { 4002: keeper },
      [
        [INIT, 4002],
        [INIT, 4002, 4004],
      ],
    ],
    [
      'a process that ended while the users were read (its pid may be taken by another)',
      { 4002: keeper, 4003: keeper },
      [
        [INIT, 4002, 4003],
        [INIT, 4002],
      ],
    ],
  ] as const)('is false for %s', async (_what, uids, lists) => {
    await expect(onlyKeeperLeft(fakeCgroup(...(lists as unknown as number[][])), INIT, KEEPER, procWith(uids as Record<number, [number, number, number, number] | null>))).resolves.toBe(false);
  });

  it('rejects when the list cannot be read, and killAllButInit then goes the frozen way, which says why', async () => {
    const broken = { ...fakeCgroup([INIT]), procs: () => Promise.reject(new CgroupError('cannot read')) };
    await expect(onlyKeeperLeft(broken, INIT, KEEPER, procWith({})).catch(() => 'threw')).resolves.toBe('threw');
    await expect(killAllButInit(broken, INIT, { uid: KEEPER, proc: procWith({}) })).resolves.toEqual({ killed: false, reason: 'cannot read' });
  });

  it('lets killAllButInit skip the freeze only when nothing but the keeper is left', async () => {
    const idle = fakeCgroup([INIT, 4002]);
    await expect(killAllButInit(idle, INIT, { uid: KEEPER, proc: procWith({ 4002: keeper }) })).resolves.toEqual({ killed: true });
    expect(idle.freezes).toBe(0);
    const withCommand = fakeCgroup([INIT, 4003], [INIT]);
    await expect(killAllButInit(withCommand, INIT, { uid: KEEPER, proc: procWith({ 4003: [10001, 10001, 10001, 10001] }) })).resolves.toEqual({ killed: true });
    expect(withCommand.freezes).toBe(1);
    // Without a keeper's uid (a container made before the keeper had one), it always freezes.
    const older = fakeCgroup([INIT]);
    await expect(killAllButInit(older, INIT)).resolves.toEqual({ killed: true });
    expect(older.freezes).toBe(1);
  });
});
