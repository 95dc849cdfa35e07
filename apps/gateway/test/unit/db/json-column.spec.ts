import fc from 'fast-check';
import { toStorableJson } from '../../../src/db/json-column';

describe('toStorableJson', () => {
  it('replaces U+0000 and lone surrogates with U+FFFD, in values and keys', () => {
    expect(JSON.parse(toStorableJson({ out: 'a\u0000b', ['k\u0000']: '\uD800x', pair: '\u{1F600}' }))).toEqual({ out: 'a\uFFFDb', 'k\uFFFD': '\uFFFDx', pair: '\u{1F600}' });
  });

  it('leaves text that merely looks like an escape alone', () => {
    expect(JSON.parse(toStorableJson({ literal: '\\u0000', both: '\\\u0000' }))).toEqual({ literal: '\\u0000', both: '\\\uFFFD' });
  });

  it('changes nothing else', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const clean = JSON.parse(JSON.stringify(value, (_k, v: unknown) => (typeof v === 'string' ? v.replace(/\u0000/g, '') : v))) as unknown;
        expect(toStorableJson(clean)).toBe(JSON.stringify(clean).replace(/\\ud[89a-f][0-9a-f]{2}/gi, '\\ufffd'));
      }),
    );
  });

  it('refuses undefined', () => {
    expect(() => toStorableJson(undefined)).toThrow('A JSON column cannot hold undefined.');
  });
});
