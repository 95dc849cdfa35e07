import { checkPolicy } from '@lemniscate/policy';
import { diagnosePolicy } from '../../../src/policy/validate';

// The console's editor shows the policy library's own verdict (the one `lemni policy check` and the
// gateway's publish give), placed in the text.

describe('diagnosePolicy: the library validator, placed in the text', () => {
  it('accepts the smallest valid policy', () => {
    expect(diagnosePolicy('version: 1\n')).toEqual([]);
  });

  it('refuses a command both free and forbidden, with the library sentence, on the free rule', () => {
    const text = 'version: 1\ncommands:\n  free: [npm test, curl]\n  forbidden: [curl]\n';
    const [d, ...rest] = diagnosePolicy(text);
    expect(rest).toEqual([]);
    expect(d).toMatchObject({ path: 'commands.free[1]', line: 3, message: '`curl` is also forbidden by commands.forbidden[0]; a command cannot be both' });
    expect(text.slice(d!.from, d!.to)).toBe('curl');
  });

  it('points at a misspelt key, on its line', () => {
    const text = 'version: 1\ncommands:\n  defualt: allow\n';
    const [d, ...rest] = diagnosePolicy(text);
    expect(rest).toEqual([]);
    expect(d).toMatchObject({ path: 'commands.defualt', line: 3, message: expect.stringContaining('unknown key') });
    expect(text.slice(d!.from, d!.to)).toBe('defualt');
  });

  it('names the allowed values of an enum and underlines the wrong one', () => {
    const text = 'version: 1\ncommands:\n  default: maybe\n';
    const [d] = diagnosePolicy(text);
    expect(d).toMatchObject({ path: 'commands.default', line: 3, message: 'must be one of allow, ask, deny' });
    expect(text.slice(d!.from, d!.to)).toBe('maybe');
  });

  it('finds an item of a list by its index', () => {
    const text = 'version: 1\ntools:\n  disabled:\n    - Bash\n    - Curl\n';
    const [d] = diagnosePolicy(text);
    expect(d).toMatchObject({ path: 'tools.disabled[1]', line: 5 });
    expect(text.slice(d!.from, d!.to)).toBe('Curl');
  });

  it('reports YAML syntax errors at their position', () => {
    const text = 'version: 1\ncommands: [unclosed\n';
    const [d] = diagnosePolicy(text);
    expect(d!.message).toMatch(/^line \d+, column \d+: /);
    expect(d!.line).toBeGreaterThanOrEqual(2);
  });

  it('refuses an alias bomb without expanding it', () => {
    const bomb = [
      'version: 1',
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]',
      'c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]',
      'd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]',
      '',
    ].join('\n');
    expect(diagnosePolicy(bomb).map((d) => d.message)).toEqual([expect.stringContaining('aliases')]);
  });

  it('refuses a document that is not a mapping, and a missing version', () => {
    expect(diagnosePolicy('- a\n- b\n')[0]!.message).toContain('mapping');
    expect(diagnosePolicy('commands:\n  default: ask\n')[0]!.path).toBe('version');
  });

  it('says exactly what the library says, in its order of paths', () => {
    const text = 'version: 2\ncommands:\n  free: [""]\n  reapproval: sometimes\nexecution: { sessionMaxActions: -1 }\n';
    const shown = diagnosePolicy(text).map(({ path, message }) => ({ path, message }));
    expect(new Set(shown.map((d) => JSON.stringify(d)))).toEqual(new Set(checkPolicy(text).map((d) => JSON.stringify(d))));
    for (const d of diagnosePolicy(text)) expect(d.to).toBeGreaterThan(d.from);
  });
});
