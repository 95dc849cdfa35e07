import { CreateSessionRequest, SESSION_MODE_LABELS, SessionMode, SessionView, refusesApprovals } from '../../../src/api';

const base = { projectId: 'p1', instruction: 'fix it' };

describe('session mode (L4)', () => {
  // Every combination of the new field and the two older ones, unknown values included.
  const modes = [undefined, ...SessionMode.options, 'bogus', 'HEADLESS'] as const;
  const flags = [undefined, true, false] as const;
  const cells = modes.flatMap((mode) => flags.flatMap((headless) => flags.map((waitForApprovals) => ({ mode, headless, waitForApprovals }))));

  /** What the request means, written from the rule as the documentation states it. */
  function expected(c: (typeof cells)[number]): { ok: true; mode: SessionMode } | { ok: false; field: string } {
    if (c.mode !== undefined && !(SessionMode.options as readonly string[]).includes(c.mode)) return { ok: false, field: 'mode' };
    if (c.mode === undefined) {
      if (c.waitForApprovals === true && c.headless !== true) return { ok: false, field: 'waitForApprovals' };
      return { ok: true, mode: c.headless ? (c.waitForApprovals ? 'headless_with_approvals' : 'headless') : 'interactive' };
    }
    const mode = c.mode as SessionMode;
    if (c.headless !== undefined && c.headless !== (mode !== 'interactive')) return { ok: false, field: 'headless' };
    if (c.waitForApprovals !== undefined && c.waitForApprovals !== (mode === 'headless_with_approvals')) return { ok: false, field: 'waitForApprovals' };
    return { ok: true, mode };
  }

  it(`reads or refuses each of the ${cells.length} combinations of mode, headless and waitForApprovals`, () => {
    let refused = 0;
    for (const c of cells) {
      const body: Record<string, unknown> = { ...base };
      for (const [k, v] of Object.entries(c)) if (v !== undefined) body[k] = v;
      const parsed = CreateSessionRequest.safeParse(body);
      const want = expected(c);
      if (want.ok) {
        expect({ c, ok: parsed.success }).toEqual({ c, ok: true });
        if (!parsed.success) continue;
        // One field reaches the gateway: the older pair is folded into it.
        expect({ c, mode: parsed.data.mode, keys: Object.keys(parsed.data).filter((k) => k === 'headless' || k === 'waitForApprovals') }).toEqual({ c, mode: want.mode, keys: [] });
      } else {
        refused++;
        expect({ c, ok: parsed.success }).toEqual({ c, ok: false });
        if (parsed.success) continue;
        const issue = parsed.error.issues.find((i) => i.path[0] === want.field);
        expect({ c, field: issue?.path[0] }).toEqual({ c, field: want.field });
        // A sentence a person reads: it names what fits, never a zod internal.
        expect(issue!.message).toMatch(want.field === 'mode' ? /^must be one of "interactive", "headless" or "headless_with_approvals"$/ : /(mode|headless)/);
      }
    }
    expect(refused).toBeGreaterThan(0);
    expect(cells.length).toBe(6 * 3 * 3);
  });

  it('an empty request is an interactive session', () => {
    expect(CreateSessionRequest.parse(base)).toMatchObject({ mode: 'interactive', includedUncommitted: false, agent: 'general' });
  });

  it('only "headless" refuses approvals at once; every mode has words for people', () => {
    expect(SessionMode.options.filter(refusesApprovals)).toEqual(['headless']);
    expect(Object.keys(SESSION_MODE_LABELS).sort()).toEqual([...SessionMode.options].sort());
  });

  it('a session view carries its mode', () => {
    const view = {
      id: 's1',
      projectId: 'p1',
      userId: 'u1',
      parentSessionId: null,
      depth: 0,
      agent: 'general',
      instruction: 'x',
      policyVersionId: null,
      status: 'running',
      stopReason: null,
      headless: false,
      actionsUsed: 0,
      extensionsUsed: 0,
      startedAt: new Date().toISOString(),
      endedAt: null,
      baseCommit: null,
      branch: null,
      includedUncommitted: false,
      fingerprintStart: null,
      fingerprintEnd: null,
      finalPatch: null,
      summary: null,
    };
    expect(SessionView.safeParse(view).success).toBe(false);
    for (const mode of SessionMode.options) expect(SessionView.parse({ ...view, mode }).mode).toBe(mode);
  });
});

describe('CreateSessionRequest', () => {
  it('has no parent: a request naming one is refused as an unknown field (subagents are started by the agent or a mention)', () => {
    const parsed = CreateSessionRequest.safeParse({ ...base, parentSessionId: '00000000-0000-4000-8000-000000000000' });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => ({ code: i.code, keys: 'keys' in i ? i.keys : undefined }))).toEqual([{ code: 'unrecognized_keys', keys: ['parentSessionId'] }]);
  });
});
