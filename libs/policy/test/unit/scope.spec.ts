import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { lexicalScope, resolveInScope } from '../../src/scope';

describe('resolveInScope (real temporary directory)', () => {
  let base: string;
  let root: string;
  let outside: string;

  beforeAll(async () => {
    base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'lemni-scope-')));
    root = path.join(base, 'project');
    outside = path.join(base, 'outside');
    await fs.mkdir(path.join(root, 'src'), { recursive: true });
    await fs.mkdir(outside);
    await fs.writeFile(path.join(root, 'src', 'a.ts'), 'a');
    await fs.writeFile(path.join(outside, 'secret.txt'), 's');
    await fs.symlink(outside, path.join(root, 'escape'));
    await fs.symlink(path.join(outside, 'secret.txt'), path.join(root, 'secret-link'));
    await fs.symlink(path.join(root, 'src'), path.join(root, 'src-link'));
    await fs.symlink(path.join(outside, 'missing.txt'), path.join(root, 'dangling'));
    await fs.symlink(path.join(root, 'loop-b'), path.join(root, 'loop-a'));
    await fs.symlink(path.join(root, 'loop-a'), path.join(root, 'loop-b'));
  });

  afterAll(async () => {
    await fs.rm(base, { recursive: true, force: true });
  });

  it('resolves an existing file inside the root', async () => {
    await expect(resolveInScope(root, 'src/a.ts', fs)).resolves.toEqual({ ok: true, path: path.join(root, 'src', 'a.ts'), relative: 'src/a.ts', exists: true });
  });

  it('judges a file to be created on its path', async () => {
    await expect(resolveInScope(root, 'src/new/deep/b.ts', fs)).resolves.toEqual({ ok: true, path: path.join(root, 'src/new/deep/b.ts'), relative: 'src/new/deep/b.ts', exists: false });
  });

  it('follows a symbolic link that stays inside', async () => {
    await expect(resolveInScope(root, 'src-link/a.ts', fs)).resolves.toMatchObject({ ok: true, relative: 'src/a.ts' });
  });

  it('refuses .. that leaves the root', async () => {
    const r = await resolveInScope(root, '../outside/secret.txt', fs);
    expect(r).toMatchObject({ ok: false, rule: 'scope.outside' });
  });

  it('refuses an absolute path outside', async () => {
    await expect(resolveInScope(root, '/etc/passwd', fs)).resolves.toMatchObject({ ok: false, rule: 'scope.outside' });
  });

  it('refuses a symbolic link to a file outside, saying where it leads', async () => {
    const r = await resolveInScope(root, 'secret-link', fs);
    expect(r).toMatchObject({ ok: false, rule: 'scope.outside' });
    if (!r.ok) expect(r.reason).toContain('symbolic link');
  });

  it('refuses a new file under a linked directory outside', async () => {
    await expect(resolveInScope(root, 'escape/new.txt', fs)).resolves.toMatchObject({ ok: false, rule: 'scope.outside' });
  });

  it('refuses a dangling link, whose write would land outside', async () => {
    const r = await resolveInScope(root, 'dangling', fs);
    expect(r).toMatchObject({ ok: false, rule: 'scope.outside' });
    if (!r.ok) expect(r.reason).toContain('does not exist');
  });

  it('refuses a loop of links', async () => {
    const r = await resolveInScope(root, 'loop-a', fs);
    expect(r).toMatchObject({ ok: false, rule: 'scope.invalid' });
    if (!r.ok) expect(r.reason).toContain('loop');
  });

  it('refuses a path that goes through a file as if it were a directory', async () => {
    const r = await resolveInScope(root, 'src/a.ts/x', fs);
    expect(r).toMatchObject({ ok: false, rule: 'scope.invalid' });
    if (!r.ok) expect(r.reason).toContain('ENOTDIR');
  });

  it('refuses empty paths and NUL bytes', async () => {
    await expect(resolveInScope(root, '', fs)).resolves.toMatchObject({ ok: false, rule: 'scope.invalid' });
    await expect(resolveInScope(root, 'a\0b', fs)).resolves.toMatchObject({ ok: false, rule: 'scope.invalid' });
  });

  it('refuses a root that does not exist', async () => {
    await expect(resolveInScope(path.join(base, 'nope'), 'a', fs)).resolves.toMatchObject({ ok: false, rule: 'scope.invalid' });
  });
});

describe('lexicalScope', () => {
  it.each([
    ['src/a.ts', 'src/a.ts'],
    ['./src/../b.ts', 'b.ts'],
    ['.', '.'],
  ])('%s stays inside as %s', (p, rel) => {
    expect(lexicalScope(p)).toEqual({ ok: true, relative: rel });
  });

  it.each(['..', '../a', 'a/../../b', '/etc/passwd'])('%s is outside', (p) => {
    expect(lexicalScope(p)).toMatchObject({ ok: false, rule: 'scope.outside' });
  });
});
