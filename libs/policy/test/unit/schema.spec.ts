import Ajv2020 from 'ajv/dist/2020';
import { stringify } from 'yaml';
import { approvalTimeoutSeconds, defaultPolicy, parsePolicy, policyJsonSchema, PolicyValidationError, recommendedPolicy, ruleCommand } from '../../src/schema';

function issuesOf(input: unknown): { path: string; message: string }[] {
  try {
    parsePolicy(input);
  } catch (error) {
    if (error instanceof PolicyValidationError) return error.issues;
    throw error;
  }
  throw new Error('expected the policy to be invalid');
}

describe('parsePolicy', () => {
  it('fills every default from `version: 1` alone, with nothing free (P2)', () => {
    const p = parsePolicy('version: 1\n');
    expect(p).toEqual(defaultPolicy);
    expect(p.commands).toEqual({ default: 'ask', free: [], forbidden: expect.arrayContaining(['curl', 'git push']), reapproval: 'always', askEveryTime: [], readOnly: [] });
    expect(p.tools).toEqual({ disabled: [], sensitive: ['Task'] });
    expect(p.thirdPartyFiles.mode).toBe('forbid');
    expect(p.execution.sessionMaxActions).toBe(150);
    expect(p.sandbox.runtime).toBe('runc');
  });

  it('reads JSON as well as YAML', () => {
    expect(parsePolicy('{"version": 1, "commands": {"free": ["npm test"]}}').commands.free).toEqual(['npm test']);
  });

  it('accepts an already parsed object', () => {
    expect(parsePolicy({ version: 1, tools: { disabled: ['Bash'] } }).tools.disabled).toEqual(['Bash']);
  });

  it('names the path of an empty command', () => {
    expect(issuesOf({ version: 1, commands: { free: ['npm test', 'pytest', 'go test', '  '] } })).toEqual([{ path: 'commands.free[3]', message: 'empty command' }]);
  });

  it('refuses shell syntax inside a rule, saying why', () => {
    const [issue] = issuesOf({ version: 1, commands: { forbidden: ['curl && wget'] } });
    expect(issue?.path).toBe('commands.forbidden[0]');
    expect(issue?.message).toContain('not a plain command');
  });

  it('refuses a command that is both free and forbidden', () => {
    expect(issuesOf({ version: 1, commands: { free: ['curl'] } })).toEqual([{ path: 'commands.free[0]', message: '`curl` is also forbidden by commands.forbidden[0]; a command cannot be both' }]);
  });

  it('reports misspelt keys instead of ignoring them', () => {
    expect(issuesOf('version: 1\ncommands:\n  forbiden: [curl]\n')).toEqual([{ path: 'commands.forbiden', message: 'unknown key (check its spelling against the policy reference)' }]);
  });

  it('explains wrong types, enums and ranges', () => {
    const issues = issuesOf({ version: 1, commands: { default: 'maybe' }, tools: { disabled: ['Rm'] }, execution: { sessionMaxActions: -1, toolLoopDetection: 'yes' } });
    expect(issues).toEqual(
      expect.arrayContaining([
        { path: 'commands.default', message: 'must be one of allow, ask, deny' },
        { path: 'tools.disabled[0]', message: expect.stringContaining('must be one of Read, List') },
        { path: 'execution.sessionMaxActions', message: 'must be greater than 0' },
        { path: 'execution.toolLoopDetection', message: 'expected a boolean, got string "yes"' },
      ]),
    );
  });

  it('refuses another version', () => {
    expect(issuesOf('version: 2')).toEqual([{ path: 'version', message: expect.stringContaining('version 1') }]);
  });

  it('refuses a document without a version', () => {
    expect(issuesOf('commands: {}')[0]?.path).toBe('version');
  });

  it.each([
    ['null', 'null'],
    ['a list', '[1, 2]'],
    ['a number', '42'],
  ])('refuses a document that is %s', (_what, text) => {
    expect(issuesOf(text)).toEqual([{ path: '', message: expect.stringContaining('a policy is a mapping') }]);
  });

  it('reports YAML syntax errors with their line', () => {
    expect(issuesOf('version: 1\ncommands: [\n')[0]?.message).toMatch(/^line \d+, column \d+: /);
  });

  it('refuses a YAML alias bomb with a sentence, without expanding it', () => {
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x]'];
    for (const [i, name] of ['b', 'c', 'd', 'e', 'f', 'g', 'h'].entries()) {
      const prev = 'abcdefg'[i];
      levels.push(`${name}: &${name} [${Array(9).fill(`*${prev}`).join(', ')}]`);
    }
    const issues = issuesOf(`version: 1\n${levels.join('\n')}\n`);
    expect(issues).toHaveLength(1);
    expect(issues[0]?.message).toMatch(/aliases .* expand to more than 100 copies/);
    // A few aliases that expand little are ordinary YAML, and get the usual schema messages.
    expect(
      issuesOf('version: 1\nx: &x [1]\ny: *x\n')
        .map((i) => i.message)
        .join(' '),
    ).not.toMatch(/alias/);
  });

  it('refuses duplicate keys', () => {
    expect(issuesOf('version: 1\nversion: 1\n')[0]?.message).toMatch(/unique|duplicate/i);
  });

  it('returns a frozen policy', () => {
    const p = parsePolicy({ version: 1 });
    expect(Object.isFrozen(p.commands.free)).toBe(true);
  });

  it('the recommended policy makes the usual commands free and forbids network tools', () => {
    expect(recommendedPolicy.commands.free.map(ruleCommand)).toEqual(expect.arrayContaining(['npm test', 'pytest', 'go test', 'cargo test', 'make test', 'npx prettier --check']));
    expect(recommendedPolicy.commands.readOnly).toEqual(expect.arrayContaining(['ls', 'cat', 'grep', 'find', 'sed', 'awk', 'git']));
    expect(recommendedPolicy.commands.forbidden).toEqual(expect.arrayContaining(['curl', 'wget', 'ssh', 'git push']));
  });

  it('round-trips both shipped policies through YAML', () => {
    for (const p of [defaultPolicy, recommendedPolicy]) expect(parsePolicy(stringify(p))).toEqual(p);
  });
});

