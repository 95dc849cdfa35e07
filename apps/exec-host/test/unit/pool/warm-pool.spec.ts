// The warm pool's promises, attacked with fakes of its ports (making and destroying shells, the
// engine's image ids, the host's memory and the exec-host's capacity): kinds never mixed, a taken
// shell never given back, the cap and the memory floor never passed, stale shells replaced.
import { shellKey, WarmPool, type CheckoutKind, type Shell, type ShellSpec, type WarmPoolOptions } from '../../../src/pool/warm-pool';

const SPEC: ShellSpec = {
  image: 'lemniscate/sandbox:current',
  env: ['A=1', 'B=2'],
  runtime: 'runc',
  cpus: 2,
  memoryMb: 2048,
  pids: 256,
  diskMb: 2048,
  seccompProfile: '{"defaultAction":"SCMP_ACT_ERRNO"}',
  apparmorProfile: 'lemniscate-sandbox',
};

/** A spec that differs from SPEC in one field only. */
const VARIANTS: [keyof ShellSpec, ShellSpec][] = [
  ['image', { ...SPEC, image: 'lemniscate/env:other' }],
  ['env', { ...SPEC, env: ['A=1', 'B=3'] }],
  ['runtime', { ...SPEC, runtime: 'runsc' }],
  ['cpus', { ...SPEC, cpus: 1 }],
  ['memoryMb', { ...SPEC, memoryMb: 1024 }],
  ['pids', { ...SPEC, pids: 512 }],
  ['diskMb', { ...SPEC, diskMb: 4096 }],
  ['seccompProfile', { ...SPEC, seccompProfile: '{"defaultAction":"SCMP_ACT_ALLOW"}' }],
  ['apparmorProfile', { ...SPEC, apparmorProfile: null }],
];

interface Fakes {
  made: Shell[];
  destroyed: string[];
  logs: string[];
  inFlight: number;
  maxInFlight: number;
  /** live + ready + being made, seen by every make call */
  occupancy: number[];
  live: number;
  max: number;
  memory: number;
  imageIds: Record<string, string | null>;
  dead: Set<string>;
  failMake: number;
  failDestroy: boolean;
}

function harness(over: Partial<WarmPoolOptions> = {}, size = 2) {
  const f: Fakes = { made: [], destroyed: [], logs: [], inFlight: 0, maxInFlight: 0, occupancy: [], live: 0, max: 100, memory: 0.9, imageIds: {}, dead: new Set(), failMake: 0, failDestroy: false };
  let n = 0;
  const options: WarmPoolOptions = {
    size,
    maxKeys: 8,
    idleKeyMs: 30 * 60_000,
    maxShellAgeMs: 60 * 60_000,
    memoryFloor: 0.2,
    capacity: () => ({ live: f.live, max: f.max }),
    make: async (spec, key, sandboxId) => {
      f.inFlight++;
      f.maxInFlight = Math.max(f.maxInFlight, f.inFlight);
      const stats = pool.stats();
      f.occupancy.push(f.live + stats.ready + stats.making);
      await Promise.resolve();
      f.inFlight--;
      if (f.failMake > 0) {
        f.failMake--;
        throw new Error('the engine refused the container');
      }
      const shell: Shell = { sandboxId, containerId: `c-${++n}`, dir: `/state/${sandboxId}`, key, imageId: f.imageIds[spec.image] ?? 'sha256:one', madeAt: Date.now() };
      f.made.push(shell);
      return shell;
    },
    destroy: async (shell) => {
      await Promise.resolve();
      if (f.failDestroy) throw new Error('device or resource busy');
      f.destroyed.push(shell.sandboxId);
    },
    imageId: async (image) => (image in f.imageIds ? f.imageIds[image]! : 'sha256:one'),
    alive: async (shell) => !f.dead.has(shell.sandboxId),
    memoryAvailable: async () => f.memory,
    log: (m) => f.logs.push(m),
    ...over,
  };
  const pool = new WarmPool(options);
  const fill = async () => {
    pool.refill();
    await pool.settled();
  };
  return { pool, f, fill };
}

