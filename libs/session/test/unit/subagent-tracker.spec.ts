import fc from 'fast-check';
import { EXECUTION_DEFAULTS, resolveExecutionConfig } from '../../src/execution-config';
import { SubagentLimitError, SubagentTracker, SubagentTrackerError, type SubagentRefusalCode } from '../../src/subagent-tracker';

function counter(): () => string {
  let n = 0;
  return () => `child_${++n}`;
}

function refusal(run: () => unknown): SubagentLimitError {
  try {
    run();
  } catch (error) {
    if (error instanceof SubagentLimitError) return error;
    throw error;
  }
  throw new Error('expected a SubagentLimitError, but the delegation was accepted');
}

describe('SubagentTracker', () => {
  it('records depth itself: root 0, child 1, grandchild 2', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS, counter());
    expect(tracker.openSession('root')).toEqual({ sessionId: 'root', parentId: null, rootId: 'root', depth: 0, running: true });
    const child = tracker.spawn('root');
    expect(child).toEqual({ sessionId: 'child_1', parentId: 'root', rootId: 'root', depth: 1, running: true });
    expect(tracker.spawn(child.sessionId).depth).toBe(2);
  });

  it('refuses depth 4 with the default depth 3, telling the agent to do the work itself', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS, counter());
    tracker.openSession('root');
    let parent = 'root';
    for (let depth = 1; depth <= 3; depth++) parent = tracker.spawn(parent).sessionId;
    const error = refusal(() => tracker.spawn(parent));
    expect(error.code).toBe('subagent_max_depth');
    expect(error.message).toBe('Delegation refused: the maximum nesting depth of 3 subagents is reached. Do this work yourself.');
  });

  it('forbids nesting when subagentMaxDepth is 1', () => {
    const tracker = new SubagentTracker({ ...EXECUTION_DEFAULTS, subagentMaxDepth: 1 }, counter());
    tracker.openSession('root');
    const child = tracker.spawn('root');
    expect(refusal(() => tracker.spawn(child.sessionId)).message).toBe('Delegation refused: a subagent cannot delegate further here (subagentMaxDepth is 1). Do this work yourself.');
    // The root can still delegate side by side.
    expect(tracker.spawn('root').depth).toBe(1);
  });

  it('refuses the 201st subagent of a session, even when the earlier ones finished', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS, counter());
    tracker.openSession('root');
    for (let i = 0; i < 200; i++) tracker.finish(tracker.spawn('root').sessionId);
    const error = refusal(() => tracker.spawn('root'));
    expect(error.code).toBe('subagent_max_per_session');
    expect(error.message).toBe('Delegation refused: this session already started 200 subagents, the most allowed. Do this work yourself.');
  });

  it('counts the whole tree for the per-session limit, grandchildren included', () => {
    const tracker = new SubagentTracker({ ...EXECUTION_DEFAULTS, subagentMaxPerSession: 2 }, counter());
    tracker.openSession('root');
    const child = tracker.spawn('root');
    tracker.spawn(child.sessionId);
    expect(refusal(() => tracker.spawn(child.sessionId)).code).toBe('subagent_max_per_session');
  });

  it('refuses the 21st concurrent subagent and accepts again once one finishes', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS, counter());
    tracker.openSession('root');
    const running = Array.from({ length: 20 }, () => tracker.spawn('root'));
    const error = refusal(() => tracker.spawn('root'));
    expect(error.code).toBe('subagent_max_concurrent');
    expect(error.message).toContain('20 subagents are already running in this session');
    expect(error.message).toContain('Do this work yourself');
    tracker.finish(running[0]!.sessionId);
    expect(tracker.spawn('root').depth).toBe(1);
  });

  it('keeps separate counts for separate sessions', () => {
    const tracker = new SubagentTracker({ ...EXECUTION_DEFAULTS, subagentMaxConcurrent: 1 }, counter());
    tracker.openSession('a');
    tracker.openSession('b');
    tracker.spawn('a');
    expect(tracker.spawn('b').rootId).toBe('b');
  });

  it('takes its limits from the resolved configuration and refuses zero', () => {
    const { config } = resolveExecutionConfig({ env: { LEMNISCATE_SESSION_SUBAGENT_MAX_CONCURRENT: '1' } });
    const tracker = new SubagentTracker(config, counter());
    tracker.openSession('root');
    tracker.spawn('root');
    expect(refusal(() => tracker.spawn('root')).code).toBe('subagent_max_concurrent');
    expect(() => new SubagentTracker({ ...EXECUTION_DEFAULTS, subagentMaxDepth: 0 })).toThrow('subagentMaxDepth must be a whole number, 1 or more; got 0.');
  });

  it('generates unguessable session ids by default', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS);
    tracker.openSession('root');
    const a = tracker.spawn('root').sessionId;
    const b = tracker.spawn('root').sessionId;
    expect(a).toMatch(/^ses_[0-9a-f]{32}$/);
    expect(a).not.toBe(b);
  });

  it('refuses misuse with a sentence: unknown parent, finished parent, unknown child, double open, repeated id', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS, () => 'same');
    expect(() => tracker.spawn('ghost')).toThrow('Session ghost is not registered; a delegation needs a known parent.');
    tracker.openSession('root');
    expect(() => tracker.openSession('root')).toThrow(SubagentTrackerError);
    const child = tracker.spawn('root');
    expect(() => tracker.spawn('root')).toThrow('The id generator returned same twice.');
    tracker.finish(child.sessionId);
    expect(() => tracker.spawn(child.sessionId)).toThrow('Session same has finished; it cannot delegate any more.');
    expect(() => tracker.finish('root')).toThrow('root is not a subagent this tracker started.');
    expect(() => tracker.finish('ghost')).toThrow(SubagentTrackerError);
  });

  it('treats a second finish as already done', () => {
    const tracker = new SubagentTracker({ ...EXECUTION_DEFAULTS, subagentMaxConcurrent: 1 }, counter());
    tracker.openSession('root');
    const child = tracker.spawn('root');
    tracker.finish(child.sessionId);
    tracker.finish(child.sessionId);
    tracker.spawn('root');
    // Had the second finish counted, a second concurrent child would slip through.
    expect(refusal(() => tracker.spawn('root')).code).toBe('subagent_max_concurrent');
  });

  it('lists running descendants deepest first, for interruption', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS, counter());
    tracker.openSession('root');
    const a = tracker.spawn('root');
    const b = tracker.spawn(a.sessionId);
    const c = tracker.spawn('root');
    tracker.finish(c.sessionId);
    expect(tracker.runningDescendants('root').map((r) => r.sessionId)).toEqual([b.sessionId, a.sessionId]);
    expect(tracker.runningDescendants(b.sessionId)).toEqual([]);
  });

  it('forgets a closed tree entirely', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS, counter());
    tracker.openSession('root');
    const child = tracker.spawn('root');
    expect(() => tracker.closeSession(child.sessionId)).toThrow('is not a session registered with openSession');
    tracker.closeSession('root');
    expect(tracker.get('root')).toBeUndefined();
    expect(tracker.get(child.sessionId)).toBeUndefined();
    expect(() => tracker.spawn('root')).toThrow(SubagentTrackerError);
    expect(tracker.openSession('root').depth).toBe(0);
  });

  it('returns copies, so a caller cannot rewrite a recorded depth', () => {
    const tracker = new SubagentTracker(EXECUTION_DEFAULTS, counter());
    tracker.openSession('root');
    const child = tracker.spawn('root');
    child.depth = 0;
    tracker.get(child.sessionId)!.depth = 0;
    expect(tracker.spawn(child.sessionId).depth).toBe(2);
  });

  it('never exceeds any limit, whatever the sequence of spawns and finishes (model check)', () => {
    type Step = { kind: 'spawn'; parent: number } | { kind: 'finish'; child: number };
    const step: fc.Arbitrary<Step> = fc.oneof(fc.record({ kind: fc.constant('spawn' as const), parent: fc.nat(30) }), fc.record({ kind: fc.constant('finish' as const), child: fc.nat(30) }));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 5 }), fc.array(step, { maxLength: 60 }), (maxDepth, maxPer, maxConc, steps) => {
        const tracker = new SubagentTracker({ subagentMaxDepth: maxDepth, subagentMaxPerSession: maxPer, subagentMaxConcurrent: maxConc }, counter());
        const ids = [tracker.openSession('root').sessionId];
        const depth = new Map([['root', 0]]);
        const running = new Set<string>();
        let started = 0;
        for (const s of steps) {
          if (s.kind === 'finish') {
            const id = ids[1 + (s.child % Math.max(1, ids.length - 1))];
            if (id && id !== 'root') {
              tracker.finish(id);
              running.delete(id);
            }
            continue;
          }
          const parent = ids[s.parent % ids.length]!;
          if (parent !== 'root' && !running.has(parent)) continue;
          const expected: SubagentRefusalCode | null =
            depth.get(parent)! + 1 > maxDepth ? 'subagent_max_depth' : started >= maxPer ? 'subagent_max_per_session' : running.size >= maxConc ? 'subagent_max_concurrent' : null;
          try {
            const child = tracker.spawn(parent);
            if (expected !== null) return false;
            ids.push(child.sessionId);
            depth.set(child.sessionId, child.depth);
            running.add(child.sessionId);
            started++;
          } catch (error) {
            if (!(error instanceof SubagentLimitError) || error.code !== expected) return false;
          }
        }
        return started <= maxPer && running.size <= maxConc && [...depth.values()].every((d) => d <= maxDepth);
      }),
    );
  });
});
