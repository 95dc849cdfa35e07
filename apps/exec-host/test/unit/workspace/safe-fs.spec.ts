import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ExecHostError } from '../../../src/errors';
import { WorkspaceFs } from '../../../src/workspace/safe-fs';

/**
 * The race a sandbox can play against host-side file operations: a path checked as a directory is
 * swapped for a symbolic link to the host before it is opened. The check is simulated as passing;
 * what must hold is the verification of the opened descriptor.
 */
describe('WorkspaceFs', () => {
  let base: string;
  let root: string;
  let outside: string;
  let files: WorkspaceFs;

  beforeEach(() => {
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'safe-fs-'));
    root = path.join(base, 'work');
    outside = path.join(base, 'host');
    fs.mkdirSync(path.join(root, 'dir'), { recursive: true });
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(root, 'dir/a.txt'), 'inside\n');
    fs.writeFileSync(path.join(outside, 'a.txt'), 'host secret\n');
    files = new WorkspaceFs(root);
  });
  afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

  function swapAfterCheck() {
    // The real check runs, then the sandbox swaps dir for a link before the open.
    const original = (files as unknown as { precheck: (rel: string) => void }).precheck.bind(files);
    jest.spyOn(files as unknown as { precheck: (rel: string) => void }, 'precheck').mockImplementation((rel: string) => {
      original(rel);
      fs.rmSync(path.join(root, 'dir'), { recursive: true });
      fs.symlinkSync(outside, path.join(root, 'dir'));
    });
  }

  function refusal(fn: () => unknown): ExecHostError {
    try {
      fn();
    } catch (e) {
      if (e instanceof ExecHostError) return e;
      throw e;
    }
    throw new Error('expected a refusal');
  }

  it('reads inside the working copy', () => {
    expect(files.readFile('dir/a.txt', 1024).content.toString()).toBe('inside\n');
  });

  it('refuses a read whose directory was swapped for a link after the check', () => {
    swapAfterCheck();
    const e = refusal(() => files.readFile('dir/a.txt', 1024));
    expect(e.code).toBe('outside_working_copy');
    expect(e.message).toMatch(/resolves outside the working copy/);
  });

  it('refuses a write whose directory was swapped for a link after the check, and writes nothing on the host', () => {
    swapAfterCheck();
    const e = refusal(() => files.writeFile('dir/new.txt', Buffer.from('x'), 0o644));
    expect(e.code).toBe('outside_working_copy');
    expect(fs.readdirSync(outside)).toEqual(['a.txt']);
  });

  it('refuses a removal through a swapped directory and removes nothing on the host', () => {
    swapAfterCheck();
    expect(refusal(() => files.removeFile('dir/a.txt')).code).toBe('outside_working_copy');
    expect(fs.readFileSync(path.join(outside, 'a.txt'), 'utf8')).toBe('host secret\n');
  });

  it('refuses a symbolic link as the last component, and one in the middle pointing out', () => {
    fs.symlinkSync(path.join(outside, 'a.txt'), path.join(root, 'link'));
    fs.symlinkSync(outside, path.join(root, 'out'));
    expect(refusal(() => files.readFile('link', 1024)).code).toBe('outside_working_copy');
    expect(refusal(() => files.readFile('out/a.txt', 1024)).message).toMatch(/outside the working copy/);
    expect(refusal(() => files.writeFile('out/b.txt', Buffer.from('x'), 0o644)).code).toBe('outside_working_copy');
    expect(fs.existsSync(path.join(outside, 'b.txt'))).toBe(false);
  });

  it('follows a link that stays inside for directories, and creates missing directories', () => {
    fs.symlinkSync('dir', path.join(root, 'alias'));
    expect(files.readFile('alias/a.txt', 1024).content.toString()).toBe('inside\n');
    files.writeFile('x/y/z.txt', Buffer.from('deep'), 0o644);
    expect(fs.readFileSync(path.join(root, 'x/y/z.txt'), 'utf8')).toBe('deep');
  });

  it('says what is wrong with missing files, directories and sizes', () => {
    expect(refusal(() => files.readFile('nope.txt', 1024)).code).toBe('file_not_found');
    expect(refusal(() => files.readFile('dir', 1024)).code).toBe('not_a_file');
    expect(refusal(() => files.readFile('dir/a.txt', 3)).code).toBe('file_too_large');
    expect(refusal(() => files.relative('../x')).code).toBe('outside_working_copy');
  });
});
