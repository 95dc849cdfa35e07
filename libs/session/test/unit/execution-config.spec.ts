import fc from 'fast-check';
import {
  EXECUTION_DEFAULTS,
  EXECUTION_ENV,
  EXECUTION_KEYS,
  ExecutionConfigError,
  checkLayerCeilings,
  readExecutionMapping,
  resolveExecutionConfig,
  type ExecutionCeilings,
  type ExecutionKey,
  type ResolveExecutionInput,
} from '../../src/execution-config';

function refusal(run: () => unknown): ExecutionConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ExecutionConfigError) return error;
    throw error;
  }
  throw new Error('expected an ExecutionConfigError, but nothing was thrown');
}

describe('resolveExecutionConfig', () => {
  it('starts from the documented defaults', () => {
    const { config, origin, warnings } = resolveExecutionConfig();
    expect(config).toEqual({
      sessionMaxActions: 150,
      sessionMaxMinutes: 45,
      sessionMaxExtensions: 5,
      toolLoopThreshold: 3,
      toolLoopDetection: true,
      subagentMaxDepth: 3,
      subagentMaxPerSession: 200,
      subagentMaxConcurrent: 20,
      contextTokenBudget: 100_000,
    });
    expect(Object.values(origin).every((o) => o.layer === 'default')).toBe(true);
    expect(warnings).toEqual([]);
  });

  it('applies defaults < environment < configuration < agent, key by key', () => {
    const { config, origin } = resolveExecutionConfig({
      env: { LEMNISCATE_SESSION_MAX_ACTIONS: '10', LEMNISCATE_SESSION_MAX_MINUTES: '20', LEMNISCATE_SESSION_MAX_EXTENSIONS: '1' },
      config: [{ location: '~/.lemniscate/config.yaml', values: { sessionMaxActions: 30, sessionMaxMinutes: 40 } }],
      agent: { location: 'agent "revue"', values: { sessionMaxActions: 25 } },
    });
    expect(config.sessionMaxActions).toBe(25);
    expect(config.sessionMaxMinutes).toBe(40);
    expect(config.sessionMaxExtensions).toBe(1);
    expect(config.toolLoopThreshold).toBe(3);
    expect(origin.sessionMaxActions).toEqual({ layer: 'agent', location: 'agent "revue"' });
    expect(origin.sessionMaxMinutes).toEqual({ layer: 'configuration', location: '~/.lemniscate/config.yaml' });
    expect(origin.sessionMaxExtensions).toEqual({ layer: 'environment', variable: 'LEMNISCATE_SESSION_MAX_EXTENSIONS' });
    expect(origin.toolLoopThreshold).toEqual({ layer: 'default' });
  });

  it('applies configuration layers in the order given, the later winning', () => {
    const { config, origin } = resolveExecutionConfig({
      config: [
        { location: 'policy v3', values: { sessionMaxActions: 80, subagentMaxDepth: 2 } },
        { location: '~/.lemniscate/config.yaml', values: { sessionMaxActions: 60 } },
      ],
    });
    expect(config.sessionMaxActions).toBe(60);
    expect(config.subagentMaxDepth).toBe(2);
    expect(origin.subagentMaxDepth).toEqual({ layer: 'configuration', location: 'policy v3' });
  });

  it('reads every key from its LEMNISCATE_SESSION_* variable', () => {
    expect(EXECUTION_ENV).toEqual({
      sessionMaxActions: 'LEMNISCATE_SESSION_MAX_ACTIONS',
      sessionMaxMinutes: 'LEMNISCATE_SESSION_MAX_MINUTES',
      sessionMaxExtensions: 'LEMNISCATE_SESSION_MAX_EXTENSIONS',
      toolLoopThreshold: 'LEMNISCATE_SESSION_TOOL_LOOP_THRESHOLD',
      toolLoopDetection: 'LEMNISCATE_SESSION_TOOL_LOOP_DETECTION',
      subagentMaxDepth: 'LEMNISCATE_SESSION_SUBAGENT_MAX_DEPTH',
      subagentMaxPerSession: 'LEMNISCATE_SESSION_SUBAGENT_MAX_PER_SESSION',
      subagentMaxConcurrent: 'LEMNISCATE_SESSION_SUBAGENT_MAX_CONCURRENT',
      contextTokenBudget: 'LEMNISCATE_SESSION_CONTEXT_TOKEN_BUDGET',
    });
    const { config } = resolveExecutionConfig({
      env: {
        LEMNISCATE_SESSION_TOOL_LOOP_THRESHOLD: '5',
        LEMNISCATE_SESSION_TOOL_LOOP_DETECTION: 'false',
        LEMNISCATE_SESSION_SUBAGENT_MAX_DEPTH: '1',
        LEMNISCATE_SESSION_SUBAGENT_MAX_PER_SESSION: '7',
        LEMNISCATE_SESSION_SUBAGENT_MAX_CONCURRENT: '2',
        LEMNISCATE_SESSION_CONTEXT_TOKEN_BUDGET: '8000',
      },
    });
    expect(config).toMatchObject({
      toolLoopThreshold: 5,
      toolLoopDetection: false,
      subagentMaxDepth: 1,
      subagentMaxPerSession: 7,
      subagentMaxConcurrent: 2,
      contextTokenBudget: 8000,
    });
  });

  it('ignores environment variables it does not own', () => {
    const { config } = resolveExecutionConfig({ env: { PATH: '/usr/bin', LEMNISCATE_SESSION_COLOUR: 'blue' } });
    expect(config).toEqual(EXECUTION_DEFAULTS);
  });

  it('refuses LEMNISCATE_SESSION_MAX_ACTIONS=abc by name instead of falling back to the default', () => {
    const error = refusal(() => resolveExecutionConfig({ env: { LEMNISCATE_SESSION_MAX_ACTIONS: 'abc' } }));
    expect(error.message).toBe('LEMNISCATE_SESSION_MAX_ACTIONS=abc is not a whole number of actions; fix or unset it.');
    expect(error).toMatchObject({ code: 'execution_config_invalid', source: 'LEMNISCATE_SESSION_MAX_ACTIONS', key: 'sessionMaxActions', value: 'abc' });
  });

  it.each([
    ['LEMNISCATE_SESSION_MAX_ACTIONS', '1.5', 'is not a whole number of actions'],
    ['LEMNISCATE_SESSION_MAX_ACTIONS', '-3', 'is not a whole number of actions'],
    ['LEMNISCATE_SESSION_MAX_ACTIONS', '0', 'is refused: a limit is adjusted, never removed'],
    ['LEMNISCATE_SESSION_MAX_ACTIONS', '', 'is set but empty'],
    ['LEMNISCATE_SESSION_MAX_ACTIONS', ' 150', 'is not a whole number of actions'],
    ['LEMNISCATE_SESSION_MAX_ACTIONS', '1e3', 'is not a whole number of actions'],
    ['LEMNISCATE_SESSION_MAX_ACTIONS', 'true', 'is not a whole number of actions'],
    ['LEMNISCATE_SESSION_MAX_ACTIONS', '99999999999999999999', 'is more than the largest accepted value'],
    ['LEMNISCATE_SESSION_MAX_MINUTES', '40000', 'is more than the largest accepted value (35791 minutes)'],
    ['LEMNISCATE_SESSION_MAX_MINUTES', 'forty', 'is not a whole number of minutes'],
    ['LEMNISCATE_SESSION_TOOL_LOOP_DETECTION', 'yes', 'is not true or false'],
    ['LEMNISCATE_SESSION_TOOL_LOOP_DETECTION', '0', 'is not true or false'],
    ['LEMNISCATE_SESSION_TOOL_LOOP_DETECTION', 'FALSE', 'is not true or false'],
    ['LEMNISCATE_SESSION_TOOL_LOOP_THRESHOLD', '0', 'is refused'],
    ['LEMNISCATE_SESSION_SUBAGENT_MAX_DEPTH', '0', 'is refused'],
    ['LEMNISCATE_SESSION_SUBAGENT_MAX_PER_SESSION', '0', 'is refused'],
    ['LEMNISCATE_SESSION_SUBAGENT_MAX_CONCURRENT', '0', 'is refused'],
    ['LEMNISCATE_SESSION_CONTEXT_TOKEN_BUDGET', '0', 'is refused'],
  ])('refuses %s=%j', (variable, raw, why) => {
    const error = refusal(() => resolveExecutionConfig({ env: { [variable]: raw } }));
    expect(error.message).toContain(`${variable}=${raw} ${why}`);
    expect(error.message).toMatch(/; fix or unset it\.$/);
    expect(error.source).toBe(variable);
  });

  it('accepts zero extensions, which means nobody may extend the session', () => {
    expect(resolveExecutionConfig({ env: { LEMNISCATE_SESSION_MAX_EXTENSIONS: '0' } }).config.sessionMaxExtensions).toBe(0);
    expect(resolveExecutionConfig({ config: [{ location: 'policy', values: { sessionMaxExtensions: 0 } }] }).config.sessionMaxExtensions).toBe(0);
  });

  it.each([
    ['sessionMaxActions', 'abc', '"abc"', 'is not a whole number of actions'],
    ['sessionMaxActions', '150', '"150"', 'is not a whole number of actions'],
    ['sessionMaxActions', 1.5, '1.5', 'is not a whole number of actions'],
    ['sessionMaxActions', -3, '-3', 'is not a whole number of actions'],
    ['sessionMaxActions', 0, '0', 'is refused'],
    ['sessionMaxActions', true, 'true', 'is not a whole number of actions'],
    ['sessionMaxActions', null, 'null', 'is not a whole number of actions'],
    ['sessionMaxActions', [150], 'a list', 'is not a whole number of actions'],
    ['sessionMaxMinutes', Infinity, 'Infinity', 'is not a whole number of minutes'],
    ['toolLoopDetection', 'yes', '"yes"', 'is not true or false'],
    ['toolLoopDetection', 0, '0', 'is not true or false'],
    ['toolLoopDetection', null, 'null', 'is not true or false'],
    ['subagentMaxDepth', 0, '0', 'is refused'],
    ['subagentMaxPerSession', 0, '0', 'is refused'],
    ['subagentMaxConcurrent', 0, '0', 'is refused'],
  ])('refuses %s: %p in a configuration file, naming the file', (key, value, shown, why) => {
    const error = refusal(() => resolveExecutionConfig({ config: [{ location: '~/.lemniscate/config.yaml', values: { [key]: value } }] }));
    expect(error.message.startsWith(`${key}: ${shown} in ~/.lemniscate/config.yaml ${why}`)).toBe(true);
    expect(error.message).toMatch(/; fix or remove it\.$/);
    expect(error).toMatchObject({ source: '~/.lemniscate/config.yaml', key, value: shown });
  });

  it('refuses a bad value in agent frontmatter, naming the agent', () => {
    const error = refusal(() => resolveExecutionConfig({ agent: { location: '.lemniscate/agents/revue.md', values: { sessionMaxActions: 'lots' } } }));
    expect(error.message).toBe('sessionMaxActions: "lots" in .lemniscate/agents/revue.md is not a whole number of actions; fix or remove it.');
  });

  it('refuses an execution block that is not a mapping', () => {
    const error = refusal(() => resolveExecutionConfig({ config: [{ location: 'policy v2', values: [1, 2] }] }));
    expect(error.message).toBe('execution in policy v2 must be a mapping of keys such as sessionMaxActions, not a list; fix or remove it.');
    expect(refusal(() => resolveExecutionConfig({ config: [{ location: 'policy v2', values: 'fast' }] })).key).toBe('execution');
  });

  it('treats an absent or empty execution block as saying nothing', () => {
    expect(
      resolveExecutionConfig({
        config: [
          { location: 'a', values: undefined },
          { location: 'b', values: null },
        ],
      }).config,
    ).toEqual(EXECUTION_DEFAULTS);
  });

  it('warns about keys it does not know instead of dropping them silently', () => {
    const { config, warnings } = resolveExecutionConfig({ config: [{ location: 'policy v1', values: { sessionMaxAction: 10, commandTimeoutMs: 1000 } }] });
    expect(config).toEqual(EXECUTION_DEFAULTS);
    expect(warnings).toEqual([
      'sessionMaxAction in policy v1 is not an execution setting this version knows; it is ignored.',
      'commandTimeoutMs in policy v1 is not an execution setting this version knows; it is ignored.',
    ]);
  });

  it('does not read inherited properties as settings', () => {
    const values = Object.create({ sessionMaxActions: 1 }) as object;
    expect(resolveExecutionConfig({ config: [{ location: 'x', values }] }).config.sessionMaxActions).toBe(150);
    expect(readExecutionMapping({ location: 'x', values: { toString: 3 } }, [])).toEqual([]);
  });

  it('disables loop detection only with an explicit false', () => {
    expect(resolveExecutionConfig({ config: [{ location: 'c', values: { toolLoopDetection: false } }] }).config.toolLoopDetection).toBe(false);
    expect(resolveExecutionConfig({ config: [{ location: 'c', values: {} }] }).config.toolLoopDetection).toBe(true);
    expect(resolveExecutionConfig({ env: { LEMNISCATE_SESSION_TOOL_LOOP_DETECTION: 'false' }, agent: { location: 'a', values: { toolLoopDetection: true } } }).config.toolLoopDetection).toBe(true);
  });

  it('never lets an unreadable environment value through, whatever it is', () => {
    fc.assert(
      fc.property(fc.constantFrom(...EXECUTION_KEYS), fc.string(), (key, raw) => {
        const env = { [EXECUTION_ENV[key]]: raw };
        let result: number | boolean;
        try {
          result = resolveExecutionConfig({ env }).config[key];
        } catch (error) {
          return error instanceof ExecutionConfigError && error.message.startsWith(`${EXECUTION_ENV[key]}=${raw} `);
        }
        // Whatever got through is exactly what was written.
        return typeof result === 'boolean' ? String(result) === raw : /^[0-9]+$/.test(raw) && Number(raw) === result && result >= 0;
      }),
    );
  });
});

