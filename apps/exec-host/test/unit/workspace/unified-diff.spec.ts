import { applyPatch, parsePatch } from 'diff';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { unifiedDiff } from '../../../src/workspace/unified-diff';
import { exclusionMatcher } from '../../../src/workspace/working-copy';
import { DEFAULT_CONTEXT_EXCLUSIONS } from '@lemniscate/contracts';

describe('unifiedDiff', () => {
  const cases: [string, { content: string; mode: string } | null, { content: string; mode: string } | null][] = [
    ['creation', null, { content: 'a\nb\n', mode: '100644' }],
    ['deletion', { content: 'a\nb\n', mode: '100644' }, null],
    ['change in the middle', { content: '1\n2\n3\n4\n5\n6\n7\n8\n9\n', mode: '100644' }, { content: '1\n2\n3\n4\nfive\n6\n7\n8\n9\n', mode: '100644' }],
    ['no newline at the end', { content: 'x\ny', mode: '100644' }, { content: 'x\nz', mode: '100644' }],
    ['insertion only', { content: 'a\nb\nc\nd\ne\n', mode: '100644' }, { content: 'a\nb\nc\nd\ninserted\ne\n', mode: '100644' }],
  ];

  it.each(cases)('%s: jsdiff applies it back', (_name, before, after) => {
    const diff = unifiedDiff('dir/f.txt', before, after);
    const [patch] = parsePatch(diff);
    expect(applyPatch(before?.content ?? '', patch!)).toBe(after?.content ?? '');
  });

  it.each(cases)('%s: git apply accepts it', (_name, before, after) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'udiff-'));
    try {
      fs.mkdirSync(path.join(dir, 'dir'));
      if (before) fs.writeFileSync(path.join(dir, 'dir/f.txt'), before.content);
      fs.writeFileSync(path.join(dir, 'p.diff'), unifiedDiff('dir/f.txt', before, after));
      execFileSync('git', ['apply', '--unsafe-paths', 'p.diff'], { cwd: dir, env: { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: '1', HOME: dir } });
      if (after) expect(fs.readFileSync(path.join(dir, 'dir/f.txt'), 'utf8')).toBe(after.content);
      else expect(fs.existsSync(path.join(dir, 'dir/f.txt'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is empty when nothing changes, and a header alone for a mode change', () => {
    expect(unifiedDiff('a', { content: 'x\n', mode: '100644' }, { content: 'x\n', mode: '100644' })).toBe('');
    expect(unifiedDiff('a', { content: 'x\n', mode: '100644' }, { content: 'x\n', mode: '100755' })).toBe('diff --git a/a b/a\nold mode 100644\nnew mode 100755\n');
  });
});

describe('exclusionMatcher with the default exclusions', () => {
  const excluded = exclusionMatcher(DEFAULT_CONTEXT_EXCLUSIONS);

  it.each([
    '.env',
    'app/.env',
    '.env.production',
    'deploy/server.pem',
    'tls.key',
    'id_rsa',
    'home/.ssh/id_ed25519',
    'config/secrets/db.yml',
    'a/b/secrets/c/d',
    '.npmrc',
    'pkg/.pypirc',
    '.netrc',
    'infra/prod.tfstate',
    'x/.aws/credentials',
    'service-account-prod.json',
  ])('keeps %s out', (p) => {
    expect(excluded(p)).toBe(true);
  });

  it.each(['src/env.ts', 'README.md', 'keys.md', 'src/secretsManager.ts', 'docs/environment.md', 'package.json', '.envoy/config.yaml'])('lets %s in', (p) => {
    expect(excluded(p)).toBe(false);
  });

  it('adds a project glob without dropping the defaults', () => {
    const m = exclusionMatcher([...DEFAULT_CONTEXT_EXCLUSIONS, 'fixtures/customers/**']);
    expect(m('fixtures/customers/a.csv')).toBe(true);
    expect(m('.env')).toBe(true);
  });
});
