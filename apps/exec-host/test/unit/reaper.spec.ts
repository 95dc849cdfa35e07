import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../src/config';
import { LABEL_SANDBOX, type ContainerRef, type SandboxDriver } from '../../src/driver/sandbox.driver';
import { Reaper, type ReapedSandboxes } from '../../src/reaper';

/** The engine's listing, held back until the test lets it answer. */
function delayedEngine() {
  let answer!: (list: ContainerRef[]) => void;
  const listed = new Promise<ContainerRef[]>((resolve) => (answer = resolve));
  let asked!: () => void;
  const askedOnce = new Promise<void>((resolve) => (asked = resolve));
  const removed: string[] = [];
  const driver = {
    listManaged: () => {
      asked();
      return listed;
    },
    status: () => Promise.resolve({ running: true, exitCode: null, oomKilled: false, stoppedByHost: false }),
    remove: (id: string) => {
      removed.push(id);
      return Promise.resolve();
    },
  } as unknown as SandboxDriver;
  return { driver, answer, askedOnce, removed };
}

type Phase = 'creating' | 'live' | 'destroying' | 'gone';

/** The sandbox table as the reaper sees it, each sandbox moved through its phases by the test. */
function table(stateDir: string, phases: Map<string, Phase>) {
  const cleaned: string[] = [];
  const lostChecks: string[] = [];
  const sandboxes: ReapedSandboxes = {
    sandboxesDir: path.join(stateDir, 'sandboxes'),
    expired: () => [],
    destroy: (id: string) => Promise.resolve({ sandboxId: id, destroyed: false }),
    owns: (id: string) => ['creating', 'live', 'destroying'].includes(phases.get(id) ?? 'gone'),
    markLostIfStopped: (id: string) => {
      lostChecks.push(id);
      return Promise.resolve(false);
    },
    cleanup: (_container: string | null, dir: string) => {
      cleaned.push(path.basename(dir));
      return Promise.resolve();
    },
  };
  return { sandboxes, cleaned, lostChecks };
}

const container = (sandbox: string, running = true): ContainerRef => ({ id: `c-${sandbox}`, name: `lemniscate-${sandbox}`, labels: { [LABEL_SANDBOX]: sandbox }, running });

describe('Reaper ownership (decided from the state read after the engine answers)', () => {
  let stateDir: string;
  beforeEach(() => {
    stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-reaper-'));
    fs.mkdirSync(path.join(stateDir, 'sandboxes'));
  });
  afterEach(() => fs.rmSync(stateDir, { recursive: true, force: true }));

  // Every way a sandbox can move while the listing is pending: from each owned phase to each phase.
  const moves: [Phase, Phase, boolean][] = [];
  for (const from of ['creating', 'live', 'destroying'] as Phase[]) {
    for (const to of ['creating', 'live', 'destroying', 'gone'] as Phase[]) {
      if (from === 'live' && to === 'creating') continue;
      if (from === 'destroying' && (to === 'creating' || to === 'live')) continue;
      moves.push([from, to, to !== 'gone']);
    }
  }

  it.each(moves)('a sandbox %s when the listing starts and %s when it answers: kept = %s', async (from, to, kept) => {
    const engine = delayedEngine();
    const phases = new Map<string, Phase>([
      ['sbx-moving', from],
      ['sbx-steady', 'live'],
    ]);
    for (const id of phases.keys()) fs.mkdirSync(path.join(stateDir, 'sandboxes', id));
    fs.mkdirSync(path.join(stateDir, 'sandboxes', 'sbx-crash-leftover'));
    const t = table(stateDir, phases);
    const reaper = new Reaper(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: 'a-long-enough-random-token', LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir }), engine.driver, t.sandboxes);
    const pass = reaper.reap();
    await engine.askedOnce;
    phases.set('sbx-moving', to);
    engine.answer([container('sbx-moving'), container('sbx-steady'), container('sbx-crash-leftover')]);
    const report = await pass;
    const expectedRemoved = kept ? ['c-sbx-crash-leftover'] : ['c-sbx-moving', 'c-sbx-crash-leftover'];
    expect(engine.removed.sort()).toEqual(expectedRemoved.sort());
    expect(t.cleaned.sort()).toEqual((kept ? ['sbx-crash-leftover'] : ['sbx-crash-leftover', 'sbx-moving']).sort());
    expect(report).toMatchObject({ containers: expectedRemoved.length, directories: kept ? 1 : 2 });
  });

  it('asks whether a stopped container of an owned sandbox is really stopped before calling it lost', async () => {
    const engine = delayedEngine();
    const phases = new Map<string, Phase>([['sbx-starting', 'creating']]);
    const t = table(stateDir, phases);
    const reaper = new Reaper(loadConfig({ LEMNISCATE_EXEC_HOST_TOKEN: 'a-long-enough-random-token', LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir }), engine.driver, t.sandboxes);
    const pass = reaper.reap();
    await engine.askedOnce;
    // Listed between "created" and "started"; registered by the time the engine answers.
    phases.set('sbx-starting', 'live');
    engine.answer([container('sbx-starting', false)]);
    const report = await pass;
    expect(engine.removed).toEqual([]);
    expect(t.lostChecks).toEqual(['sbx-starting']);
    expect(report.lost).toBe(0);
  });
});
