import Ajv2020 from 'ajv/dist/2020';
import { policyJsonSchema } from '@lemniscate/policy';
import { diagnosePolicy, type SchemaValidator } from './validate';

const validate = new Ajv2020({ allErrors: true, strict: false }).compile(policyJsonSchema) as unknown as SchemaValidator;

describe('diagnosePolicy against the policy JSON schema', () => {
  it('accepts the smallest valid policy', () => {
    expect(diagnosePolicy('version: 1\n', validate)).toEqual([]);
  });

  it('points at a misspelt key, on its line', () => {
    const text = 'version: 1\ncommands:\n  defualt: allow\n';
    const [d, ...rest] = diagnosePolicy(text, validate);
    expect(rest).toEqual([]);
    expect(d).toMatchObject({ path: 'commands.defualt', line: 3, message: expect.stringContaining('unknown key') });
    expect(text.slice(d!.from, d!.to)).toBe('defualt');
  });

  it('names the allowed values of an enum and underlines the wrong one', () => {
    const text = 'version: 1\ncommands:\n  default: maybe\n';
    const [d] = diagnosePolicy(text, validate);
    expect(d).toMatchObject({ path: 'commands.default', line: 3, message: 'must be one of allow, ask, deny' });
    expect(text.slice(d!.from, d!.to)).toBe('maybe');
  });

  it('finds an item of a list by its index', () => {
    const text = 'version: 1\ntools:\n  disabled:\n    - Bash\n    - Curl\n';
    const [d] = diagnosePolicy(text, validate);
    expect(d).toMatchObject({ path: 'tools.disabled[1]', line: 5 });
  });

  it('reports YAML syntax errors with their position', () => {
    const [d] = diagnosePolicy('version: 1\ncommands: [unclosed\n', validate);
    expect(d!.message).toMatch(/^YAML: /);
    expect(d!.line).toBeGreaterThanOrEqual(2);
  });

  it('refuses a document that is not a mapping', () => {
    expect(diagnosePolicy('- a\n- b\n', validate)[0]!.message).toContain('mapping');
  });

  it('says a missing version is required', () => {
    expect(diagnosePolicy('commands:\n  default: ask\n', validate)[0]!.message).toContain('`version` is missing');
  });
});
