import type { PolicyVersionView } from '@lemniscate/contracts';
import { parse } from 'yaml';
import { runtimeOf, STARTER, withRuntime } from '../../../src/policy/text';

const version = (sourceText: string | null, document: unknown): PolicyVersionView =>
  ({ id: 'v', projectId: 'p', version: 3, sourceText, document, comment: '', authorId: null, authorEmail: null, createdAt: '2026-12-01T00:00:00.000Z' }) as unknown as PolicyVersionView;

describe('the sandbox runtime, as the policy says it', () => {
  const text = '# Our policy\nversion: 1\ncommands:\n  default: ask # ask for anything unnamed\n  free:\n    - npm test\n';
  const v = version(text, parse(text));

  it('reads runc when the policy says nothing, and what it says otherwise', () => {
    expect(runtimeOf(null)).toBe('runc');
    expect(runtimeOf(v)).toBe('runc');
    expect(runtimeOf(version(null, { version: 1, sandbox: { runtime: 'runsc' } }))).toBe('runsc');
  });

  it('changes only sandbox.runtime: every comment and line of the version in force is kept', () => {
    const next = withRuntime(v, 'runsc')!;
    expect(next.startsWith(text)).toBe(true);
    expect(parse(next)).toEqual({ ...parse(text), sandbox: { runtime: 'runsc' } });
    const back = withRuntime(version(next, parse(next)), 'runc')!;
    expect(parse(back).sandbox).toEqual({ runtime: 'runc' });
    expect(back).toContain('# ask for anything unnamed');
  });

  it('publishes nothing when the policy already asks for that runtime (runc by default)', () => {
    expect(withRuntime(v, 'runc')).toBeNull();
    expect(withRuntime(version(null, { version: 1, sandbox: { runtime: 'runsc' } }), 'runsc')).toBeNull();
  });

  it('with no policy yet, starts from the starter policy', () => {
    expect(parse(withRuntime(null, 'runsc')!)).toEqual({ ...parse(STARTER), sandbox: { runtime: 'runsc' } });
  });
});
