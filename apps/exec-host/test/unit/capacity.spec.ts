import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  capacityRefusal,
  defaultMaxSandboxes,
  FALLBACK_MAX_SANDBOXES,
  IDLE_SANDBOX_MEMORY_BYTES,
  IDLE_SANDBOX_PROCESS_IDS,
  readHostResources,
  type CapacityLimits,
  type HostResources,
} from '../../src/capacity';
import { loadConfig } from '../../src/config';
import type { SandboxDriver } from '../../src/driver/sandbox.driver';
import { ExecHostError } from '../../src/errors';
import { SandboxService } from '../../src/sandbox.service';

const GiB = 1024 ** 3;
const token = 'a-long-enough-random-token';

/** A /proc of our own: meminfo, loadavg, pid_max and threads-max. */
function fakeProc(p: { totalKiB: number; availableKiB: number; pidMax: number; threadsMax: number; tasks: number }): string {
  const dir = mkdtempSync(join(tmpdir(), 'lemni-proc-'));
  mkdirSync(join(dir, 'sys/kernel'), { recursive: true });
  writeFileSync(join(dir, 'meminfo'), `MemTotal:       ${p.totalKiB} kB\nMemFree:        ${p.availableKiB - 1000} kB\nMemAvailable:   ${p.availableKiB} kB\nBuffers:           57252 kB\n`);
  writeFileSync(join(dir, 'loadavg'), `0.52 0.61 0.70 3/${p.tasks} 123456\n`);
  writeFileSync(join(dir, 'sys/kernel/pid_max'), `${p.pidMax}\n`);
  writeFileSync(join(dir, 'sys/kernel/threads-max'), `${p.threadsMax}\n`);
  return dir;
}

const host = (over: Partial<HostResources> = {}): HostResources => ({
  memTotalBytes: 24 * GiB,
  memAvailableBytes: 20 * GiB,
  processIdLimit: 4_194_304,
  processIdsInUse: 500,
  ...over,
});

const limits = (over: Partial<CapacityLimits> = {}): CapacityLimits => ({ maxSandboxes: 10, maxSandboxesFrom: 'setting', memoryFloorPercent: 10, procRoot: '/proc', ...over });

describe('readHostResources', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('reads memory from meminfo, the process-id limit as the lower of pid_max and threads-max, and the tasks from loadavg', () => {
    const dir = fakeProc({ totalKiB: 24_683_748, availableKiB: 24_117_252, pidMax: 32_768, threadsMax: 192_735, tasks: 1234 });
    dirs.push(dir);
    expect(readHostResources(dir)).toEqual({ memTotalBytes: 24_683_748 * 1024, memAvailableBytes: 24_117_252 * 1024, processIdLimit: 32_768, processIdsInUse: 1234 });
    const fewThreads = fakeProc({ totalKiB: 1_000_000, availableKiB: 500_000, pidMax: 4_194_304, threadsMax: 60_000, tasks: 10 });
    dirs.push(fewThreads);
    expect(readHostResources(fewThreads)?.processIdLimit).toBe(60_000);
  });

  it('answers null where /proc cannot be read or is not what it should be', () => {
    expect(readHostResources(join(tmpdir(), 'lemni-no-such-proc'))).toBeNull();
    const dir = fakeProc({ totalKiB: 1_000_000, availableKiB: 500_000, pidMax: 32_768, threadsMax: 60_000, tasks: 10 });
    dirs.push(dir);
    writeFileSync(join(dir, 'loadavg'), 'garbage\n');
    expect(readHostResources(dir)).toBeNull();
  });

  it('reads this machine', () => {
    const real = readHostResources();
    expect(real).not.toBeNull();
    expect(real!.memAvailableBytes).toBeLessThanOrEqual(real!.memTotalBytes);
    expect(real!.processIdsInUse).toBeGreaterThan(0);
  });
});