describe('WarmPool', () => {
  it('does nothing at size 0: no shell is made, take gives none, the target is 0', async () => {
    const { pool, f, fill } = harness({}, 0);
    pool.pin(SPEC);
    pool.start();
    await fill();
    expect(pool.take(SPEC)).toBeNull();
    expect(f.made).toEqual([]);
    expect(pool.stats()).toMatchObject({ target: 0, ready: 0 });
  });

  it('fills a pinned kind to its size, one shell at a time', async () => {
    const { pool, f, fill } = harness({}, 3);
    pool.pin(SPEC);
    await fill();
    expect(f.made).toHaveLength(3);
    expect(f.maxInFlight).toBe(1);
    expect(pool.stats()).toMatchObject({ target: 3, ready: 3, making: 0 });
    for (const s of f.made) expect(pool.owns(s.sandboxId)).toBe(true);
  });

  it('hands a taken shell to its caller only: never twice, not owned by the pool any more, and replaced when asked to refill', async () => {
    const { pool, f, fill } = harness();
    pool.pin(SPEC);
    await fill();
    const a = pool.take(SPEC)!;
    const b = pool.take(SPEC)!;
    expect(a.sandboxId).not.toBe(b.sandboxId);
    expect(pool.take(SPEC)).toBeNull();
    expect(pool.owns(a.sandboxId)).toBe(false);
    expect(pool.owns(b.sandboxId)).toBe(false);
    await fill();
    const again = [pool.take(SPEC)!, pool.take(SPEC)!].map((s) => s.sandboxId);
    expect(again).not.toContain(a.sandboxId);
    expect(again).not.toContain(b.sandboxId);
    // Shells taken are the caller's to destroy: the pool destroyed none of them.
    expect(f.destroyed).toEqual([]);
  });

  it.each(VARIANTS)('never hands a shell to a request whose %s differs', async (_field, other) => {
    const { pool, fill } = harness();
    pool.pin(SPEC);
    await fill();
    expect(shellKey(other)).not.toBe(shellKey(SPEC));
    expect(pool.take(other)).toBeNull();
    expect(pool.stats().ready).toBe(2);
  });

  it('treats the order of the environment variables as the same kind', async () => {
    const { pool, fill } = harness();
    pool.pin(SPEC);
    await fill();
    expect(shellKey({ ...SPEC, env: ['B=2', 'A=1'] })).toBe(shellKey(SPEC));
    expect(pool.take({ ...SPEC, env: ['B=2', 'A=1'] })).not.toBeNull();
  });

  describe('shells checked out ahead', () => {
    const kind = (id: string, fills: string[], fail = false): CheckoutKind => ({
      id,
      fill: async (shell) => {
        if (fail) throw new Error('the repository is gone');
        fills.push(shell.sandboxId);
        shell.checkout = { for: id };
      },
    });

    it('are taken only by a request of the same checkout; another gets an empty shell; a request without one never gets a filled shell', async () => {
      const { pool, fill } = harness({}, 1);
      const fills: string[] = [];
      pool.pin(SPEC);
      await fill();
      expect(pool.take(SPEC, kind('repo-a', fills))?.checkout).toBeUndefined(); // learnt now
      await fill();
      expect(fills).toHaveLength(1);
      const forB = pool.take(SPEC, kind('repo-b', fills));
      expect(forB).not.toBeNull();
      expect(forB!.checkout).toBeUndefined();
      await fill();
      const plain = pool.take(SPEC);
      expect(plain?.checkout).toBeUndefined();
      await fill();
      const forA = pool.take(SPEC, kind('repo-a', fills));
      expect(forA!.checkout).toEqual({ for: 'repo-a' });
      expect(fills).toContain(forA!.sandboxId);
    });

    it('drop their kind, and destroy the shell, when the fill fails', async () => {
      const { pool, f, fill } = harness({}, 1);
      pool.pin(SPEC);
      await fill();
      pool.take(SPEC, kind('gone', [], true));
      await fill();
      expect(f.logs.some((l) => /could not be checked out ahead, and that kind is no longer kept/.test(l))).toBe(true);
      const failed = f.made.filter((s) => f.destroyed.includes(s.sandboxId));
      expect(failed.length).toBeGreaterThanOrEqual(1);
      expect(pool.stats().keys.some((k) => k.key.endsWith(':gone'))).toBe(false);
    });

    it('destroy the shells already filled for a kind, not only the one that failed, when a later fill of it fails', async () => {
      const { pool, f, fill } = harness({}, 2);
      let fills = 0;
      const flaky: CheckoutKind = {
        id: 'moved',
        fill: async (shell) => {
          if (++fills > 1) throw new Error('the ref is no longer there');
          shell.checkout = { for: 'moved' };
        },
      };
      pool.take(SPEC, flaky); // learns the kind; the pool is empty yet
      await fill();
      const filled = f.made.filter((s) => s.key === `${shellKey(SPEC)}:moved`);
      expect(filled).toHaveLength(2); // the first filled, the second failed its fill
      // Neither is kept by the pool nor left owned (the reaper must be free to remove what the pool no longer counts).
      for (const s of filled) {
        expect(f.destroyed).toContain(s.sandboxId);
        expect(pool.owns(s.sandboxId)).toBe(false);
      }
      expect(pool.stats().ready).toBe(2); // the base kind's own two
    });
  });

  it('never lets live + warm + being made pass the cap, says why it is held, and gives up another kind for a cold start at the cap', async () => {
    const { pool, f, fill } = harness({}, 3);
    f.max = 5;
    f.live = 1;
    pool.pin(SPEC);
    pool.pin({ ...SPEC, runtime: 'runsc' });
    await fill();
    // Seen inside each make, the one being made included.
    expect(Math.max(...f.occupancy)).toBeLessThanOrEqual(f.max);
    expect(f.live + pool.stats().ready).toBe(f.max);
    expect(pool.stats().held).toMatch(/^The warm pool is held below its target: this exec-host is at its cap of 5 sandboxes/);
    // A request of a third kind at the cap: a shell of another kind goes to make room.
    const before = f.destroyed.length;
    const ready = f.made.filter((s) => pool.owns(s.sandboxId)).map((s) => s.sandboxId);
    expect(pool.take({ ...SPEC, cpus: 1 })).toBeNull();
    // Given up at once (no longer counted), destroyed once the engine answers.
    expect(pool.stats().ready).toBe(f.max - f.live - 1);
    await new Promise((r) => setImmediate(r));
    expect(f.destroyed.length).toBe(before + 1);
    expect(ready).toContain(f.destroyed[f.destroyed.length - 1]);
  });

  it('makes nothing below its memory floor and says so with the numbers', async () => {
    const { pool, f, fill } = harness();
    f.memory = 0.15;
    pool.pin(SPEC);
    await fill();
    expect(f.made).toEqual([]);
    expect(pool.stats().held).toBe("The warm pool is held below its target: the host has 15 % of its memory available, under the pool's floor of 20 %.");
    f.memory = 0.5;
    await fill();
    expect(f.made).toHaveLength(2);
    expect(pool.stats().held).toBeNull();
  });

  describe('shells checked out ahead at a commit their ref has moved from', () => {
    /** A kind whose ref names `ref.commit`; each fill checks out what it names then. */
    const moving = (ref: { commit: string }, asked: Shell[][], fail?: () => boolean): CheckoutKind => ({
      id: 'moving',
      fill: async (shell) => {
        shell.checkout = { commit: ref.commit };
      },
      outdated: async (shells) => {
        asked.push(shells);
        if (fail?.()) throw new Error('the repository did not answer');
        return shells.filter((s) => (s.checkout as { commit: string }).commit !== ref.commit);
      },
    });
    const filledOf = (f: Fakes) => f.made.filter((s) => s.key === `${shellKey(SPEC)}:moving`);

    it('are replaced by shells filled at the new commit, the ref read once for all of them', async () => {
      const { pool, f, fill } = harness({ refCheckMs: 0 }, 2);
      const ref = { commit: 'c1' };
      const asked: Shell[][] = [];
      pool.take(SPEC, moving(ref, asked)); // learns the kind
      await fill();
      const first = filledOf(f);
      expect(first.map((s) => s.checkout)).toEqual([{ commit: 'c1' }, { commit: 'c1' }]);
      ref.commit = 'c2';
      asked.length = 0;
      await fill();
      expect(asked[0]).toHaveLength(2); // both shells, in one read of the ref
      for (const s of first) expect(f.destroyed).toContain(s.sandboxId);
      const taken = pool.take(SPEC, moving(ref, asked));
      expect(taken?.checkout).toEqual({ commit: 'c2' });
    });

    it('are kept when the ref cannot be read (taking one checks it again)', async () => {
      let down = false;
      const { pool, f, fill } = harness({ refCheckMs: 0 }, 1);
      const ref = { commit: 'c1' };
      pool.take(
        SPEC,
        moving(ref, [], () => down),
      );
      await fill();
      const [shell] = filledOf(f);
      down = true;
      ref.commit = 'c2';
      await fill();
      expect(f.destroyed).not.toContain(shell!.sandboxId);
      expect(pool.stats().ready).toBe(2); // the base kind's and the filled one
    });

    it('are kept, and the pass goes on to refill, when the ref does not answer in time', async () => {
      const { pool, f, fill } = harness({ refCheckMs: 0, refReadTimeoutMs: 20 }, 1);
      let hang = false;
      const kind: CheckoutKind = {
        id: 'silent',
        fill: async (shell) => {
          shell.checkout = { commit: 'c1' };
        },
        outdated: (shells) => (hang ? new Promise<Shell[]>(() => undefined) : Promise.resolve(shells.filter(() => false))),
      };
      pool.take(SPEC, kind);
      await fill();
      const before = f.made.length;
      hang = true;
      pool.take(SPEC); // the base kind needs a new shell: this pass must not wait for the silent ref
      await fill();
      expect(f.made.length).toBe(before + 1);
      expect(f.destroyed).toEqual([]);
      expect(pool.stats().ready).toBe(2); // each kind its one
    });

    it('start no second reading of a ref while the first has not answered (a dead remote piles up no git processes)', async () => {
      const { pool, fill } = harness({ refCheckMs: 0, refReadTimeoutMs: 5 }, 1);
      let started = 0;
      let answer: (shells: Shell[]) => void = () => undefined;
      const kind: CheckoutKind = {
        id: 'slow',
        fill: async (shell) => {
          shell.checkout = { commit: 'c1' };
        },
        outdated: (shells) => {
          started++;
          return started === 1 ? Promise.resolve([]) : new Promise<Shell[]>((resolve) => (answer = () => resolve(shells.filter(() => false))));
        },
      };
      pool.take(SPEC, kind);
      await fill(); // fills the kind's shell
      await fill(); // the first reading, answered at once
      await fill(); // the second, which hangs past the pass's wait
      await fill(); // none beside it
      expect(started).toBe(2);
      answer([]);
      await new Promise((r) => setImmediate(r));
      await fill();
      expect(started).toBe(3);
    });

    it('are looked for at most every refCheckMs per kind, not at every pass', async () => {
      const { pool, fill } = harness({ refCheckMs: 60_000 }, 1);
      const asked: Shell[][] = [];
      pool.take(SPEC, moving({ commit: 'c1' }, asked));
      for (let i = 0; i < 4; i++) await fill();
      expect(asked).toHaveLength(0); // read by the fill just now
      const now = jest.spyOn(Date, 'now').mockReturnValue(Date.now() + 60_001);
      try {
        await fill();
        await fill();
      } finally {
        now.mockRestore();
      }
      expect(asked).toHaveLength(1);
    });
  });

  describe('stale shells are replaced', () => {
    it('when older than their maximum age', async () => {
      const now = jest.spyOn(Date, 'now');
      try {
        now.mockReturnValue(1_000_000);
        const { pool, f, fill } = harness();
        pool.pin(SPEC);
        await fill();
        const first = f.made.map((s) => s.sandboxId);
        now.mockReturnValue(1_000_000 + 60 * 60_000 + 1);
        await fill();
        expect(f.destroyed.sort()).toEqual([...first].sort());
        expect(pool.stats().ready).toBe(2);
      } finally {
        now.mockRestore();
      }
    });

    it('when their image tag was rebuilt', async () => {
      const { pool, f, fill } = harness();
      pool.pin(SPEC);
      await fill();
      const first = f.made.map((s) => s.sandboxId);
      f.imageIds[SPEC.image] = 'sha256:two';
      await fill();
      expect(f.destroyed.sort()).toEqual([...first].sort());
      expect(f.made.slice(2).every((s) => s.imageId === 'sha256:two')).toBe(true);
    });

    it('when their container stopped', async () => {
      const { pool, f, fill } = harness();
      pool.pin(SPEC);
      await fill();
      f.dead.add(f.made[0]!.sandboxId);
      await fill();
      expect(f.destroyed).toEqual([f.made[0]!.sandboxId]);
      expect(pool.stats().ready).toBe(2);
    });

    it('and none is made of an image the engine does not have', async () => {
      const { pool, f, fill } = harness();
      f.imageIds['lemniscate/missing:1'] = null;
      pool.pin({ ...SPEC, image: 'lemniscate/missing:1' });
      await fill();
      expect(f.made).toEqual([]);
    });
  });

  describe('kinds learnt from requests', () => {
    it('are at most maxKeys: the least recently asked is dropped with its shells, pinned kinds stay', async () => {
      const { pool, f, fill } = harness({ maxKeys: 3 }, 1);
      pool.pin(SPEC);
      await fill();
      pool.take({ ...SPEC, cpus: 1 });
      await fill();
      pool.take({ ...SPEC, cpus: 3 });
      await fill();
      const oldest = f.made.find((s) => s.key === shellKey({ ...SPEC, cpus: 1 }) && pool.owns(s.sandboxId))!;
      expect(oldest).toBeDefined();
      pool.take({ ...SPEC, cpus: 4 });
      await fill();
      const keys = pool.stats().keys.map((k) => k.key);
      expect(keys).toHaveLength(3);
      expect(keys).toContain(shellKey(SPEC));
      expect(keys).not.toContain(shellKey({ ...SPEC, cpus: 1 }));
      expect(f.destroyed).toContain(oldest.sandboxId);
    });

    it('are dropped when nobody asked for them in idleKeyMs', async () => {
      const now = jest.spyOn(Date, 'now');
      try {
        now.mockReturnValue(5_000_000);
        const { pool, f, fill } = harness({}, 1);
        pool.pin(SPEC);
        pool.take({ ...SPEC, cpus: 1 });
        await fill();
        expect(pool.stats().keys).toHaveLength(2);
        now.mockReturnValue(5_000_000 + 30 * 60_000 + 1);
        await fill();
        expect(pool.stats().keys.map((k) => k.key)).toEqual([shellKey(SPEC)]);
        expect(f.destroyed).toHaveLength(1);
      } finally {
        now.mockRestore();
      }
    });
  });

  it('on close destroys every ready shell and the one being made, then takes and makes nothing', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const made: Shell[] = [];
    const destroyed: string[] = [];
    const pool = new WarmPool({
      size: 2,
      maxKeys: 8,
      idleKeyMs: 1e9,
      maxShellAgeMs: 1e9,
      memoryFloor: 0,
      capacity: () => ({ live: 0, max: 100 }),
      make: async (_spec, key, sandboxId) => {
        if (made.length === 1) await gate;
        const s: Shell = { sandboxId, containerId: sandboxId, dir: sandboxId, key, imageId: 'i', madeAt: Date.now() };
        made.push(s);
        return s;
      },
      destroy: async (s) => void destroyed.push(s.sandboxId),
      imageId: async () => 'i',
      memoryAvailable: async () => 1,
    });
    pool.pin(SPEC);
    pool.refill();
    while (made.length < 1) await new Promise((r) => setImmediate(r));
    const closing = pool.close();
    release();
    await closing;
    expect(made).toHaveLength(2);
    expect(destroyed.sort()).toEqual(made.map((s) => s.sandboxId).sort());
    expect(pool.take(SPEC)).toBeNull();
    pool.refill();
    await pool.settled();
    expect(made).toHaveLength(2);
  });

  it('logs a shell it could not make with a sentence and keeps refilling later', async () => {
    const { pool, f, fill } = harness();
    f.failMake = 1;
    pool.pin(SPEC);
    await fill();
    expect(f.logs).toEqual(['A warm sandbox could not be made (runc, lemniscate/sandbox:current): the engine refused the container']);
    await fill();
    expect(pool.stats().ready).toBe(2);
  });

  it('logs a shell it could not destroy and no longer owns it (the reaper will)', async () => {
    const { pool, f, fill } = harness();
    pool.pin(SPEC);
    await fill();
    f.failDestroy = true;
    f.dead.add(f.made[0]!.sandboxId);
    await fill();
    expect(f.logs.some((l) => l.startsWith(`A warm sandbox (${f.made[0]!.sandboxId}) could not be removed; the reaper will:`))).toBe(true);
    expect(pool.owns(f.made[0]!.sandboxId)).toBe(false);
  });

  it('counts the takes that found a shell and those that did not', async () => {
    const { pool, fill } = harness({}, 1);
    pool.pin(SPEC);
    await fill();
    pool.take(SPEC);
    pool.take(SPEC);
    pool.take({ ...SPEC, cpus: 1 });
    expect(pool.stats()).toMatchObject({ hits: 1, misses: 2 });
  });
});
