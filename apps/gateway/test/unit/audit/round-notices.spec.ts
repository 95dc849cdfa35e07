import { chainHash, GENESIS_HASH } from '../../../src/audit/audit-chain';
import { noticesOf, parseNotice } from '../../../src/db/repositories/audit-log.repository';
import type { AuditLogRow } from '../../../src/db/schema';

/** `n` linked rows from seq `from`, as a round writes them. */
function rows(n: number, from = 1): AuditLogRow[] {
  const at = new Date('2026-03-04T05:06:07.089Z');
  let prevHash = GENESIS_HASH;
  return Array.from({ length: n }, (_, i) => {
    const entry = { seq: from + i, at, actor: 'u', kind: 'test.entry', projectId: null, sessionId: null, payload: `{"i":${i}}` };
    const hash = chainHash(prevHash, entry);
    const row = { ...entry, prevHash, hash, entryKey: null };
    prevHash = hash;
    return row;
  });
}

describe('round notices', () => {
  it('say where each queued entry went, by queue id, and that the chainer goes on', () => {
    const moved = rows(3, 41);
    const notices = noticesOf([7, 9, 12], moved, moved[0]!.at);
    expect(notices).toHaveLength(1);
    const notice = parseNotice(notices[0]!);
    expect(notice?.more).toBe(true);
    expect([...(notice?.placed.entries() ?? [])]).toEqual([7, 9, 12].map((id, i) => [id, { seq: moved[i]!.seq, at: moved[i]!.at, prevHash: moved[i]!.prevHash, hash: moved[i]!.hash }]));
  });

  it('from a round that moved nothing say only that it stops', () => {
    const notice = parseNotice(noticesOf([], [], new Date(0))[0]!);
    expect(notice).toEqual({ more: false, placed: new Map() });
  });

  it('are cut below the 8000-byte NOTIFY limit, and the pieces together place every entry', () => {
    const moved = rows(500);
    const ids = moved.map((_, i) => 1_000_000_000 + i);
    const notices = noticesOf(ids, moved, moved[0]!.at);
    expect(notices.length).toBeGreaterThan(1);
    for (const text of notices) expect(Buffer.byteLength(text)).toBeLessThan(8000);
    const placed = new Map(notices.flatMap((text) => [...(parseNotice(text)?.placed ?? [])]));
    expect(placed.size).toBe(500);
    moved.forEach((row, i) => expect(placed.get(ids[i]!)).toEqual({ seq: row.seq, at: row.at, prevHash: row.prevHash, hash: row.hash }));
  });

  it('ignore payloads they did not write', () => {
    expect(parseNotice('hello')).toBeUndefined();
    expect(parseNotice('')).toBeUndefined();
  });
});
