import { posix } from 'node:path';
import { MAX_LINK_HOPS, resolveWorkspaceLink } from '../../src/symlinks';

/** A working copy as a map of links; everything else is a plain directory or file. */
function tree(links: Record<string, string>) {
  return (rel: string) => links[rel] ?? null;
}

/** Lexical reference for link chains without ".." through links: where the target lands, or null above the root. */
function lexical(linkPath: string, target: string): string | null {
  const joined = posix.normalize(posix.join('/root', posix.dirname(linkPath), target));
  return joined === '/root' ? '' : joined.startsWith('/root/') ? joined.slice('/root/'.length) : null;
}

const DIRS = ['', 'src', 'src/deep', 'a/b/c/d'];

describe('resolveWorkspaceLink (G01: a link out of the working copy is its own class)', () => {
  const absolute = ['/etc/passwd', '/', '/workspace', '/workspace/src/a.ts', '/tmp/x', '//etc', '/proc/self/root'];
  const cases: { link: string; target: string; outside: boolean }[] = [];
  for (const dir of DIRS) {
    const depth = dir === '' ? 0 : dir.split('/').length;
    const link = dir === '' ? 'leak' : `${dir}/leak`;
    for (const target of absolute) cases.push({ link, target, outside: true });
    // Each number of ".." from the link's directory: up to its depth stays inside, one more escapes.
    for (let up = 1; up <= depth + 2; up++) {
      cases.push({ link, target: '../'.repeat(up) + 'etc/passwd', outside: up > depth });
      cases.push({ link, target: Array(up).fill('..').join('/'), outside: up > depth });
      cases.push({ link, target: `./x/${'../'.repeat(up + 1)}etc`, outside: up + 1 > depth + 1 });
    }
    cases.push({ link, target: './a/../../b', outside: depth === 0 });
    cases.push({ link, target: 'file.txt', outside: false });
    cases.push({ link, target: '.', outside: false });
    cases.push({ link, target: 'sub/./x/../y', outside: false });
  }

  it(`refuses every absolute target and every ".." that climbs above the root, and only those (${cases.length} generated cases)`, () => {
    const wrong = cases.filter(({ link, target, outside }) => resolveWorkspaceLink(link, target, tree({ [link]: target })).outside !== outside);
    expect(wrong).toEqual([]);
    // The generator agrees with plain path arithmetic wherever no other link is involved.
    for (const { link, target, outside } of cases.filter((c) => !c.target.startsWith('/'))) expect(lexical(link, target) === null).toBe(outside);
  });

  it('says which step escapes', () => {
    expect(resolveWorkspaceLink('src/x', '/etc/passwd', tree({})).escape).toBe('src/x → /etc/passwd is an absolute path');
    expect(resolveWorkspaceLink('up', '../../..', tree({})).escape).toBe('up → ../../.. climbs above the working copy with ".."');
  });

  it('follows chains through other links: a link to a link that points out is out, at any depth', () => {
    for (let n = 1; n <= 10; n++) {
      const links: Record<string, string> = {};
      for (let i = 0; i < n; i++) links[`l${i}`] = `l${i + 1}`;
      links[`l${n}`] = '/etc/shadow';
      expect(resolveWorkspaceLink('l0', 'l1', tree(links))).toMatchObject({ outside: true });
      links[`l${n}`] = 'src/ok.ts';
      expect(resolveWorkspaceLink('l0', 'l1', tree(links))).toEqual({ outside: false, resolved: 'src/ok.ts', escape: null, loop: false });
    }
  });

  it('resolves ".." after a linked directory from where that link lands, as the kernel does', () => {
    // d → a/b/c: "d/../../.." is a/b/c/../../.. = the root (inside); one more ".." is out.
    const links = { d: 'a/b/c' };
    expect(resolveWorkspaceLink('x', 'd/../../..', tree(links))).toMatchObject({ outside: false, resolved: '' });
    expect(resolveWorkspaceLink('x', 'd/../../../..', tree(links))).toMatchObject({ outside: true });
    // Lexically "d/.." is the root, but through the link it is a/b: both inside.
    expect(resolveWorkspaceLink('x', 'd/..', tree(links))).toMatchObject({ outside: false, resolved: 'a/b' });
    // A directory link that climbs out takes everything under it out.
    expect(resolveWorkspaceLink('x', 'esc/etc/passwd', tree({ esc: '..' }))).toMatchObject({ outside: true });
    expect(resolveWorkspaceLink('src/x', '../esc/inner', tree({ esc: 'src/deep' }))).toMatchObject({ outside: false, resolved: 'src/deep/inner' });
  });

  it('keeps links inside the working copy ordinary, dangling ones included', () => {
    for (const [link, target, resolved] of [
      ['inside', 'src/calc.js', 'src/calc.js'],
      ['src/up', '../README.md', 'README.md'],
      ['src/deep/x', '../../src/deep/y', 'src/deep/y'],
      ['missing', 'does/not/exist', 'does/not/exist'],
      ['root', '.', ''],
    ] as const) {
      expect(resolveWorkspaceLink(link, target, tree({ [link]: target }))).toEqual({ outside: false, resolved, escape: null, loop: false });
    }
  });

  it(`stops a loop after ${MAX_LINK_HOPS} links and does not call it outside`, () => {
    expect(resolveWorkspaceLink('a', 'b', tree({ a: 'b', b: 'a' }))).toEqual({ outside: false, resolved: null, escape: null, loop: true });
    expect(resolveWorkspaceLink('self', 'self', tree({ self: 'self' }))).toMatchObject({ loop: true });
  });
});
