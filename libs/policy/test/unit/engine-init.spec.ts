import { runPolicyCommand } from '../../src/cli';
import { decide } from '../../src/decide';
import { LruCache } from '../../src/lru';
import { defaultPolicy } from '../../src/schema';
import { initPolicyEngine, isPolicyEngineReady } from '../../src/shell/parser';

// Jest gives each test file its own module registry, so the engine starts uninitialised here.
describe('policy engine initialisation', () => {
  it('refuses to decide a shell command before initialisation, saying what to do', () => {
    expect(isPolicyEngineReady()).toBe(false);
    expect(() => decide({ name: 'Bash', arguments: { command: 'npm test' } }, defaultPolicy)).toThrow(/await initPolicyEngine\(\)/);
  });

  it('policy explain says the engine is not initialised instead of throwing', () => {
    let stderr = '';
    const code = runPolicyCommand(['explain', 'p.yaml', '--', 'ls'], { stdout: () => undefined, stderr: (s) => (stderr += s), readFile: () => 'version: 1' });
    expect(code).toBe(1);
    expect(stderr).toContain('not initialised');
  });

  it('decides other tools without the parser', () => {
    expect(decide({ name: 'Read', arguments: { path: 'a' } }, defaultPolicy).effect).toBe('allow');
  });

  it('initialises once, however many callers ask at the same time', async () => {
    const first = initPolicyEngine();
    const second = initPolicyEngine();
    expect(second).toBe(first);
    await Promise.all([first, second]);
    expect(isPolicyEngineReady()).toBe(true);
    await expect(initPolicyEngine()).resolves.toBeUndefined();
    expect(decide({ name: 'Bash', arguments: { command: 'npm test' } }, defaultPolicy).effect).toBe('ask');
  });
});

describe('LruCache', () => {
  it('forgets the least recently used entry first', () => {
    const cache = new LruCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    expect(cache.get('a')).toBe(1);
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(1);
    expect(cache.get('c')).toBe(3);
    expect(cache.size).toBe(2);
  });
});
