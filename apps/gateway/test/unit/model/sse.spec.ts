import fc from 'fast-check';
import { SseDecoder, type SseEvent } from '../../../src/model/sse';

function decodeInPieces(text: string, cuts: number[]): SseEvent[] {
  const bytes = Buffer.from(text, 'utf8');
  const decoder = new SseDecoder();
  const events: SseEvent[] = [];
  let start = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    events.push(...decoder.push(bytes.subarray(start, cut)));
    start = cut;
  }
  events.push(...decoder.push(bytes.subarray(start)));
  events.push(...decoder.end());
  return events;
}

describe('SseDecoder', () => {
  const stream = [
    ': keep-alive comment',
    'event: content_block_delta',
    'data: {"text":"héllo ✓"}',
    '',
    'data: first line',
    'data:second line',
    'id: 7',
    'retry: 1000',
    '',
    '',
    'event: ignored-without-data',
    '',
    'data',
    '',
    'data: [DONE]',
    '',
    '',
  ];
  const expected: SseEvent[] = [
    { event: 'content_block_delta', data: '{"text":"héllo ✓"}' },
    { event: 'message', data: 'first line\nsecond line' },
    { event: 'message', data: '' },
    { event: 'message', data: '[DONE]' },
  ];

  it.each([
    ['LF', '\n'],
    ['CRLF', '\r\n'],
    ['CR', '\r'],
  ])('parses fields, comments and multi-line data with %s line ends', (_name, eol) => {
    expect(decodeInPieces(stream.join(eol), [])).toEqual(expected);
  });

  it('gives the same events however the bytes are cut, even inside a line break or a character', () => {
    fc.assert(
      fc.property(fc.constantFrom('\n', '\r\n', '\r'), fc.array(fc.nat(), { maxLength: 30 }), (eol, rawCuts) => {
        const text = stream.join(eol);
        const length = Buffer.byteLength(text);
        expect(
          decodeInPieces(
            text,
            rawCuts.map((c) => c % (length + 1)),
          ),
        ).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('a CRLF cut between its two bytes by an empty chunk is still one line break', () => {
    // Found by the property above (seed -1448478340): an empty piece between the CR and the LF.
    const text = stream.join('\r\n');
    const cr = Buffer.byteLength(text.slice(0, text.indexOf('\r\ndata:second') + 1));
    expect(decodeInPieces(text, [cr, cr])).toEqual(expected);
  });

  it('byte by byte', () => {
    const text = stream.join('\r\n');
    const cuts = Array.from({ length: Buffer.byteLength(text) }, (_, i) => i);
    expect(decodeInPieces(text, cuts)).toEqual(expected);
  });

  it('drops a line cut off without its line break', () => {
    expect(decodeInPieces('data: complete\n\ndata: cut off', [])).toEqual([{ event: 'message', data: 'complete' }]);
  });

  it('still delivers complete data lines when the server closes without the final blank line', () => {
    expect(decodeInPieces('data: one\n\ndata: [DONE]\n', [])).toEqual([
      { event: 'message', data: 'one' },
      { event: 'message', data: '[DONE]' },
    ]);
  });
});
