import { policyJsonSchema } from '@lemniscate/policy';
import { checkPolicy, parsePolicy } from '@lemniscate/policy';
import { commonFields, readFields, ruleLines, withPins, withRuleLines, writeField } from '../../../src/policy/form-model';

const fields = commonFields(policyJsonSchema);
const field = (p: string) => fields.find((f) => f.path.join('.') === p)!;

describe('policy form model', () => {
  it('takes options and defaults from the JSON schema', () => {
    expect(field('commands.default')).toMatchObject({ defaultValue: 'ask', options: ['allow', 'ask', 'deny'] });
    expect(field('tools.disabled').options).toContain('Bash');
    expect(field('execution.sessionMaxActions').defaultValue).toBe(150);
  });

  it('reads defaults for settings the document leaves out', () => {
    expect(readFields('version: 1\n', fields)).toMatchObject({ 'commands.default': 'ask', 'commands.free': [] });
  });

  it('reads lists and scalars that are present', () => {
    const v = readFields('version: 1\ncommands:\n  free: [npm test]\n  default: deny\n', fields);
    expect(v).toMatchObject({ 'commands.free': ['npm test'], 'commands.default': 'deny' });
  });

  it('writes a setting and keeps the comments around it', () => {
    const text = '# reviewed by security, 2026-11\nversion: 1\ncommands:\n  # keep ask: P2\n  default: ask\n';
    const out = writeField(text, field('commands.free'), ['npm test', 'npm run lint']);
    expect(out).toContain('# reviewed by security, 2026-11');
    expect(out).toContain('# keep ask: P2');
    expect(readFields(out, fields)!['commands.free']).toEqual(['npm test', 'npm run lint']);
  });

  it('leaves unreadable YAML untouched rather than guessing', () => {
    expect(readFields('version: [1\n', fields)).toBeNull();
    expect(writeField('version: [1\n', field('commands.default'), 'deny')).toBe('version: [1\n');
  });
});

describe('ruleLines and withRuleLines', () => {
  const goTest = { command: 'go test', options: { ask: ['-exec'] } };
  it('the form edits the plain lines and names the rules with options', () => {
    expect(ruleLines(['npm test', goTest])).toEqual({ lines: ['npm test'], labels: ['go test'] });
    expect(ruleLines(['a', 'b'])).toEqual({ lines: ['a', 'b'], labels: [] });
    expect(ruleLines(undefined)).toEqual({ lines: [], labels: [] });
  });

  it('saving the lines keeps every rule with options where it stood, and never turns one into a prefix', () => {
    expect(withRuleLines(['npm test', goTest, 'make test'], ['make test', 'sleep'])).toEqual([goTest, 'make test', 'sleep']);
    expect(withRuleLines([goTest], [])).toEqual([goTest]);
    expect(withRuleLines(undefined, ['sleep'])).toEqual(['sleep']);
    const text = writeField('version: 1\ncommands:\n  free:\n    - command: go test\n      options: { ask: [-exec] }\n', field('commands.free'), withRuleLines([goTest], ['sleep']));
    expect(readFields(text, fields)).toMatchObject({ 'commands.free': [goTest, 'sleep'] });
  });
});

describe('pinning MCP tool descriptions in the draft', () => {
  const pin = (c: string) => `sha256:${c.repeat(64)}`;
  const draft = ['version: 1', 'mcp:', '  servers:', '    files: # the local server', '      local: { command: [node, tools/mcp.cjs] }', '      pinned:', `        read_file: "${pin('a')}"`, ''].join(
    '\n',
  );

  it('adds and replaces pins under the server, keeping the other pins and the comments', () => {
    const next = withPins(draft, 'files', { write_file: pin('b'), read_file: pin('c') });
    expect(next).toContain('# the local server');
    expect(checkPolicy(next)).toEqual([]);
    expect(parsePolicy(next).mcp.servers.files!.pinned).toEqual({ read_file: pin('c'), write_file: pin('b') });
  });

  it('leaves a draft that is not YAML as it is', () => {
    expect(withPins('version: [1\n', 'files', { read_file: pin('a') })).toBe('version: [1\n');
  });
});
