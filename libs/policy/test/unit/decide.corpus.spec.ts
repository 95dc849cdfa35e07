import { corpus } from '../support/corpus';
import { decide } from '../../src/decide';
import { recommendedPolicy } from '../../src/schema';
import { initPolicyEngine } from '../../src/shell/parser';

beforeAll(async () => {
  await initPolicyEngine();
});

describe('shell commands under the recommended policy (fixture corpus)', () => {
  it('has at least 150 named cases with unique names', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(150);
    expect(new Set(corpus.map(([name]) => name)).size).toBe(corpus.length);
  });

  const cases = corpus.map(([name, command, effect, rule]) => ({ name, command, effect, rule }));
  it.each(cases)('$name: $command → $effect', ({ command, effect, rule }) => {
    const decision = decide({ name: 'Bash', arguments: { command } }, recommendedPolicy);
    expect(decision.effect).toBe(effect);
    if (rule !== undefined) expect(decision.rule).toBe(rule);
    expect(decision.reason.length).toBeGreaterThan(10);
    expect(decision.reason).toMatch(/\(.+\)\.?$/);
  });
});
