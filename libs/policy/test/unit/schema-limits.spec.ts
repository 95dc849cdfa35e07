import { PolicyValidationError, parsePolicy } from '../../src/index';

describe('execution cascade limits (AG4)', () => {
  it.each(['subagentMaxDepth', 'subagentMaxPerSession', 'subagentMaxConcurrent'])('refuses zero for %s with the path named', (key) => {
    let error: unknown;
    try {
      parsePolicy({ version: 1, execution: { [key]: 0 } });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PolicyValidationError);
    expect((error as PolicyValidationError).issues[0]).toMatchObject({ path: `execution.${key}` });
    expect((error as PolicyValidationError).issues[0]!.message).toBe('must be at least 1');
  });

  it('accepts 1 (no nesting)', () => {
    expect(parsePolicy({ version: 1, execution: { subagentMaxDepth: 1 } }).execution.subagentMaxDepth).toBe(1);
  });
});
