import fc from 'fast-check';
import { canonicalJson, CanonicalJsonError, chainHash, ChainVerifier, entryText, GENESIS_HASH, type ChainEntry, type StoredEntry } from '../../../src/audit/audit-chain';

describe('canonicalJson', () => {
  it('sorts keys at every depth and writes no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: true, y: null }], c: 'x' } })).toBe('{"a":{"c":"x","d":[3,{"y":null,"z":true}]},"b":1}');
  });

  it('sorts by UTF-16 code unit, as RFC 8785 does', () => {
    expect(canonicalJson({ é: 1, z: 2, Z: 3, '€': 4, '\u{1F600}': 5 })).toBe('{"Z":3,"z":2,"é":1,"€":4,"\u{1F600}":5}');
  });

  it('drops undefined properties and nulls unrepresentable array items, as JSON.stringify does', () => {
    expect(canonicalJson({ a: undefined, b: [undefined, () => 1] })).toBe('{"b":[null,null]}');
  });

  it('uses toJSON (dates become ISO strings)', () => {
    expect(canonicalJson({ at: new Date('2026-01-02T03:04:05.678Z') })).toBe('{"at":"2026-01-02T03:04:05.678Z"}');
  });

  it.each([
    [{ n: Number.NaN }, /\$\.n is NaN/],
    [{ n: [1, Infinity] }, /\$\.n\[1\] is Infinity/],
    [{ n: 10n }, /\$\.n is a bigint/],
    [undefined, /\$ is a undefined/],
  ])('refuses %p, naming where', (value, message) => {
    expect(() => canonicalJson(value)).toThrow(CanonicalJsonError);
    expect(() => canonicalJson(value)).toThrow(message);
  });

  it('refuses a cycle but accepts the same object twice side by side', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(/\$\.self refers back to itself/);
  });

  it('is a fixed point: parsing canonical JSON and writing it again gives the same text', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalJson(value);
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
    );
  });
});

const entryArb = fc.record({
  seq: fc.integer({ min: 1, max: 2 ** 40 }),
  at: fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }),
  actor: fc.string({ minLength: 1 }),
  kind: fc.stringMatching(/^[a-z]+(\.[a-z_]+)*$/),
  projectId: fc.option(fc.uuid(), { nil: null }),
  sessionId: fc.option(fc.uuid(), { nil: null }),
  payload: fc.jsonValue().map(canonicalJson),
});

describe('entryText and chainHash', () => {
  it('entryText is the canonical JSON of the parsed entry', () => {
    fc.assert(
      fc.property(entryArb, (entry) => {
        const parsed = { ...entry, at: entry.at.toISOString(), payload: JSON.parse(entry.payload) as unknown };
        expect(entryText(entry)).toBe(canonicalJson(parsed));
      }),
    );
  });

  it('is sha256 over the previous hash followed by the entry text', () => {
    const entry: ChainEntry = { seq: 1, at: new Date('2026-01-01T00:00:00.000Z'), actor: 'u1', kind: 'a.b', projectId: null, sessionId: null, payload: '{}' };
    expect(entryText(entry)).toBe('{"actor":"u1","at":"2026-01-01T00:00:00.000Z","kind":"a.b","payload":{},"projectId":null,"seq":1,"sessionId":null}');
    // Computed outside the code: printf '%s%s' "$(printf '0%.0s' $(seq 1 64))" '<the text above>' | sha256sum
    expect(chainHash(GENESIS_HASH, entry)).toBe('d1e9dbb8b6fe3321574fac1f3861b7752809dc8d2a0e7ff6088df4ca4a31c851');
  });

  it('changes when any field changes', () => {
    fc.assert(
      fc.property(entryArb, fc.constantFrom('seq', 'at', 'actor', 'kind', 'projectId', 'sessionId', 'payload'), (entry, field) => {
        const changed: ChainEntry = { ...entry };
        switch (field) {
          case 'seq':
            changed.seq += 1;
            break;
          case 'at':
            changed.at = new Date(entry.at.getTime() + 1);
            break;
          case 'actor':
            changed.actor += 'x';
            break;
          case 'kind':
            changed.kind += 'x';
            break;
          case 'projectId':
            changed.projectId = entry.projectId === null ? 'p' : null;
            break;
          case 'sessionId':
            changed.sessionId = entry.sessionId === null ? 's' : null;
            break;
          case 'payload':
            changed.payload = canonicalJson([JSON.parse(entry.payload)]);
            break;
        }
        expect(chainHash(GENESIS_HASH, changed)).not.toBe(chainHash(GENESIS_HASH, entry));
      }),
    );
  });
});

function chain(n: number): StoredEntry[] {
  const entries: StoredEntry[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const entry = { seq, at: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)), actor: `user-${seq % 3}`, kind: 'test.entry', projectId: 'p1', sessionId: null, payload: canonicalJson({ seq }) };
    const hash = chainHash(prev, entry);
    entries.push({ ...entry, prevHash: prev, hash });
    prev = hash;
  }
  return entries;
}