describe('defaultMaxSandboxes', () => {
  it('is what the memory above the floor holds when process ids are plentiful', () => {
    const h = host({ memTotalBytes: 24 * GiB });
    expect(defaultMaxSandboxes(h, 10)).toEqual({ max: Math.floor((24 * GiB * 0.9) / IDLE_SANDBOX_MEMORY_BYTES), from: 'memory' });
    expect(defaultMaxSandboxes(h, 0).max).toBe(Math.floor((24 * GiB) / IDLE_SANDBOX_MEMORY_BYTES));
  });

  it('is what the process ids outside the reserve hold when they are fewer (kernel.pid_max 32768)', () => {
    expect(defaultMaxSandboxes(host({ processIdLimit: 32_768 }), 10)).toEqual({ max: Math.floor((32_768 * 0.9) / IDLE_SANDBOX_PROCESS_IDS), from: 'process ids' });
  });

  it('is at least one, at most what a heartbeat may announce, and the former 50 where the host cannot be read', () => {
    expect(defaultMaxSandboxes(host({ memTotalBytes: 16 * 1024 * 1024 }), 10).max).toBe(1);
    expect(defaultMaxSandboxes(host({ memTotalBytes: 1024 ** 5, processIdLimit: 1e9 }), 10).max).toBe(100_000);
    expect(defaultMaxSandboxes(null, 10)).toEqual({ max: FALLBACK_MAX_SANDBOXES, from: 'fallback' });
  });
});

describe('capacityRefusal', () => {
  it('lets a sandbox through below the cap, above the memory floor and with process ids free', () => {
    expect(capacityRefusal(9, limits(), host())).toBeNull();
  });

  it('refuses at the cap, saying where the cap comes from', () => {
    expect(capacityRefusal(10, limits(), host())).toBe('This exec-host already runs its maximum of 10 sandboxes (LEMNISCATE_EXEC_HOST_MAX_SANDBOXES).');
    expect(capacityRefusal(307, limits({ maxSandboxes: 307, maxSandboxesFrom: 'process ids' }), host())).toBe(
      "This exec-host already runs its maximum of 307 sandboxes (computed at start from this host's process ids).",
    );
    // The cap holds even when the host cannot be read.
    expect(capacityRefusal(10, limits(), null)).toMatch(/maximum of 10 sandboxes/);
    expect(capacityRefusal(3, limits(), null)).toBeNull();
  });

  it('refuses below the memory floor with the numbers, and never with a floor of 0', () => {
    const low = host({ memTotalBytes: 24 * GiB, memAvailableBytes: 2 * GiB });
    expect(capacityRefusal(4, limits(), low)).toBe('This exec-host takes no new sandbox while its host has less than 10 % of its memory available (2.0 GiB of 24.0 GiB, 4 sandboxes running here).');
    expect(capacityRefusal(1, limits(), low)).toMatch(/\(2\.0 GiB of 24\.0 GiB, 1 sandbox running here\)\.$/);
    expect(capacityRefusal(1, limits({ maxSandboxes: 1 }), low)).toBe('This exec-host already runs its maximum of 1 sandbox (LEMNISCATE_EXEC_HOST_MAX_SANDBOXES).');
    expect(capacityRefusal(4, limits({ memoryFloorPercent: 0 }), low)).toBeNull();
    expect(capacityRefusal(4, limits(), host({ memAvailableBytes: 2.5 * GiB }))).toBeNull();
  });

  it('refuses when 90 % of the process ids are taken', () => {
    expect(capacityRefusal(2, limits(), host({ processIdLimit: 32_768, processIdsInUse: 29_500 }))).toBe(
      'This exec-host takes no new sandbox while its host uses 29500 of its 32768 process ids (over 90 %, 2 sandboxes running here); kernel.pid_max can be raised.',
    );
    expect(capacityRefusal(2, limits(), host({ processIdLimit: 32_768, processIdsInUse: 29_000 }))).toBeNull();
  });
});

