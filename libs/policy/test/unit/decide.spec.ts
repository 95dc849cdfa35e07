import { decide } from '../../src/decide';
import { defaultPolicy, parsePolicy, recommendedPolicy } from '../../src/schema';
import { initPolicyEngine } from '../../src/shell/parser';

beforeAll(async () => {
  await initPolicyEngine();
});

const approve = parsePolicy({ version: 1, thirdPartyFiles: { mode: 'approve' } });

describe('decide: file tools', () => {
  it.each(['Read', 'List'])('%s inside the project is free', (name) => {
    expect(decide({ name, arguments: { path: 'src/index.ts' } }, defaultPolicy)).toEqual({
      effect: 'allow',
      rule: 'tools.read',
      reason: 'Reading inside the project is free (tools.read).',
    });
  });

  it('Search without a path searches the project', () => {
    expect(decide({ name: 'Search', arguments: { pattern: 'TODO' } }, defaultPolicy).effect).toBe('allow');
  });

  it('Search without a pattern is refused', () => {
    expect(decide({ name: 'Search', arguments: { path: '.' } }, defaultPolicy)).toMatchObject({ effect: 'deny', rule: 'tools.arguments' });
  });

  it.each(['../etc/passwd', 'src/../../x', '/etc/passwd'])('refuses %s outside the project without asking', (path) => {
    const d = decide({ name: 'Read', arguments: { path } }, defaultPolicy);
    expect(d).toMatchObject({ effect: 'deny', rule: 'scope.outside' });
    expect(d.reason).toContain('outside the project');
  });

  it('accepts an absolute path under the root the model was given', () => {
    expect(decide({ name: 'Read', arguments: { path: '/workspace/src/a.ts' } }, defaultPolicy, { root: '/workspace' }).effect).toBe('allow');
    expect(decide({ name: 'Read', arguments: { path: '/workspaces/a.ts' } }, defaultPolicy, { root: '/workspace' }).effect).toBe('deny');
  });

  it.each(['.env', 'config/.env.local', 'certs/server.pem', 'app/secrets/token.txt'])('refuses to read the excluded file %s', (path) => {
    const d = decide({ name: 'Read', arguments: { path } }, defaultPolicy);
    expect(d.effect).toBe('deny');
    expect(d.rule).toMatch(/^contextExclusions\[\d+\]$/);
    expect(d.reason).toContain("excluded from the model's context");
  });

  it('a write is a diff for a person', () => {
    const d = decide({ name: 'Write', arguments: { path: 'src/a.ts', content: 'x' } }, recommendedPolicy);
    expect(d).toMatchObject({ effect: 'ask', rule: 'tools.write' });
    expect(d.thirdParty).toBeUndefined();
  });

  it('an edit is a diff for a person', () => {
    expect(decide({ name: 'Edit', arguments: { path: 'src/a.ts', old_string: 'a', new_string: 'b' } }, recommendedPolicy)).toMatchObject({
      effect: 'ask',
      rule: 'tools.write',
      reason: 'An edit to `src/a.ts` is shown to a person as a diff before it touches the working copy (tools.write).',
    });
  });

  it.each([
    ['.github/workflows/ci.yml', 'ci'],
    ['Makefile', 'ci'],
    ['docker/Dockerfile.dev', 'ci'],
    ['.git/hooks/pre-commit', 'vcs'],
    ['.husky/pre-push', 'vcs'],
    ['package.json', 'manifests'],
    ['services/api/go.sum', 'manifests'],
    ['src/App/App.csproj', 'manifests'],
  ])('writing %s (%s) is refused under forbid', (path, cls) => {
    const d = decide({ name: 'Write', arguments: { path, content: 'x' } }, recommendedPolicy);
    expect(d).toMatchObject({ effect: 'deny', rule: `thirdPartyFiles.${cls}`, thirdParty: [{ path, class: cls }] });
    expect(d.reason).toContain('forbids changing it');
  });

  it('writing a third-party file asks with a flag under approve', () => {
    const d = decide({ name: 'Edit', arguments: { path: 'package.json', old_string: 'a', new_string: 'b' } }, approve);
    expect(d).toEqual({
      effect: 'ask',
      rule: 'thirdPartyFiles.manifests',
      reason: expect.stringContaining('dedicated approval'),
      thirdParty: [{ path: 'package.json', class: 'manifests' }],
    });
  });

  it('binary content and oversized writes are third-party changes', () => {
    expect(decide({ name: 'Write', arguments: { path: 'a.bin', content: 'a\0b' } }, recommendedPolicy)).toMatchObject({ effect: 'deny', rule: 'thirdPartyFiles.binary' });
    const small = parsePolicy({ version: 1, thirdPartyFiles: { maxDiffBytes: 10 } });
    expect(decide({ name: 'Write', arguments: { path: 'a.txt', content: 'x'.repeat(11) } }, small)).toMatchObject({ effect: 'deny', rule: 'thirdPartyFiles.maxDiffBytes' });
  });

  it.each([
    ['Write', { path: 'a' }, 'content'],
    ['Write', { content: 'x' }, 'path'],
    ['Edit', { path: 'a', new_string: 'b' }, 'old_string'],
    ['Read', { path: 42 }, 'path'],
  ])('%s with missing %j is refused with the missing argument named', (name, args, missing) => {
    const d = decide({ name, arguments: args }, recommendedPolicy);
    expect(d).toMatchObject({ effect: 'deny', rule: 'tools.arguments' });
    expect(d.reason).toContain(`\`${missing}\``);
  });
});

