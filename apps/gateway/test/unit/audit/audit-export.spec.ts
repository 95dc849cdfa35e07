import { canonicalJson, chainHash, GENESIS_HASH, type StoredEntry } from '../../../src/audit/audit-chain';
import { csvField, csvLine, CSV_HEADER, jsonlLine } from '../../../src/audit/audit-export';

function entry(overrides: Partial<StoredEntry> = {}): StoredEntry {
  const base = {
    seq: 1,
    at: new Date('2026-03-04T05:06:07.089Z'),
    actor: 'u1',
    kind: 'session.instruction',
    projectId: 'p1',
    sessionId: null,
    payload: canonicalJson({ text: 'hello' }),
    ...overrides,
  };
  return { prevHash: GENESIS_HASH, hash: chainHash(GENESIS_HASH, base), ...base, ...overrides };
}

describe('csvField', () => {
  it.each([
    ['plain', 'plain'],
    ['a,b', '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ['line\nbreak', '"line\nbreak"'],
    ['cr\rhere', '"cr\rhere"'],
    ['', ''],
  ])('writes %j as %j (RFC 4180)', (value, expected) => {
    expect(csvField(value)).toBe(expected);
  });

  it('leaves null empty and numbers as they are', () => {
    expect(csvField(null)).toBe('');
    expect(csvField(-5)).toBe('-5');
  });

  it.each(['=HYPERLINK("http://x")', '+1', '-cmd', '@SUM(A1)', '\tx'])('defuses a would-be formula %j', (value) => {
    const field = csvField(value);
    const unquoted = field.startsWith('"') ? field.slice(1, -1).replace(/""/g, '"') : field;
    expect(unquoted).toBe(`'${value}`);
  });
});

describe('csvLine', () => {
  it('writes one CRLF-terminated record matching the header', () => {
    const line = csvLine(entry({ payload: canonicalJson({ cmd: 'echo "a,b"\nls' }) }));
    expect(CSV_HEADER.split(',')).toHaveLength(11);
    expect(line).toBe(
      `1,2026-03-04T05:06:07.089Z,u1,session.instruction,p1,,"{""cmd"":""echo \\""a,b\\""\\nls""}",${GENESIS_HASH},${entry({ payload: canonicalJson({ cmd: 'echo "a,b"\nls' }) }).hash},,\r\n`,
    );
    expect(csvLine(entry({}), { email: 'ana@example.com', displayName: 'Ana' }).trimEnd().split(',').slice(-2)).toEqual(['ana@example.com', 'Ana']);
  });
});

describe('jsonlLine', () => {
  it('is one line of JSON carrying the hashed payload text byte for byte', () => {
    const payload = canonicalJson({ b: 'x\u2028y', a: [1, 2.5] });
    const e = entry({ payload });
    const line = jsonlLine(e);
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1)).not.toContain('\n');
    const parsed = JSON.parse(line) as Record<string, unknown>;
    expect(parsed).toEqual({
      seq: 1,
      at: '2026-03-04T05:06:07.089Z',
      actor: 'u1',
      kind: 'session.instruction',
      projectId: 'p1',
      sessionId: null,
      payload: { a: [1, 2.5], b: 'x\u2028y' },
      prevHash: GENESIS_HASH,
      hash: e.hash,
      actorIdentity: null,
    });
    expect(canonicalJson(parsed['payload'])).toBe(payload);
    expect(JSON.parse(jsonlLine(e, { email: 'ana@example.com', displayName: 'Ana' })).actorIdentity).toEqual({ email: 'ana@example.com', displayName: 'Ana' });
  });
});
