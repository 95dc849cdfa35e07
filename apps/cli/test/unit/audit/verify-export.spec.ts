import { createHash } from 'node:crypto';
import { AUDIT_GENESIS_HASH, auditEntryText } from '@lemniscate/contracts';
import { verifyExportLines } from '../../../src/audit/verify-export';

/*
 * The offline verifier over a chain written as the gateway exports it (apps/gateway/src/audit/audit-export.ts's
 * jsonlLine: the payload's canonical text byte for byte, then prevHash, hash and the actor's identity).
 * Every field of every entry altered, every entry removed, every neighbouring pair swapped: each is
 * refused naming the entry; the end-to-end test (test/e2e/sessions.e2e.ts) runs it on a real export.
 */
interface Entry {
  seq: number;
  at: string;
  actor: string;
  kind: string;
  projectId: string | null;
  sessionId: string | null;
  payload: string;
  prevHash: string;
  hash: string;
}

function chain(n: number): Entry[] {
  const out: Entry[] = [];
  let prev = AUDIT_GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const e = {
      seq,
      at: new Date(Date.UTC(2026, 11, 1, 10, 0, seq)).toISOString(),
      actor: seq % 2 ? 'user:u1' : 'agent:general',
      kind: seq % 3 ? 'tool_call.proposed' : 'policy.decision',
      projectId: seq % 4 ? 'p1' : null,
      sessionId: seq % 5 ? 's1' : null,
      payload: `{"arguments":{"command":"echo ${seq} \\"quoted\\", \\"prevHash\\":\\"x\\""},"nested":{"a":1,"prevHash":"not-it"},"seq":${seq}}`,
    };
    const hash = createHash('sha256')
      .update(prev)
      .update(auditEntryText({ ...e, at: new Date(e.at) }))
      .digest('hex');
    out.push({ ...e, prevHash: prev, hash });
    prev = hash;
  }
  return out;
}

const line = (e: Entry) =>
  `{"seq":${e.seq},"at":${JSON.stringify(e.at)},"actor":${JSON.stringify(e.actor)},"kind":${JSON.stringify(e.kind)},"projectId":${JSON.stringify(e.projectId)},"sessionId":${JSON.stringify(e.sessionId)},"payload":${e.payload},"prevHash":${JSON.stringify(e.prevHash)},"hash":${JSON.stringify(e.hash)},"actorIdentity":${e.actor === 'user:u1' ? '{"email":"a@x","displayName":"A"}' : 'null'}}`;

const N = 8;
const entries = chain(N);
const lines = entries.map(line);

it('an intact export verifies, with its head', async () => {
  const r = await verifyExportLines(lines);
  expect(r).toEqual({ ok: true, entries: N, firstSeq: 1, lastSeq: N, lastHash: entries[N - 1]?.hash, gaps: 0, anchorChecked: null, problem: null });
  const anchored = await verifyExportLines(lines, { anchor: { seq: 5, hash: entries[4]?.hash as string } });
  expect(anchored.anchorChecked).toBe(true);
});

const ALTER: Record<string, (e: Entry) => Entry> = {
  at: (e) => ({ ...e, at: new Date(Date.parse(e.at) + 1).toISOString() }),
  actor: (e) => ({ ...e, actor: 'user:mallory' }),
  kind: (e) => ({ ...e, kind: 'auth.login' }),
  projectId: (e) => ({ ...e, projectId: 'p2' }),
  sessionId: (e) => ({ ...e, sessionId: 's2' }),
  payload: (e) => ({ ...e, payload: e.payload.replace('echo', 'curl') }),
  prevHash: (e) => ({ ...e, prevHash: 'f'.repeat(64) }),
  hash: (e) => ({ ...e, hash: 'e'.repeat(64) }),
};

describe.each(Object.keys(ALTER))('%s altered', (field) => {
  it.each(entries.map((e) => [e.seq]))('in entry %i: refused, naming it', async (seq) => {
    const altered = entries.map((e) => (e.seq === seq ? (ALTER[field] as (e: Entry) => Entry)(e) : e)).map(line);
    const r = await verifyExportLines(altered);
    expect(r.ok).toBe(false);
    // A changed hash breaks its own entry; a changed content breaks its own hash.
    expect(r.problem).toMatch(new RegExp(`^Entry ${seq} \\(line ${seq}\\) (was altered|does not start the chain)`));
  });
});

