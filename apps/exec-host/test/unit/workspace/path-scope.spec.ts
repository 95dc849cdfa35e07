import { isInside, toWorkspaceRelative } from '../../../src/workspace/path-scope';

describe('toWorkspaceRelative', () => {
  it.each([
    ['a.txt', 'a.txt'],
    ['./src/../a.txt', 'a.txt'],
    ['src/', 'src'],
    ['.', '.'],
    ['/workspace', '.'],
    ['/workspace/', '.'],
    ['/workspace/src/x.ts', 'src/x.ts'],
    ['/workspace/src/../x.ts', 'x.ts'],
    ['src\\win.ts', 'src/win.ts'],
  ])('keeps %s inside as %s', (input, rel) => {
    expect(toWorkspaceRelative(input)).toEqual({ ok: true, rel });
  });

  it.each([
    ['..', '"..".'],
    ['../etc/passwd', '"..".'],
    ['src/../../x', '"..".'],
    ['/etc/passwd', 'only paths under /workspace'],
    ['/workspace/../etc/passwd', 'only paths under /workspace'],
    ['/workspacex/a', 'only paths under /workspace'],
    ['/', 'only paths under /workspace'],
  ])('refuses %s with a reason', (input, reasonPart) => {
    const r = toWorkspaceRelative(input);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.reason).toContain('outside the working copy');
      expect(r.reason).toContain(reasonPart);
    }
  });

  it('refuses a NUL byte', () => {
    expect(toWorkspaceRelative('a\0b')).toEqual({ ok: false, reason: 'The path contains a NUL character.' });
  });
});

describe('isInside', () => {
  it('accepts the root and its descendants only', () => {
    expect(isInside('/s/work', '/s/work')).toBe(true);
    expect(isInside('/s/work', '/s/work/a/b')).toBe(true);
    expect(isInside('/s/work', '/s/workspace')).toBe(false);
    expect(isInside('/s/work', '/s')).toBe(false);
    expect(isInside('/s/work', '/etc/passwd')).toBe(false);
  });
});
