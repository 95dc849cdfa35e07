import fc from 'fast-check';
import { EXTENSION_ACTIONS, EXTENSION_MINUTES, ExtensionRefusedError, SessionBudget, type Clock } from '../../src/budget';
import { EXECUTION_DEFAULTS, resolveExecutionConfig } from '../../src/execution-config';

class FakeClock implements Clock {
  constructor(private ms = 1_000_000) {}
  now(): number {
    return this.ms;
  }
  advanceMinutes(minutes: number): void {
    this.ms += minutes * 60_000;
  }
}

/** Runs actions until the budget says stop; returns how many ran. */
function runUntilLimit(budget: SessionBudget, attempts: number): number {
  let ran = 0;
  for (let i = 0; i < attempts; i++) {
    if (budget.check() !== 'ok') break;
    budget.recordToolCall();
    ran++;
  }
  return ran;
}

describe('SessionBudget (main session)', () => {
  it('lets 150 actions run by default and stops the 151st', () => {
    const budget = SessionBudget.forMainSession(EXECUTION_DEFAULTS, new FakeClock());
    expect(runUntilLimit(budget, 200)).toBe(150);
    expect(budget.check()).toBe('limit_actions');
    expect(budget.snapshot()).toMatchObject({ role: 'main', actionsUsed: 150, actionsLimit: 150, extensionsUsed: 0, extensionsAllowed: 5 });
  });

  it('counts compactions as actions', () => {
    const budget = new SessionBudget({ role: 'main', maxActions: 3, maxMinutes: 45, maxExtensions: 5, clock: new FakeClock() });
    budget.recordToolCall();
    budget.recordCompaction();
    expect(budget.check()).toBe('ok');
    budget.recordCompaction();
    expect(budget.check()).toBe('limit_actions');
    expect(budget.snapshot()).toMatchObject({ actionsUsed: 3, toolCalls: 1, compactions: 2 });
  });

  it('stops at the duration limit measured by its clock', () => {
    const clock = new FakeClock();
    const budget = SessionBudget.forMainSession(EXECUTION_DEFAULTS, clock);
    clock.advanceMinutes(44.99);
    expect(budget.check()).toBe('ok');
    clock.advanceMinutes(0.01);
    expect(budget.check()).toBe('limit_minutes');
    expect(budget.minutesUsed).toBeCloseTo(45);
  });

  it('reports the action limit first when both are exhausted', () => {
    const clock = new FakeClock();
    const budget = new SessionBudget({ role: 'main', maxActions: 1, maxMinutes: 1, maxExtensions: 0, clock });
    budget.recordToolCall();
    clock.advanceMinutes(2);
    expect(budget.check()).toBe('limit_actions');
  });

  it('does not count time backwards when the clock steps back', () => {
    const clock = new FakeClock();
    const budget = SessionBudget.forMainSession(EXECUTION_DEFAULTS, clock);
    clock.advanceMinutes(-10);
    expect(budget.minutesUsed).toBe(0);
  });

  it('gives 50 more actions per action extension', () => {
    const budget = SessionBudget.forMainSession(EXECUTION_DEFAULTS, new FakeClock());
    runUntilLimit(budget, 200);
    const grant = budget.grantExtension('actions');
    expect(grant).toEqual({ kind: 'actions', amount: EXTENSION_ACTIONS, extensionsUsed: 1, actionsLimit: 200, minutesLimit: 45 });
    expect(runUntilLimit(budget, 200)).toBe(50);
    expect(budget.check()).toBe('limit_actions');
  });

  it('gives 15 more minutes per time extension', () => {
    const clock = new FakeClock();
    const budget = SessionBudget.forMainSession(EXECUTION_DEFAULTS, clock);
    clock.advanceMinutes(45);
    expect(budget.check()).toBe('limit_minutes');
    expect(budget.grantExtension('minutes')).toMatchObject({ amount: EXTENSION_MINUTES, minutesLimit: 60 });
    expect(budget.check()).toBe('ok');
    clock.advanceMinutes(15);
    expect(budget.check()).toBe('limit_minutes');
  });

  it('refuses the 6th extension with a sentence', () => {
    const budget = SessionBudget.forMainSession(EXECUTION_DEFAULTS, new FakeClock());
    for (let i = 0; i < 5; i++) budget.grantExtension(i % 2 ? 'minutes' : 'actions');
    expect(() => budget.grantExtension('actions')).toThrow(ExtensionRefusedError);
    expect(() => budget.grantExtension('minutes')).toThrow('This session already had its 5 extensions, the most allowed; it ends at its limit with a summary.');
    // A refusal changes nothing.
    expect(budget.snapshot()).toMatchObject({ extensionsUsed: 5, actionsLimit: 300, minutesLimit: 75 });
  });

  it('follows sessionMaxExtensions from the configuration, 0 and 1 included', () => {
    const none = SessionBudget.forMainSession(resolveExecutionConfig({ env: { LEMNISCATE_SESSION_MAX_EXTENSIONS: '0' } }).config);
    expect(() => none.grantExtension('actions')).toThrow('Extensions are not allowed for this session (sessionMaxExtensions is 0)');
    const one = SessionBudget.forMainSession({ ...EXECUTION_DEFAULTS, sessionMaxExtensions: 1 });
    one.grantExtension('minutes');
    expect(() => one.grantExtension('minutes')).toThrow('already had its 1 extension, the most allowed');
  });

  it('refuses impossible limits at construction', () => {
    expect(() => new SessionBudget({ role: 'main', maxActions: 0, maxMinutes: 45, maxExtensions: 5 })).toThrow('maxActions must be a whole number, 1 or more; got 0.');
    expect(() => new SessionBudget({ role: 'main', maxActions: 10, maxMinutes: 1.5, maxExtensions: 5 })).toThrow(RangeError);
    expect(() => new SessionBudget({ role: 'main', maxActions: 10, maxMinutes: 45, maxExtensions: -1 })).toThrow('maxExtensions must be a whole number');
  });

  it('never lets more actions run than the limit plus the granted extensions', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 300 }), fc.array(fc.boolean(), { maxLength: 8 }), (limit, wantExtensions) => {
        const budget = new SessionBudget({ role: 'main', maxActions: limit, maxMinutes: 45, maxExtensions: 5, clock: new FakeClock() });
        let ran = runUntilLimit(budget, 10_000);
        let granted = 0;
        for (const want of wantExtensions) {
          if (!want) continue;
          try {
            budget.grantExtension('actions');
            granted++;
          } catch (error) {
            if (!(error instanceof ExtensionRefusedError)) throw error;
          }
          ran += runUntilLimit(budget, 10_000);
        }
        return granted <= 5 && ran === limit + granted * EXTENSION_ACTIONS;
      }),
    );
  });
});