describe('policyJsonSchema', () => {
  const ajv = new Ajv2020({ strict: false });
  const validate = ajv.compile(policyJsonSchema);

  it('accepts the shipped policies and a minimal one', () => {
    expect(validate(JSON.parse(JSON.stringify(recommendedPolicy)))).toBe(true);
    expect(validate({ version: 1 })).toBe(true);
  });

  it('rejects what parsePolicy rejects structurally', () => {
    expect(validate({ version: 1, commands: { default: 'maybe' } })).toBe(false);
    expect(validate({ version: 1, extra: true })).toBe(false);
    expect(validate({})).toBe(false);
  });
});

describe('approvals.timeoutSeconds (L1, X4)', () => {
  it('defaults to 30 minutes, cut to the session duration limit when that is shorter', () => {
    expect(defaultPolicy.approvals.timeoutSeconds).toBeUndefined();
    expect(approvalTimeoutSeconds(defaultPolicy)).toBe(1_800);
    for (const minutes of [1, 5, 29, 30, 31, 45, 600]) {
      expect(approvalTimeoutSeconds(parsePolicy({ version: 1, execution: { sessionMaxMinutes: minutes } }))).toBe(Math.min(1_800, minutes * 60));
    }
  });

  it.each([
    [1, 1, true],
    [60, 1, true],
    [61, 1, false],
    [2_700, 45, true],
    [2_701, 45, false],
    [86_400, 1_440, true],
  ])('timeoutSeconds %i with sessionMaxMinutes %i is accepted: %s', (timeout, minutes, ok) => {
    const input = { version: 1, approvals: { timeoutSeconds: timeout }, execution: { sessionMaxMinutes: minutes } };
    if (ok) {
      expect(approvalTimeoutSeconds(parsePolicy(input))).toBe(timeout);
    } else {
      expect(issuesOf(input)).toEqual([
        { path: 'approvals.timeoutSeconds', message: expect.stringContaining(`longer than the session duration limit (execution.sessionMaxMinutes: ${minutes} minutes`) },
      ]);
    }
  });

  it('refuses zero, fractions, text and unknown keys under approvals', () => {
    for (const bad of [0, -5, 1.5, '30']) expect(issuesOf({ version: 1, approvals: { timeoutSeconds: bad } })[0]!.path).toBe('approvals.timeoutSeconds');
    expect(issuesOf({ version: 1, approvals: { timeout: 5 } })[0]!.path).toBe('approvals.timeout');
  });

  it('is in the JSON Schema an editor validates against', () => {
    const props = (policyJsonSchema as { properties: Record<string, { properties?: Record<string, { type?: string; maximum?: number }> }> }).properties;
    expect(props.approvals!.properties!.timeoutSeconds).toMatchObject({ type: 'integer', maximum: 86_400 });
  });
});

describe('free rules with options, and the read-only list', () => {
  const issues = (input: unknown) => {
    try {
      parsePolicy(input);
      return [];
    } catch (error) {
      return (error as PolicyValidationError).issues;
    }
  };

  it('keeps a plain string rule as it was, and reads a mapping with its defaults', () => {
    const p = parsePolicy({ version: 1, commands: { free: ['npm test', { command: 'go test', options: { ask: ['-exec'] } }] } });
    expect(p.commands.free[0]).toBe('npm test');
    expect(p.commands.free[1]).toEqual({ command: 'go test', options: { ask: ['-exec'] }, assignments: 'allow', paths: 'inside' });
    expect(p.commands.readOnly).toEqual([]);
  });

  it('refuses an option written with a value, a shell rule in a mapping, unknown keys and unknown read-only programs', () => {
    expect(issues({ version: 1, commands: { free: [{ command: 'go test', options: { ask: ['-exec=x'] } }] } })[0]?.path).toBe('commands.free[0].options.ask[0]');
    expect(issues({ version: 1, commands: { free: [{ command: 'go test; curl x' }] } })[0]?.path).toBe('commands.free[0].command');
    expect(issues({ version: 1, commands: { free: [{ command: 'go test', option: {} }] } })[0]?.path).toBe('commands.free[0].option');
    expect(issues({ version: 1, commands: { readOnly: ['ls', 'vim'] } })[0]?.path).toBe('commands.readOnly[1]');
    expect(issues({ version: 1, commands: { free: [{ command: 'curl' }] } })[0]?.message).toContain('also forbidden');
  });

  it('the JSON Schema accepts both shapes of a free rule and the recommended policy', () => {
    const validate = new Ajv2020({ strict: false }).compile(policyJsonSchema);
    expect(validate({ version: 1, commands: { free: ['npm test', { command: 'make test', options: { allow: ['-j'] }, assignments: 'ask' }], readOnly: ['ls'] } })).toBe(true);
    expect(validate(JSON.parse(JSON.stringify(recommendedPolicy)))).toBe(true);
    expect(validate({ version: 1, commands: { readOnly: ['vim'] } })).toBe(false);
  });
});
