import { parsePolicy } from '@lemniscate/policy';
import { resolveExecutionConfig } from '@lemniscate/session';
import { stringify } from 'yaml';
import { writtenExecution } from './policy-execution';

describe('writtenExecution', () => {
  it('keeps only the keys the administrator wrote, not the defaults the parser fills', () => {
    const source = 'version: 1\nexecution:\n  sessionMaxActions: 40\n';
    expect(parsePolicy(source).execution.sessionMaxMinutes).toBe(45);
    expect(writtenExecution(source)).toEqual({ sessionMaxActions: 40 });
  });

  it('reads a policy published as JSON (stored as YAML text) the same way', () => {
    expect(writtenExecution(stringify({ version: 1, execution: { toolLoopThreshold: 5 } }))).toEqual({ toolLoopThreshold: 5 });
  });

  it('is undefined without an execution block or without a published policy', () => {
    expect(writtenExecution('version: 1\ncommands: { free: [ls] }\n')).toBeUndefined();
    expect(writtenExecution(undefined)).toBeUndefined();
    expect(writtenExecution('')).toBeUndefined();
  });

  it('lets the environment win when the policy does not set the key (L5)', () => {
    const resolved = resolveExecutionConfig({
      env: { LEMNISCATE_SESSION_MAX_ACTIONS: '7' },
      config: [{ location: 'the policy', values: writtenExecution('version: 1\nexecution:\n  sessionMaxMinutes: 10\n') }],
    });
    expect(resolved.config).toMatchObject({ sessionMaxActions: 7, sessionMaxMinutes: 10 });
    expect(resolved.origin.sessionMaxActions).toEqual({ layer: 'environment', variable: 'LEMNISCATE_SESSION_MAX_ACTIONS' });
  });
});