describe('decide: catalogue, disabled tools and agents', () => {
  it('an unknown tool is refused', () => {
    expect(decide({ name: 'Browser', arguments: {} }, defaultPolicy)).toMatchObject({ effect: 'deny', rule: 'tools.unknown' });
  });

  it('a disabled tool is refused with the reason', () => {
    const policy = parsePolicy({ version: 1, tools: { disabled: ['Bash'] } });
    expect(decide({ name: 'Bash', arguments: { command: 'npm test' } }, policy)).toEqual({
      effect: 'deny',
      rule: 'tools.disabled',
      reason: 'The project policy disables the Bash tool (tools.disabled).',
    });
  });

  it("a tool outside the agent's list is refused", () => {
    const d = decide({ name: 'Write', arguments: { path: 'a', content: 'b' } }, defaultPolicy, { agentTools: ['Read', 'Search'] });
    expect(d).toMatchObject({ effect: 'deny', rule: 'tools.agent' });
    expect(decide({ name: 'Read', arguments: { path: 'a' } }, defaultPolicy, { agentTools: ['Read'] }).effect).toBe('allow');
  });

  it.each([
    ['Write', { path: 'a', content: 'b' }],
    ['Edit', { path: 'a', old_string: 'a', new_string: 'b' }],
    ['Bash', { command: 'npm test' }],
    ['Task', { agent: 'x', instruction: 'y' }],
  ])('a read-only context refuses %s', (name, args) => {
    expect(decide({ name, arguments: args }, recommendedPolicy, { readOnly: true })).toMatchObject({ effect: 'deny', rule: 'context.readOnly' });
  });

  it('a read-only context still reads', () => {
    expect(decide({ name: 'Read', arguments: { path: 'a' } }, recommendedPolicy, { readOnly: true }).effect).toBe('allow');
  });

  it('Task is sensitive by default and asks', () => {
    expect(decide({ name: 'Task', arguments: { agent: 'reviewer', instruction: 'review' } }, defaultPolicy)).toMatchObject({ effect: 'ask', rule: 'tools.sensitive' });
  });

  it('Task runs when the policy does not mark it sensitive', () => {
    const policy = parsePolicy({ version: 1, tools: { sensitive: [] } });
    expect(decide({ name: 'Task', arguments: { agent: 'reviewer', instruction: 'review' } }, policy).effect).toBe('allow');
  });

  it('a sensitive Bash asks even for a free command', () => {
    const policy = parsePolicy({ version: 1, commands: { free: ['npm test'] }, tools: { sensitive: ['Bash'] } });
    expect(decide({ name: 'Bash', arguments: { command: 'npm test' } }, policy)).toMatchObject({ effect: 'ask', rule: 'tools.sensitive' });
  });

  it('TaskResult and Question are allowed', () => {
    expect(decide({ name: 'TaskResult', arguments: { task_id: 't1' } }, defaultPolicy).effect).toBe('allow');
    expect(decide({ name: 'Question', arguments: { question: 'Which one?', options: ['a', 'b'] } }, defaultPolicy).effect).toBe('allow');
  });

  it('a call without arguments is refused, not thrown', () => {
    expect(decide({ name: 'Bash', arguments: null as unknown as Record<string, unknown> }, defaultPolicy)).toMatchObject({ effect: 'deny', rule: 'tools.arguments' });
    expect(decide({ name: 'Bash', arguments: { command: 3 } }, defaultPolicy)).toMatchObject({ effect: 'deny', rule: 'tools.arguments' });
  });
});

