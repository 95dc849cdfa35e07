import fc from 'fast-check';
import { canonicalJson } from '../../src/canonical-json';
import { EXECUTION_DEFAULTS, resolveExecutionConfig } from '../../src/execution-config';
import { LOOP_BLOCKED_MESSAGE, LoopDetector, type ToolCall } from '../../src/loop-detector';

const bash = (command: string): ToolCall => ({ name: 'Bash', arguments: { command } });

describe('LoopDetector', () => {
  it('blocks the 4th identical call in a row with the default threshold', () => {
    const detector = LoopDetector.forMainSession(EXECUTION_DEFAULTS);
    expect([1, 2, 3].map(() => detector.observe(bash('npm test')).blocked)).toEqual([false, false, false]);
    const fourth = detector.observe(bash('npm test'));
    expect(fourth).toEqual({
      blocked: true,
      repeated: { name: 'Bash', arguments: { command: 'npm test' }, repetitions: 4 },
      messageToModel: 'blocked for repetition, do not retry: Bash {"command":"npm test"} was proposed 4 times in a row.',
      handBack: 'Stopped by loop detection: the agent proposed Bash {"command":"npm test"} 4 times in a row with the same arguments; the last call did not run.',
    });
    expect(LOOP_BLOCKED_MESSAGE).toBe('blocked for repetition, do not retry');
  });

  it('keeps blocking while the same call keeps coming', () => {
    const detector = LoopDetector.forMainSession(EXECUTION_DEFAULTS);
    for (let i = 0; i < 3; i++) detector.observe(bash('ls'));
    expect(detector.observe(bash('ls')).blocked).toBe(true);
    const fifth = detector.observe(bash('ls'));
    expect(fifth.blocked && fifth.repeated.repetitions).toBe(5);
  });

  it('resets when a different call comes in between', () => {
    const detector = LoopDetector.forMainSession(EXECUTION_DEFAULTS);
    for (let i = 0; i < 3; i++) expect(detector.observe(bash('npm test')).blocked).toBe(false);
    expect(detector.observe(bash('git diff')).blocked).toBe(false);
    for (let i = 0; i < 3; i++) expect(detector.observe(bash('npm test')).blocked).toBe(false);
    expect(detector.observe(bash('npm test')).blocked).toBe(true);
  });

  it('treats the same arguments in another key order as the same call', () => {
    const detector = LoopDetector.forMainSession(EXECUTION_DEFAULTS);
    detector.observe({ name: 'Search', arguments: { pattern: 'x', path: 'src' } });
    detector.observe({ name: 'Search', arguments: { path: 'src', pattern: 'x' } });
    detector.observe({ name: 'Search', arguments: { pattern: 'x', path: 'src' } });
    expect(detector.observe({ name: 'Search', arguments: { path: 'src', pattern: 'x' } }).blocked).toBe(true);
  });

  it('tells apart calls that differ only in the tool name or in one argument', () => {
    const detector = LoopDetector.forMainSession(EXECUTION_DEFAULTS);
    const calls: ToolCall[] = [
      { name: 'Read', arguments: { path: 'a' } },
      { name: 'List', arguments: { path: 'a' } },
      { name: 'Read', arguments: { path: 'a', extra: 1 } },
      { name: 'Read', arguments: { path: 'a' } },
    ];
    for (let round = 0; round < 5; round++) for (const call of calls) expect(detector.observe(call).blocked).toBe(false);
  });

  it('follows toolLoopThreshold', () => {
    const detector = LoopDetector.forMainSession(resolveExecutionConfig({ env: { LEMNISCATE_SESSION_TOOL_LOOP_THRESHOLD: '1' } }).config);
    expect(detector.observe(bash('make')).blocked).toBe(false);
    expect(detector.observe(bash('make')).blocked).toBe(true);
  });

  it('is disabled only by an explicit toolLoopDetection: false', () => {
    const off = LoopDetector.forMainSession(resolveExecutionConfig({ config: [{ location: 'policy', values: { toolLoopDetection: false } }] }).config);
    expect(off.enabled).toBe(false);
    for (let i = 0; i < 20; i++) expect(off.observe(bash('ls')).blocked).toBe(false);
    expect(LoopDetector.forMainSession(EXECUTION_DEFAULTS).enabled).toBe(true);
  });

  it('stays on in a child even when the configuration turns it off', () => {
    const config = resolveExecutionConfig({ config: [{ location: 'policy', values: { toolLoopDetection: false } }] }).config;
    const child = LoopDetector.forChild(config);
    expect(child.enabled).toBe(true);
    for (let i = 0; i < 3; i++) child.observe(bash('ls'));
    expect(child.observe(bash('ls')).blocked).toBe(true);
  });

  it('refuses a threshold that would block everything', () => {
    expect(() => new LoopDetector(0, true)).toThrow('toolLoopThreshold must be a whole number, 1 or more; got 0.');
  });

  it('blocks exactly the calls past the threshold in any sequence (model check)', () => {
    const call = fc.record({ name: fc.constantFrom('Read', 'Bash'), arguments: fc.record({ path: fc.constantFrom('a', 'b') }) });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(call, { maxLength: 40 }), (threshold, calls) => {
        const detector = new LoopDetector(threshold, true);
        let streak = 0;
        let previous: string | null = null;
        for (const c of calls) {
          const key = c.name + canonicalJson(c.arguments);
          streak = key === previous ? streak + 1 : 1;
          previous = key;
          if (detector.observe(c).blocked !== streak > threshold) return false;
        }
        return true;
      }),
    );
  });
});

describe('canonicalJson', () => {
  it('ignores key order at every depth and keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, 1], c: null } })).toBe('{"a":{"c":null,"d":[2,1]},"b":1}');
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
  });

  it('keeps a "__proto__" key sent in JSON as an ordinary key', () => {
    const parsed = JSON.parse('{"__proto__":{"x":1},"a":1}') as unknown;
    expect(canonicalJson(parsed)).toBe('{"__proto__":{"x":1},"a":1}');
    expect(canonicalJson(parsed)).not.toBe(canonicalJson({ a: 1 }));
  });

  it('encodes undefined as JSON does and refuses a value that contains itself', () => {
    expect(canonicalJson(undefined)).toBe('null');
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(() => canonicalJson(loop)).toThrow('contains itself');
  });

  it('gives the same text exactly when the JSON values are equal', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        const same = canonicalJson(a) === canonicalJson(b);
        const reparsed = (v: unknown) => canonicalJson(JSON.parse(JSON.stringify(v)));
        expect(canonicalJson(a)).toBe(reparsed(a));
        return same === isDeepStrictJsonEqual(a, b);
      }),
    );
  });

  it('does not depend on the order keys were written in', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (object) => {
        const reversed = Object.fromEntries(Object.entries(object).reverse());
        return canonicalJson(object) === canonicalJson(reversed);
      }),
    );
  });
});

/** Structural equality under JSON semantics (-0 and 0 are both "0"). */
function isDeepStrictJsonEqual(a: unknown, b: unknown): boolean {
  if (typeof a === 'number' && typeof b === 'number') return JSON.stringify(a) === JSON.stringify(b);
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => isDeepStrictJsonEqual(x, b[i]));
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  return ka.length === kb.length && ka.every((k, i) => k === kb[i] && isDeepStrictJsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