describe('SessionBudget (child session)', () => {
  it('has no action cap unless its frontmatter sets one', () => {
    const child = SessionBudget.forChild(EXECUTION_DEFAULTS, undefined, new FakeClock());
    expect(runUntilLimit(child, 1000)).toBe(1000);
    expect(child.snapshot().actionsLimit).toBeNull();
    const capped = SessionBudget.forChild(EXECUTION_DEFAULTS, 25, new FakeClock());
    expect(runUntilLimit(capped, 1000)).toBe(25);
    expect(capped.check()).toBe('limit_actions');
  });

  it('gets its own full duration, whatever the parent used', () => {
    const clock = new FakeClock();
    const parent = SessionBudget.forMainSession(EXECUTION_DEFAULTS, clock);
    clock.advanceMinutes(40);
    const child = SessionBudget.forChild(EXECUTION_DEFAULTS, undefined, clock);
    clock.advanceMinutes(10);
    expect(parent.check()).toBe('limit_minutes');
    expect(child.check()).toBe('ok');
    clock.advanceMinutes(35);
    expect(child.check()).toBe('limit_minutes');
  });

  it('is never extended, and says why', () => {
    const child = SessionBudget.forChild(EXECUTION_DEFAULTS, 10, new FakeClock());
    expect(() => child.grantExtension('actions')).toThrow('A subagent cannot be extended: there is nobody in a child session to approve it');
    expect(child.snapshot()).toMatchObject({ extensionsAllowed: 0, extensionsUsed: 0, actionsLimit: 10 });
  });
});