function walk(entries: StoredEntry[], head = { seq: entries.length, hash: entries[entries.length - 1]?.hash ?? GENESIS_HASH }, anchor?: { seq: number; hash: string }) {
  const verifier = new ChainVerifier(anchor);
  for (const entry of entries) {
    const problem = verifier.check(entry);
    if (problem) return problem;
  }
  return verifier.finish(head);
}

describe('ChainVerifier', () => {
  it('accepts an intact chain and an empty one', () => {
    expect(walk(chain(20))).toBeUndefined();
    expect(walk([], { seq: 0, hash: GENESIS_HASH })).toBeUndefined();
  });

  it('names an altered entry', () => {
    const entries = chain(10);
    entries[6] = { ...(entries[6] as StoredEntry), payload: '{"seq":999}' };
    expect(walk(entries)).toMatchObject({ seq: 7, problem: 'altered', message: 'Entry 7 was altered: its content no longer matches the hash recorded when it was written.' });
  });

  it('names the next entry when an altered entry was re-hashed', () => {
    const entries = chain(10);
    const forged = { ...(entries[6] as StoredEntry), actor: 'someone-else' };
    forged.hash = chainHash(forged.prevHash, forged);
    entries[6] = forged;
    expect(walk(entries)).toMatchObject({
      seq: 8,
      problem: 'reordered',
      message: "Entry 8 does not follow entry 7: the hash it records for its predecessor is not entry 7's, so entries were reordered, removed and renumbered, or entry 7 was altered and re-hashed.",
    });
  });

  it('names a removed entry, first or in the middle', () => {
    const entries = chain(10);
    expect(walk(entries.filter((e) => e.seq !== 4))).toMatchObject({ seq: 4, problem: 'removed', message: 'Entry 4 was removed: the log goes from 3 to 5, so entry 4 is missing.' });
    expect(walk(entries.filter((e) => e.seq > 2))).toMatchObject({ seq: 1, problem: 'removed', message: 'Entry 1 was removed: the log starts at 3, so entries 1 to 2 are missing.' });
  });

  it('names a chain whose first entry was replaced', () => {
    const entries = chain(3)
      .slice(1)
      .map((e) => ({ ...e, seq: e.seq - 1 }));
    expect(walk(entries, { seq: 2, hash: (entries[1] as StoredEntry).hash })).toMatchObject({ seq: 1, problem: 'reordered', message: expect.stringMatching(/^Entry 1 does not start the chain/) });
  });

  it('names swapped entries at the first of the two', () => {
    const entries = chain(10);
    const five = entries[4] as StoredEntry;
    const six = entries[5] as StoredEntry;
    entries[4] = { ...six, seq: 5 };
    entries[5] = { ...five, seq: 6 };
    expect(walk(entries)).toMatchObject({ seq: 5, problem: 'reordered' });
  });

  it('names entries cut off the end, and a re-hashed last entry', () => {
    const entries = chain(10);
    const head = { seq: 10, hash: (entries[9] as StoredEntry).hash };
    expect(walk(entries.slice(0, 7), head)).toMatchObject({
      seq: 8,
      problem: 'truncated',
      message: 'Entry 8 was removed: the log ends at 7 but 10 entries were written, so entries 8 to 10 are missing.',
    });
    const forged = { ...(entries[9] as StoredEntry), kind: 'test.other' };
    forged.hash = chainHash(forged.prevHash, forged);
    entries[9] = forged;
    expect(walk(entries, head)).toMatchObject({ seq: 10, problem: 'altered' });
  });

  describe('with an anchor kept outside the database', () => {
    /** Rewrites entry `at` and re-hashes everything after it: what a database superuser could do. */
    function rewrite(entries: StoredEntry[], at: number): StoredEntry[] {
      let prev = GENESIS_HASH;
      return entries.map((e) => {
        const entry = e.seq === at ? { ...e, actor: 'mallory' } : { ...e };
        entry.prevHash = prev;
        entry.hash = chainHash(prev, entry);
        prev = entry.hash;
        return entry;
      });
    }

    it('a rewritten, re-hashed chain passes without one and is named with one', () => {
      const original = chain(10);
      const anchor = { seq: 8, hash: (original[7] as StoredEntry).hash };
      const forged = rewrite(original, 3);
      expect(walk(forged)).toBeUndefined();
      expect(walk(forged, undefined, anchor)).toMatchObject({ seq: 8, problem: 'altered', message: expect.stringMatching(/^Entry 8 is not the entry your anchor recorded/) });
      expect(walk(original, undefined, anchor)).toBeUndefined();
    });

    it('a log cut back below the anchor, head moved back too', () => {
      const original = chain(10);
      const anchor = { seq: 9, hash: (original[8] as StoredEntry).hash };
      const cut = original.slice(0, 6);
      expect(walk(cut)).toBeUndefined();
      expect(walk(cut, undefined, anchor)).toMatchObject({ seq: 7, problem: 'truncated' });
    });

    it.each([[{ seq: 0, hash: GENESIS_HASH }], [{ seq: 1.5, hash: GENESIS_HASH }], [{ seq: 1, hash: 'nothex' }]])('refuses a malformed anchor %p', (anchor) => {
      expect(() => new ChainVerifier(anchor)).toThrow('An anchor is a positive seq and the 64-hex-digit hash of that entry.');
    });
  });
});