describe('loadConfig: the cap and the memory floor', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('computes the cap from the host unless LEMNISCATE_EXEC_HOST_MAX_SANDBOXES sets it', () => {
    const proc = fakeProc({ totalKiB: 24 * 1024 * 1024, availableKiB: 23 * 1024 * 1024, pidMax: 32_768, threadsMax: 192_735, tasks: 300 });
    dirs.push(proc);
    const computed = loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }, { procRoot: proc });
    expect({ max: computed.maxSandboxes, from: computed.maxSandboxesFrom, floor: computed.memoryFloorPercent, procRoot: computed.procRoot }).toEqual({
      max: Math.floor((32_768 * 0.9) / IDLE_SANDBOX_PROCESS_IDS),
      from: 'process ids',
      floor: 10,
      procRoot: proc,
    });
    const bigPids = fakeProc({ totalKiB: 24 * 1024 * 1024, availableKiB: 23 * 1024 * 1024, pidMax: 4_194_304, threadsMax: 192_735 * 10, tasks: 300 });
    dirs.push(bigPids);
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }, { procRoot: bigPids })).toMatchObject({
      maxSandboxes: Math.floor((24 * GiB * 0.9) / IDLE_SANDBOX_MEMORY_BYTES),
      maxSandboxesFrom: 'memory',
    });
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: '' }, { procRoot: bigPids }).maxSandboxesFrom).toBe('memory');
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: '7' }, { procRoot: proc })).toMatchObject({ maxSandboxes: 7, maxSandboxesFrom: 'setting' });
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }, { procRoot: join(tmpdir(), 'lemni-no-such-proc') })).toMatchObject({ maxSandboxes: 50, maxSandboxesFrom: 'fallback' });
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }).procRoot).toBe('/proc');
  });

  it('refuses a cap that is not a whole number between 1 and 100000, in one sentence', () => {
    for (const bad of ['0', '-1', '1.5', 'x', '100001', ' 5']) {
      expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: bad })).toThrow(
        `LEMNISCATE_EXEC_HOST_MAX_SANDBOXES must be a whole number between 1 and 100000, or unset to compute it from this host, not "${bad}".`,
      );
    }
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: '100000' }).maxSandboxes).toBe(100_000);
  });

  it('reads the memory floor, 0 to 90 %, 10 by default', () => {
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token }).memoryFloorPercent).toBe(10);
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_MEMORY_FLOOR_PERCENT: '0' }).memoryFloorPercent).toBe(0);
    expect(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_MEMORY_FLOOR_PERCENT: '25' }).memoryFloorPercent).toBe(25);
    for (const bad of ['91', '-1', '10.5', 'ten', '']) {
      expect(() => loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_MEMORY_FLOOR_PERCENT: bad })).toThrow(
        `LEMNISCATE_EXEC_HOST_MEMORY_FLOOR_PERCENT must be a whole percentage between 0 (no floor) and 90, not "${bad}".`,
      );
    }
  });
});

describe('SandboxService.create: the capacity check comes before anything is prepared', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  // Any call on the driver would throw: a refusal must come first.
  const driver = new Proxy({} as SandboxDriver, {
    get: (_t, name) => () => {
      throw new Error(`the driver was called (${String(name)}) before the refusal`);
    },
  });
  const request = { sessionId: 'sess-capacity', repository: { source: '/nonexistent' }, runtime: 'runc' as const };

  async function refusalOf(procRoot: string, env: Record<string, string> = {}): Promise<ExecHostError> {
    const stateDir = mkdtempSync(join(tmpdir(), 'lemni-capacity-state-'));
    dirs.push(stateDir);
    const service = new SandboxService(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir, ...env }, { procRoot }), driver);
    const e = await service.create(request).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(ExecHostError);
    return e as ExecHostError;
  }

  it('refuses with sandbox_limit_reached when the host has less memory available than the floor', async () => {
    const proc = fakeProc({ totalKiB: 24 * 1024 * 1024, availableKiB: 1024 * 1024, pidMax: 4_194_304, threadsMax: 1_000_000, tasks: 300 });
    dirs.push(proc);
    const e = await refusalOf(proc);
    expect({ code: e.code, message: e.message }).toEqual({
      code: 'sandbox_limit_reached',
      message: 'This exec-host takes no new sandbox while its host has less than 10 % of its memory available (1.0 GiB of 24.0 GiB, 0 sandboxes running here).',
    });
  });

  it('refuses with sandbox_limit_reached when the process ids are nearly all taken', async () => {
    const proc = fakeProc({ totalKiB: 24 * 1024 * 1024, availableKiB: 20 * 1024 * 1024, pidMax: 32_768, threadsMax: 1_000_000, tasks: 32_000 });
    dirs.push(proc);
    const e = await refusalOf(proc, { LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: '5' });
    expect(e.code).toBe('sandbox_limit_reached');
    expect(e.message).toMatch(/^This exec-host takes no new sandbox while its host uses 32000 of its 32768 process ids/);
  });
});
