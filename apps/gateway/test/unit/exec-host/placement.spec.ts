import { environmentHome, place, type PlacementHost } from '../../../src/exec-host/placement';

const NOW = new Date('2026-12-04T12:00:00Z');
const FRESH = new Date(NOW.getTime() - 20_000);
const host = (id: string, over: Partial<PlacementHost> = {}): PlacementHost => ({
  id,
  state: 'active',
  runtimes: ['runc', 'runsc'],
  environments: [],
  capacity: 4,
  live: 0,
  lastHeartbeatAt: NOW,
  ...over,
});

describe('placement', () => {
  it('takes the least loaded by share of capacity, then by live sessions, then by id', () => {
    expect(place([host('b'), host('a')], { runtime: 'runc', freshSince: FRESH })).toEqual({ ok: true, hostId: 'a' });
    expect(place([host('a', { live: 1 }), host('b')], { runtime: 'runc', freshSince: FRESH })).toEqual({ ok: true, hostId: 'b' });
    // 2 of 8 is less loaded than 1 of 2.
    expect(place([host('a', { live: 1, capacity: 2 }), host('b', { live: 2, capacity: 8 })], { runtime: 'runc', freshSince: FRESH })).toEqual({ ok: true, hostId: 'b' });
    // Same share: fewer live sessions first.
    expect(place([host('a', { live: 2, capacity: 4 }), host('b', { live: 1, capacity: 2 })], { runtime: 'runc', freshSince: FRESH })).toEqual({ ok: true, hostId: 'b' });
  });

  it('is the same whatever order the hosts come in', () => {
    const hosts = ['e', 'c', 'a', 'd', 'b'].map((id, i) => host(id, { live: i % 2, capacity: 2 + (i % 3) }));
    const first = place(hosts, { runtime: 'runc', freshSince: FRESH });
    for (let k = 0; k < 20; k++) {
      const shuffled = [...hosts].sort(() => (((k * 7919) % 13) / 13 > 0.5 ? 1 : -1));
      expect(place(shuffled, { runtime: 'runc', freshSince: FRESH })).toEqual(first);
    }
  });

  // Every reason a host is passed over, alone: the placement refuses with that reason in its sentence.
  const passedOver: [string, Partial<PlacementHost>, RegExp][] = [
    ['drained', { state: 'draining' }, /a is drained/],
    ['lost', { state: 'lost' }, /a is lost \(no heartbeat\)/],
    ['silent', { lastHeartbeatAt: new Date(FRESH.getTime() - 1) }, /a has not sent a heartbeat since/],
    ['without the runtime', { runtimes: ['runc'] }, /a has no runsc runtime/],
    ['full', { live: 4 }, /a is full \(4 of 4 sessions\)/],
    ['over full', { live: 9 }, /a is full \(9 of 4 sessions\)/],
  ];
  it.each(passedOver)('passes over a host that is %s, and says so', (_label, over, sentence) => {
    const refused = place([host('a', over)], { runtime: 'runsc', freshSince: FRESH });
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.message).toMatch(/^No exec-host can take a new runsc sandbox now: /);
    expect(!refused.ok && refused.message).toMatch(sentence);
    // With one usable host beside it, that one is chosen.
    expect(place([host('a', over), host('z')], { runtime: 'runsc', freshSince: FRESH })).toEqual({ ok: true, hostId: 'z' });
  });

  it('never places on a host tried already for this sandbox', () => {
    expect(place([host('a'), host('b', { live: 3 })], { runtime: 'runc', freshSince: FRESH, exclude: ['a'] })).toEqual({ ok: true, hostId: 'b' });
    const refused = place([host('a')], { runtime: 'runc', freshSince: FRESH, exclude: ['a'] });
    expect(!refused.ok && refused.message).toMatch(/a refused this sandbox/);
  });

  it('with no host at all, says how to add one', () => {
    const refused = place([], { runtime: 'runc', freshSince: FRESH });
    expect(!refused.ok && refused.message).toMatch(/No exec-host has registered .* LEMNISCATE_GATEWAY_URL/);
  });

  describe('environments', () => {
    it('prefers hosts with the project’s environment ready over less loaded ones', () => {
      const hosts = [host('a'), host('b', { live: 3, environments: ['p1'] })];
      expect(place(hosts, { runtime: 'runc', freshSince: FRESH, environmentProjectId: 'p1' })).toEqual({ ok: true, hostId: 'b' });
      // A host a status named ready counts before its heartbeat says so.
      expect(place([host('a'), host('b', { live: 3 })], { runtime: 'runc', freshSince: FRESH, environmentProjectId: 'p1', environmentHosts: ['b'] })).toEqual({ ok: true, hostId: 'b' });
    });

    it('refuses rather than placing where the environment is not: full hosts that have it are named', () => {
      const full = place([host('a'), host('b', { live: 4, environments: ['p1'] })], { runtime: 'runc', freshSince: FRESH, environmentProjectId: 'p1' });
      expect(!full.ok && full.message).toMatch(/No exec-host with project p1's environment ready can take a new session now \(b: b is full \(4 of 4 sessions\)\)/);
      const nowhere = place([host('a')], { runtime: 'runc', freshSince: FRESH, environmentProjectId: 'p1' });
      expect(!nowhere.ok && nowhere.message).toMatch(/No exec-host has project p1's environment ready: prepare it/);
    });

    it('a project’s home is the same on every replica and at any load, and moves only when its host leaves', () => {
      const hosts = ['a', 'b', 'c', 'd'].map((id) => host(id));
      const homes = new Map<string, string | undefined>();
      for (let p = 0; p < 200; p++) homes.set(`project-${p}`, environmentHome(hosts, `project-${p}`, 'runc', FRESH));
      // Spread over the hosts (none takes nothing, none takes nearly everything).
      const counts = new Map<string, number>();
      for (const h of homes.values()) counts.set(h as string, (counts.get(h as string) ?? 0) + 1);
      expect([...counts.keys()].sort()).toEqual(['a', 'b', 'c', 'd']);
      for (const n of counts.values()) expect(n).toBeGreaterThan(20);
      // Load does not move it.
      const loaded = hosts.map((h, i) => ({ ...h, live: i }));
      for (const [p, h] of homes) expect(environmentHome(loaded, p, 'runc', FRESH)).toBe(h);
      // Removing one host moves only the projects that lived there.
      const without = hosts.filter((h) => h.id !== 'b');
      for (const [p, h] of homes) {
        const now = environmentHome(without, p, 'runc', FRESH);
        if (h !== 'b') expect(now).toBe(h);
        else expect(now).not.toBe('b');
      }
      // Nobody usable: no home.
      expect(environmentHome([host('a', { state: 'lost' })], 'p', 'runc', FRESH)).toBeUndefined();
    });
  });
});