describe('policy ceilings (P1, L5)', () => {
  // Every count the policy can set (contextTokenBudget is not a policy key).
  const LIMITED = EXECUTION_KEYS.filter((k) => k !== 'toolLoopDetection' && k !== 'contextTokenBudget');
  const CEILING = 10;
  const ceilings = (allowToolLoopDetectionOff = false): ExecutionCeilings => ({
    location: 'the policy of project "shop" (version 2)',
    values: { ...Object.fromEntries(LIMITED.map((k) => [k, CEILING])), toolLoopDetection: true },
    allowToolLoopDetectionOff,
  });
  type Place = 'environment' | 'configuration' | 'agent';
  const PLACES: Place[] = ['environment', 'configuration', 'agent'];
  const from = (place: Place, key: ExecutionKey, value: number | boolean): ResolveExecutionInput => {
    switch (place) {
      case 'environment':
        return { env: { [EXECUTION_ENV[key]]: String(value) } };
      case 'configuration':
        return { config: [{ location: '~/.lemniscate/config.yaml', values: { [key]: value } }] };
      case 'agent':
        return { agent: { location: '~/.lemniscate/agents/fast.md', values: { [key]: value } } };
    }
  };
  const named = (place: Place, key: ExecutionKey) => (place === 'environment' ? EXECUTION_ENV[key] : place === 'configuration' ? '~/.lemniscate/config.yaml' : '~/.lemniscate/agents/fast.md');

  const cases = LIMITED.flatMap((key) => PLACES.flatMap((place) => (['below', 'equal', 'above'] as const).map((where) => ({ key, place, where }))));

  it.each(cases)('$key from the $place, $where the ceiling', ({ key, place, where }) => {
    const value = where === 'below' ? CEILING - 1 : where === 'equal' ? CEILING : CEILING + 1;
    const run = () => resolveExecutionConfig({ ...from(place, key, value), ceilings: ceilings() });
    if (where === 'above') {
      let error: unknown;
      try {
        run();
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ExecutionConfigError);
      const e = error as ExecutionConfigError;
      expect(e.key).toBe(key);
      expect(e.source).toBe(named(place, key));
      expect(e.message).toContain(named(place, key));
      expect(e.message).toContain(`the policy of project "shop" (version 2) sets the ceiling execution.${key} at ${CEILING}`);
      expect(e.message).toMatch(/^[A-Za-z].*\.$/);
    } else {
      const resolved = run();
      expect(resolved.config[key]).toBe(value);
      expect(resolved.origin[key].layer).toBe(place);
    }
  });

  it.each(LIMITED.map((key) => ({ key })))('$key: a key nobody sets takes the policy value, not the built-in default', ({ key }) => {
    const resolved = resolveExecutionConfig({ ceilings: ceilings() });
    expect(resolved.config[key]).toBe(CEILING);
    expect(resolved.origin[key]).toEqual({ layer: 'configuration', location: 'the policy of project "shop" (version 2)' });
  });

  it('keeps L5 precedence below the ceiling: frontmatter over configuration over environment', () => {
    const resolved = resolveExecutionConfig({
      env: { LEMNISCATE_SESSION_MAX_ACTIONS: '3', LEMNISCATE_SESSION_MAX_MINUTES: '3', LEMNISCATE_SESSION_SUBAGENT_MAX_DEPTH: '3' },
      config: [{ location: '~/.lemniscate/config.yaml', values: { sessionMaxMinutes: 4, subagentMaxDepth: 4 } }],
      agent: { location: 'agent.md', values: { subagentMaxDepth: 5 } },
      ceilings: ceilings(),
    });
    expect(resolved.config).toMatchObject({ sessionMaxActions: 3, sessionMaxMinutes: 4, subagentMaxDepth: 5 });
  });

  it('judges the value in force: a frontmatter below the ceiling wins over a configuration above it', () => {
    expect(() =>
      resolveExecutionConfig({
        config: [{ location: '~/.lemniscate/config.yaml', values: { sessionMaxActions: 11 } }],
        agent: { location: 'agent.md', values: { sessionMaxActions: 5 } },
        ceilings: ceilings(),
      }),
    ).not.toThrow();
  });

  const loopCases = PLACES.flatMap((place) => [false, true].flatMap((allow) => [true, false].map((value) => ({ place, allow, value }))));
  it.each(loopCases)('toolLoopDetection: $value from the $place, policy allows switching off: $allow', ({ place, allow, value }) => {
    const run = () => resolveExecutionConfig({ ...from(place, 'toolLoopDetection', value), ceilings: ceilings(allow) });
    if (value === false && !allow) {
      expect(run).toThrow(ExecutionConfigError);
      expect(run).toThrow(`${place === 'environment' ? 'LEMNISCATE_SESSION_TOOL_LOOP_DETECTION=false' : `toolLoopDetection: false in ${named(place, 'toolLoopDetection')}`} is refused`);
      expect(run).toThrow('does not allow a workstation to switch it off (execution.allowToolLoopDetectionOff)');
    } else {
      expect(run().config.toolLoopDetection).toBe(value);
    }
  });

  it('lets a workstation switch loop detection back on when the policy switched it off', () => {
    const off: ExecutionCeilings = { ...ceilings(), values: { ...ceilings().values, toolLoopDetection: false } };
    expect(resolveExecutionConfig({ ceilings: off }).config.toolLoopDetection).toBe(false);
    expect(resolveExecutionConfig({ env: { LEMNISCATE_SESSION_TOOL_LOOP_DETECTION: 'true' }, ceilings: off }).config.toolLoopDetection).toBe(true);
    expect(resolveExecutionConfig({ env: { LEMNISCATE_SESSION_TOOL_LOOP_DETECTION: 'false' }, ceilings: off }).config.toolLoopDetection).toBe(false);
  });

  it('checks a delegated agent frontmatter against the same ceilings', () => {
    expect(() => checkLayerCeilings({ subagentMaxDepth: 11 }, '~/.lemniscate/agents/deep.md', ceilings())).toThrow(
      'subagentMaxDepth: 11 in ~/.lemniscate/agents/deep.md is refused: the policy of project "shop" (version 2) sets the ceiling execution.subagentMaxDepth at 10 levels',
    );
    expect(() => checkLayerCeilings({ subagentMaxDepth: 10, toolLoopDetection: true }, 'x.md', ceilings())).not.toThrow();
    expect(() => checkLayerCeilings({ toolLoopDetection: false }, 'x.md', ceilings())).toThrow(ExecutionConfigError);
  });
});
