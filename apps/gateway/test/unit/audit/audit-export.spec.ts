import { canonicalJson, chainHash, GENESIS_HASH, type StoredEntry } from '../../../src/audit/audit-chain';
import { csvField, csvLine, CSV_HEADER, flattenPayload, jsonlLine } from '../../../src/audit/audit-export';

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
  it('writes one CRLF-terminated record matching the header, the payload flattened', () => {
    const payload = canonicalJson({ cmd: 'echo "a,b"\nls' });
    const line = csvLine(entry({ payload }));
    expect(CSV_HEADER).toBe('seq,at,actor,actor_email,actor_name,kind,project_id,session_id,tool,command,path,decision,rule,reason,approval_id,answer,exit_code,details,prev_hash,hash\r\n');
    expect(line).toBe(`1,2026-03-04T05:06:07.089Z,u1,,,session.instruction,p1,,,,,,,,,,,"cmd=echo \""a,b\""\nls",${GENESIS_HASH},${entry({ payload }).hash}\r\n`);
    expect(csvLine(entry({}), { email: 'ana@example.com', displayName: 'Ana' }).split(',').slice(3, 5)).toEqual(['ana@example.com', 'Ana']);
  });
});

describe('flattenPayload', () => {
  const empty = { tool: null, command: null, path: null, decision: null, rule: null, reason: null, approval_id: null, answer: null, exit_code: null, details: null };
  it.each([
    [
      'a proposed Bash call',
      { callId: 'c1', seq: 3, name: 'Bash', arguments: { command: 'npm test', timeout_ms: 1000 } },
      { tool: 'Bash', command: 'npm test', details: 'arguments.timeout_ms=1000; callId=c1; seq=3' },
    ],
    ['a proposed Write', { callId: 'c2', name: 'Write', arguments: { path: 'src/a.ts', content: 'x' } }, { tool: 'Write', path: 'src/a.ts', details: 'arguments.content=x; callId=c2' }],
    [
      'a policy decision',
      { callId: 'c1', effect: 'deny', rule: 'commands.forbidden[0]', reason: 'no network', thirdParty: [] },
      { decision: 'deny', rule: 'commands.forbidden[0]', reason: 'no network', details: 'callId=c1; thirdParty=[]' },
    ],
    [
      'an approval answer',
      { approvalId: 'a1', kind: 'command', answer: 'rejected', reason: 'touches CI', rememberCommand: false },
      { approval_id: 'a1', answer: 'rejected', reason: 'touches CI', details: 'kind=command; rememberCommand=false' },
    ],
    ['a result', { callId: 'c1', exitCode: 1, stdoutBytes: 10, stdoutSha256: 'ab' }, { exit_code: 1, details: 'callId=c1; stdoutBytes=10; stdoutSha256=ab' }],
    ['an empty payload', {}, {}],
    ['a name that is not a string is left in details', { name: { first: 'A' } }, { details: 'name.first=A' }],
  ])('%s', (_what, payload, expected) => {
    expect(flattenPayload(canonicalJson(payload))).toEqual({ ...empty, ...expected });
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
