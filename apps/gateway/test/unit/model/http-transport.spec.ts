import { backoffDelay, parseRetryAfter } from '../../../src/model/http-transport';
import { describeJsonError, parseToolArguments } from '../../../src/model/tool-arguments';
import { EventClass } from '@lemniscate/contracts';
import { MODEL_ERROR_CODES, ModelError, excerpt, modelFailureClass, redact } from '../../../src/model/model.errors';

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');

  it.each([
    [{ 'retry-after': '3' }, 3000],
    [{ 'retry-after': ' 0 ' }, 0],
    [{ 'retry-after-ms': '250' }, 250],
    [{ 'retry-after-ms': '250', 'retry-after': '9' }, 250],
    [{ 'retry-after': 'Thu, 01 Jan 2026 00:00:05 GMT' }, 5000],
    [{ 'retry-after': 'Wed, 31 Dec 2025 23:59:00 GMT' }, 0],
    [{ 'retry-after': 'soon' }, undefined],
    [{ 'retry-after': '-4' }, undefined],
    [{}, undefined],
  ])('%j → %s ms', (headers, expected) => {
    expect(parseRetryAfter(new Headers(headers), now)).toBe(expected);
  });
});

describe('backoffDelay', () => {
  const settings = { initialBackoffMs: 100, maxBackoffMs: 1000 };

  it('doubles each attempt, with jitter between half and all of the step, capped at the maximum', () => {
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffDelay(a, { ...settings, random: () => 0 }))).toEqual([50, 100, 200, 400, 500, 500]);
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffDelay(a, { ...settings, random: () => 0.999999 }))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it('varies between calls with the real random source', () => {
    const delays = new Set(Array.from({ length: 50 }, () => backoffDelay(4, settings)));
    expect(delays.size).toBeGreaterThan(1);
    for (const d of delays) {
      expect(d).toBeGreaterThanOrEqual(400);
      expect(d).toBeLessThanOrEqual(800);
    }
  });
});

describe('parseToolArguments', () => {
  it('accepts an object and treats empty text as no arguments', () => {
    expect(parseToolArguments('c1', 'Read', ' {"path":"a"} ')).toEqual({ id: 'c1', name: 'Read', arguments: { path: 'a' } });
    expect(parseToolArguments('c2', 'List', '')).toEqual({ id: 'c2', name: 'List', arguments: {} });
  });

  it.each([
    ['"ls"', 'the arguments must be a JSON object, not string'],
    ['null', 'the arguments must be a JSON object, not null'],
    ['42', 'the arguments must be a JSON object, not number'],
    ['{"a":1', "the arguments are not valid JSON (expected ',' or '}' after property value at line 1, column 7)"],
    ['{"a":', 'the arguments are not valid JSON (it ends too early)'],
  ])('reports %s', (raw, reason) => {
    expect(parseToolArguments('c', 'Bash', raw)).toEqual({ id: 'c', name: 'Bash', rawArguments: raw, reason });
  });

  it('bounds what it keeps of a huge malformed argument text', () => {
    const raw = `{"x":"${'a'.repeat(10_000)}`;
    const result = parseToolArguments('c', 'Write', raw);
    expect('rawArguments' in result && result.rawArguments.length).toBe(2001);
  });
});

describe('describeJsonError', () => {
  it('never repeats the text it failed on', () => {
    const text = '{"token": "abc-secret-value" oops}';
    let error: unknown;
    try {
      JSON.parse(text);
    } catch (e) {
      error = e;
    }
    expect(describeJsonError(error, text)).not.toContain('secret');
  });
});

describe('redact and excerpt', () => {
  it('removes every occurrence of each secret and ignores values too short to be keys', () => {
    expect(redact('a sk-12345678 b sk-12345678', ['sk-12345678', 'ab', undefined])).toBe('a [redacted] b [redacted]');
  });

  it('flattens whitespace and cuts long text', () => {
    expect(excerpt('a\n\n b', 10)).toBe('a b');
    expect(excerpt('x'.repeat(20), 10)).toBe(`${'x'.repeat(10)}…`);
  });
});

describe('modelFailureClass', () => {
  it('maps every model error code to an event class the contracts accept', () => {
    for (const code of MODEL_ERROR_CODES) {
      const cls = modelFailureClass(new ModelError(code, 'x'));
      expect(EventClass.safeParse(cls).success).toBe(true);
      expect(cls).toBe(code === 'model_timeout' ? 'model_timeout' : 'model_error');
    }
  });
});