it.each(entries.map((e) => [e.seq]))('entry %i removed: refused (or, for the last, caught by the anchor)', async (seq) => {
  const r = await verifyExportLines(
    lines.filter((_, i) => i !== seq - 1),
    { anchor: { seq: N, hash: entries[N - 1]?.hash as string } },
  );
  expect(r.ok).toBe(false);
  if (seq === 1) expect(r.problem).toMatch(/^Entry 2 \(line 1\)/);
  else if (seq === N) expect(r.problem).toBe(`The file does not hold entry ${N}, the anchor's: export a range that includes it to check it.`);
  else
    expect(r.problem).toBe(
      `Entry ${seq + 1} (line ${seq}) follows entry ${seq - 1}: entry ${seq} is missing (removed, or the export was filtered: pass --filtered to check a filtered export entry by entry).`,
    );
});

it.each(entries.slice(0, -1).map((e) => [e.seq]))('entries %i and the next swapped: refused at the first of the two lines', async (seq) => {
  const swapped = [...lines];
  [swapped[seq - 1], swapped[seq]] = [swapped[seq] as string, swapped[seq - 1] as string];
  const r = await verifyExportLines(swapped);
  expect(r.ok).toBe(false);
  // The later entry arrives first: entry `seq` is missing where it should be.
  expect(r.problem).toMatch(new RegExp(`^Entry ${seq + 1} \\(line ${seq}\\) (follows entry ${seq - 1}|is the first in the file): entry ${seq} is missing`));
  // Filtered, the gap is allowed, and the order is what gives it away.
  const filtered = await verifyExportLines(swapped, { filtered: true });
  expect(filtered.problem).toBe(`Entry ${seq} (line ${seq + 1}) comes after entry ${seq + 1}: the entries were reordered or repeated.`);
});

it('an entry repeated is refused', async () => {
  const r = await verifyExportLines([...lines.slice(0, 4), lines[3] as string, ...lines.slice(4)]);
  expect(r.problem).toBe('Entry 4 (line 5) comes after entry 4: the entries were reordered or repeated.');
});

it('a filtered export verifies entry by entry with its gaps counted; without --filtered a gap is refused', async () => {
  const picked = lines.filter((_, i) => i % 3 === 0);
  expect((await verifyExportLines(picked, { filtered: true })).gaps).toBe(picked.length - 1);
  expect((await verifyExportLines(picked)).ok).toBe(false);
});

it('a chain rewritten after an entry and re-hashed is consistent in itself, and caught by the anchor', async () => {
  const anchor = { seq: N, hash: entries[N - 1]?.hash as string };
  const forged: Entry[] = [];
  let prev = AUDIT_GENESIS_HASH;
  for (const e of entries) {
    const content = e.seq === 3 ? { ...e, actor: 'user:mallory' } : e;
    const hash = createHash('sha256')
      .update(prev)
      .update(auditEntryText({ ...content, at: new Date(content.at) }))
      .digest('hex');
    forged.push({ ...content, prevHash: prev, hash });
    prev = hash;
  }
  expect((await verifyExportLines(forged.map(line))).ok).toBe(true);
  expect((await verifyExportLines(forged.map(line), { anchor })).problem).toBe(`Entry ${N} (line ${N}) is not the anchor's entry: the log was rewritten since the anchor was taken.`);
});

it.each([
  ['not JSON', ['{"seq":1,'], 'Line 1 is not JSON: the file is not an audit export in JSON lines, or it was cut.'],
  ['not an entry', ['{"hello":"world"}'], 'Line 1 has no entry number ("seq"): it is not an audit entry as exported.'],
  ['empty', ['', '  '], 'The file holds no audit entry.'],
  ['a CSV file', ['seq,at,actor'], 'Line 1 is not JSON: the file is not an audit export in JSON lines, or it was cut.'],
])('%s: refused with a sentence', async (_what, input, problem) => {
  expect(await verifyExportLines(input)).toMatchObject({ ok: false, problem });
});