describe('decide: shell commands and the policy', () => {
  it('nothing is free under the default policy (P2)', () => {
    expect(decide({ name: 'Bash', arguments: { command: 'npm test' } }, defaultPolicy)).toMatchObject({ effect: 'ask', rule: 'commands.default' });
  });

  it('commands.default deny refuses unnamed commands, and allow lets them run', () => {
    const deny = parsePolicy({ version: 1, commands: { default: 'deny' } });
    const allow = parsePolicy({ version: 1, commands: { default: 'allow' } });
    expect(decide({ name: 'Bash', arguments: { command: 'ls' } }, deny)).toMatchObject({ effect: 'deny', rule: 'commands.default' });
    expect(decide({ name: 'Bash', arguments: { command: 'ls' } }, allow)).toMatchObject({ effect: 'allow', rule: 'commands.default' });
    expect(decide({ name: 'Bash', arguments: { command: 'ls; curl x' } }, allow)).toMatchObject({ effect: 'deny', rule: 'commands.forbidden[0]' });
  });

  const approved = (command: string) => [{ command, workingDirectory: '/workspace', approvalId: 'apr_1' }];
  const at = { workingDirectory: '/workspace' };

  it('an approved identical command runs again under reapproval: exempt, naming the approval', () => {
    const d = decide({ name: 'Bash', arguments: { command: 'rm -rf build' } }, recommendedPolicy, { ...at, approvedCommands: approved('rm -rf build') });
    expect(d).toMatchObject({ effect: 'allow', rule: 'commands.reapproval', approvalId: 'apr_1' });
    expect(d.reason).toContain('approval apr_1');
    expect(decide({ name: 'Bash', arguments: { command: 'rm -rf build ' } }, recommendedPolicy, { ...at, approvedCommands: approved('rm -rf build') }).effect).toBe('ask');
  });

  it('reapproval: always asks again and never offers it', () => {
    const d = decide({ name: 'Bash', arguments: { command: 'ls -la' } }, defaultPolicy, { ...at, approvedCommands: approved('ls -la') });
    expect(d.effect).toBe('ask');
    expect(d.reapprovalExempt).toBeUndefined();
  });

  it('an earlier approval never turns a refusal or a third-party flag into an allow', () => {
    expect(decide({ name: 'Bash', arguments: { command: 'curl x' } }, recommendedPolicy, { ...at, approvedCommands: approved('curl x') }).effect).toBe('deny');
    const exemptApprove = parsePolicy({ version: 1, commands: { reapproval: 'exempt' }, thirdPartyFiles: { mode: 'approve' } });
    const d = decide({ name: 'Bash', arguments: { command: 'echo x > Makefile' } }, exemptApprove, { ...at, approvedCommands: approved('echo x > Makefile') });
    expect(d).toMatchObject({ effect: 'ask', rule: 'thirdPartyFiles.ci', thirdParty: [{ path: 'Makefile', class: 'ci' }] });
    expect(d.reapprovalExempt).toBeUndefined();
  });

  it('a redirection into a third-party file under approve asks with the flag', () => {
    expect(decide({ name: 'Bash', arguments: { command: 'npm test > .gitmodules' } }, approve)).toMatchObject({
      effect: 'ask',
      rule: 'thirdPartyFiles.vcs',
      thirdParty: [{ path: '.gitmodules', class: 'vcs' }],
    });
  });

  it('gives the exact reason for a forbidden command', () => {
    expect(decide({ name: 'Bash', arguments: { command: 'curl x' } }, recommendedPolicy).reason).toBe('`curl` is forbidden by the project policy (commands.forbidden[0]).');
  });

  it('matches a policy of many rules by program', () => {
    const free = Array.from({ length: 150 }, (_, i) => `tool${i} run`);
    const forbidden = Array.from({ length: 50 }, (_, i) => `bad${i}`);
    const policy = parsePolicy({ version: 1, commands: { free, forbidden } });
    expect(decide({ name: 'Bash', arguments: { command: 'tool149 run --fast' } }, policy)).toMatchObject({ effect: 'allow', rule: 'commands.free[149]' });
    expect(decide({ name: 'Bash', arguments: { command: 'tool1 run && bad49' } }, policy)).toMatchObject({ effect: 'deny', rule: 'commands.forbidden[49]' });
  });
});

describe('decide: the parser reading past a line break', () => {
  // Found by the property test: the grammar read `npm test⏎time -p curl 2>/dev/null` at the end of a
  // pipeline as one command, `npm test time -p curl`, which a free `npm test` then allowed.
  const permissive = parsePolicy({ version: 1, commands: { default: 'allow', free: ['npm test'] } });
  const bash = (command: string) => decide({ name: 'Bash', arguments: { command } }, permissive);

  it.each([
    'npm test | npm test | npm test\ntime -p curl 2>/dev/null',
    'npm test | npm test | npm test\ntime -p wget x 2>/dev/null',
    'npm test | npm test | npm test | npm test\ntime -p ssh host 2>/dev/null',
  ])('never allows %j', (command) => {
    const d = bash(command);
    expect(d.effect).not.toBe('allow');
  });

  it('still allows free commands on separate lines, and a line continued with a backslash', () => {
    expect(bash('npm test\nnpm test').effect).toBe('allow');
    expect(bash('npm test | npm test\nnpm test').effect).toBe('allow');
    expect(decide({ name: 'Bash', arguments: { command: 'npm test \\\n  --silent' } }, parsePolicy({ version: 1, commands: { default: 'deny', free: ['npm test'] } })).effect).toBe('allow');
  });
});
