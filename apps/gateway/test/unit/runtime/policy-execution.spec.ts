import { parsePolicy } from '@lemniscate/policy';
import { ExecutionConfigError, resolveExecutionConfig } from '@lemniscate/session';
import { ceilingsOf } from '../../../src/runtime/policy-execution';

describe('ceilingsOf', () => {
  it('reads every execution key of the policy, written or defaulted, as a ceiling', () => {
    const ceilings = ceilingsOf(parsePolicy('version: 1\nexecution:\n  sessionMaxActions: 40\n'), 'the policy');
    expect(ceilings.values).toMatchObject({ sessionMaxActions: 40, sessionMaxMinutes: 45, subagentMaxDepth: 3, toolLoopDetection: true });
    expect(ceilings.allowToolLoopDetectionOff).toBe(false);
    expect(ceilings.values).not.toHaveProperty('allowToolLoopDetectionOff');
  });

  it('lets the environment win below the ceiling and takes the policy value where nothing else is set (L5)', () => {
    const resolved = resolveExecutionConfig({
      env: { LEMNISCATE_SESSION_MAX_ACTIONS: '7' },
      ceilings: ceilingsOf(parsePolicy('version: 1\nexecution:\n  sessionMaxMinutes: 10\n'), 'the policy'),
    });
    expect(resolved.config).toMatchObject({ sessionMaxActions: 7, sessionMaxMinutes: 10 });
    expect(resolved.origin.sessionMaxActions).toEqual({ layer: 'environment', variable: 'LEMNISCATE_SESSION_MAX_ACTIONS' });
    expect(resolved.origin.sessionMaxMinutes).toEqual({ layer: 'configuration', location: 'the policy' });
  });

  it('refuses an environment value above a defaulted ceiling (P1)', () => {
    expect(() => resolveExecutionConfig({ env: { LEMNISCATE_SESSION_MAX_ACTIONS: '151' }, ceilings: ceilingsOf(parsePolicy('version: 1\n'), 'the policy') })).toThrow(ExecutionConfigError);
  });
});
