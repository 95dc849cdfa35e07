import { randomUUID } from 'node:crypto';
import { AppError } from '../../src/common/errors';
import { openDatabase, type Database } from '../../src/db/database';
import { AuditLogRepository, CHAINER_LOCK } from '../../src/db/repositories/audit-log.repository';
import { freshDatabase, withTestDatabases, type TestDatabase } from '../support/db';
import { canonicalJson, chainHash, GENESIS_HASH } from '../../src/audit/audit-chain';
import { CSV_HEADER, flattenPayload } from '../../src/audit/audit-export';
import { AuditService, MAX_PAYLOAD_BYTES, type AuditEntry } from '../../src/audit/audit.service';
import { rewriteEndToEnd, tamper } from '../support/audit';

// Jest reads testTimeout only from the root configuration, not from a project: set it here.
jest.setTimeout(120_000);

const auditOf = (database: Database) => new AuditService(new AuditLogRepository(database.db));

async function appendMany(audit: AuditService, n: number, make: (i: number) => Partial<Parameters<AuditService['append']>[0]> = () => ({})) {
  const entries: AuditEntry[] = [];
  for (let i = 0; i < n; i++) {
    entries.push(await audit.append({ actor: 'user-1', kind: 'test.entry', payload: { i }, ...make(i) }));
  }
  return entries;
}

/** A minimal RFC 4180 reader, enough to check what the export writes. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let field = '';
  let record: string[] = [];
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      record.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      record.push(field);
      records.push(record);
      record = [];
      field = '';
      i++;
    } else field += c;
  }
  if (field !== '' || record.length > 0) throw new Error('CSV does not end with CRLF');
  return records;
}

async function collect(chunks: AsyncIterable<string>): Promise<string> {
  let text = '';
  for await (const chunk of chunks) text += chunk;
  return text;
}

withTestDatabases((database, kind) => {
  describe('append and verify', () => {
    it('starts empty and verifies', async () => {
      await expect(auditOf(database()).verify()).resolves.toEqual({ ok: true, checked: 0, lastSeq: 0, lastHash: GENESIS_HASH });
    });

    it('appends linked, numbered entries that verify clean', async () => {
      const audit = auditOf(database());
      const entries = await appendMany(audit, 5, (i) => ({ projectId: 'p1', sessionId: i % 2 ? 's1' : null, payload: { i, text: 'a\u0000b', nested: { z: 1, a: [true, null] } } }));
      expect(entries.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
      expect(entries[0]?.prevHash).toBe(GENESIS_HASH);
      for (let i = 1; i < entries.length; i++) expect(entries[i]?.prevHash).toBe(entries[i - 1]?.hash);
      expect(entries[0]?.payload).toEqual({ i: 0, text: 'a\u0000b', nested: { z: 1, a: [true, null] } });
      const verification = await audit.verify();
      expect(verification).toEqual({ ok: true, checked: 5, lastSeq: 5, lastHash: entries[4]?.hash });
    });

    it('hashes exactly what it stores, so anyone can recompute the hash from a row', async () => {
      const [row] = await database().superuser<{
        seq: string;
        at: Date;
        actor: string;
        kind: string;
        project_id: string | null;
        session_id: string | null;
        payload: string;
        prev_hash: string;
        hash: string;
      }>('SELECT * FROM audit_log WHERE seq = 1');
      if (!row) throw new Error('entry 1 missing');
      expect(row.payload).toBe(canonicalJson({ i: 0, text: 'a\u0000b', nested: { z: 1, a: [true, null] } }));
      const entry = { seq: Number(row.seq), at: new Date(row.at), actor: row.actor, kind: row.kind, projectId: row.project_id, sessionId: row.session_id, payload: row.payload };
      expect(chainHash(row.prev_hash, entry)).toBe(row.hash);
    });

    it.each([
      [{ actor: '', kind: 'a.b', payload: {} }, 'The audit actor is required and must be a non-empty string.'],
      [{ actor: 'u', kind: 'Not A Kind', payload: {} }, 'The audit kind "Not A Kind" must be dotted lower-case words, like "session.stop".'],
      [{ actor: 'u', kind: 'a.b', payload: { n: Number.NaN } }, 'The audit payload cannot be recorded: the payload.n is NaN, which JSON cannot represent.'],
      [{ actor: 'u', kind: 'a.b', payload: 'x'.repeat(MAX_PAYLOAD_BYTES) }, `The audit payload is larger than ${MAX_PAYLOAD_BYTES} bytes; record a digest of large output instead.`],
    ])('refuses bad input with a sentence and writes nothing (%#)', async (input, message) => {
      const audit = auditOf(database());
      const before = await audit.verify();
      const attempt = audit.append(input);
      await expect(attempt).rejects.toThrow(AppError);
      await expect(attempt).rejects.toThrow(message);
      await expect(audit.verify()).resolves.toEqual(before);
    });
    it.each([
      [{ actor: 'a\u0000b', kind: 'a.b', payload: {} }, 'The audit actor contains a NUL character or a lone surrogate, which cannot be stored as written.'],
      [{ actor: 'u', kind: 'a.b', sessionId: 'x\uD800', payload: {} }, 'The audit sessionId contains a NUL character or a lone surrogate, which cannot be stored as written.'],
    ])('refuses text the database would store differently from what was hashed (%#)', async (input, message) => {
      await expect(auditOf(database()).append(input)).rejects.toThrow(message);
    });

    it('records a proposed write of a few megabytes, and it verifies', async () => {
      const audit = auditOf(database());
      const content = '{"lockfileVersion":3}\n'.repeat(150_000);
      const entry = await audit.append({ actor: 'agent:general', kind: 'tool_call.proposed', payload: { name: 'Write', arguments: { path: 'package-lock.json', content } } });
      expect((entry.payload as { arguments: { content: string } }).arguments.content).toBe(content);
      await expect(audit.verify()).resolves.toMatchObject({ ok: true, lastSeq: entry.seq });
    });

    it('writes appends that arrive together in one transaction, in call order', async () => {
      const repository = new AuditLogRepository(database().db);
      const audit = new AuditService(repository);
      const transactions = jest.spyOn(repository, 'append');
      const entries = await Promise.all(Array.from({ length: 200 }, (_, i) => audit.append({ actor: 'batch', kind: 'test.batch', payload: { i } })));
      const seqs = entries.map((e) => e.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      expect(entries.map((e) => (e.payload as { i: number }).i)).toEqual(Array.from({ length: 200 }, (_, i) => i));
      expect(seqs[199]! - seqs[0]!).toBe(199);
      expect(transactions.mock.calls.length).toBeLessThan(200);
      await expect(audit.verify()).resolves.toMatchObject({ ok: true });
    });

    it("chains entries recorded in the same turn (a tool call's proposal and its decision) in one round", async () => {
      const repository = new AuditLogRepository(database().db);
      const audit = new AuditService(repository);
      const rounds = jest.spyOn(repository, 'append');
      await Promise.all([audit.record({ actor: 'agent:a', kind: 'tool_call.proposed', payload: { seq: 1 } }), audit.record({ actor: 'agent:a', kind: 'policy.decision', payload: { seq: 1 } })]);
      expect(rounds.mock.calls.map(([entries]) => entries.map((e) => e.kind))).toEqual([['tool_call.proposed', 'policy.decision']]);
      await audit.drain();
      await expect(audit.verify()).resolves.toMatchObject({ ok: true });
    });

    describe('a round at the head this gateway last left: one statement, taken only when nothing else moved', () => {
      type Known = { seq: number; hash: string; clockMs: number; readAt: number } | undefined;
      const withRepository = () => {
        const repository = new AuditLogRepository(database().db);
        // A full round is a transaction; a round at the known head is one statement outside any.
        const fullRounds = jest.spyOn(repository as unknown as { transaction: () => Promise<unknown> }, 'transaction');
        const known = () => (repository as unknown as { knownHead: Known }).knownHead;
        const setKnown = (k: Known) => ((repository as unknown as { knownHead: Known }).knownHead = k);
        return { audit: new AuditService(repository), repository, fullRounds, known, setKnown };
      };

      it('links from the head it knows without a full round, and reads the head again once another writer moved it', async () => {
        const a = withRepository();
        const b = auditOf(database());
        const first = await a.audit.append({ actor: 'u', kind: 'test.knownhead', payload: 1 });
        a.fullRounds.mockClear();
        const second = await a.audit.append({ actor: 'u', kind: 'test.knownhead', payload: 2 });
        expect(a.fullRounds).not.toHaveBeenCalled();
        // Another service on the same database moves the head: the statement at the old head writes nothing.
        const third = await b.append({ actor: 'u', kind: 'test.knownhead', payload: 3 });
        const fourth = await a.audit.append({ actor: 'u', kind: 'test.knownhead', payload: 4 });
        expect(a.fullRounds).toHaveBeenCalledTimes(1);
        expect([second, third, fourth].map((e) => e.seq - first.seq)).toEqual([1, 2, 3]);
        expect([second.prevHash, fourth.prevHash]).toEqual([first.hash, third.hash]);
        expect(Date.parse(second.at)).toBeGreaterThanOrEqual(Date.parse(first.at));
        expect((await a.audit.list({ kinds: ['test.knownhead'] })).map((e) => e.payload).sort()).toEqual([1, 2, 3, 4]);
        await expect(a.audit.verify()).resolves.toMatchObject({ ok: true });
      });

      it("never writes a time ahead of the database's clock: a drifted reading makes a full round", async () => {
        const a = withRepository();
        await a.audit.append({ actor: 'u', kind: 'test.knownhead', payload: 'sync' });
        const known = a.known();
        expect(known).toBeDefined();
        a.setKnown({ ...known!, clockMs: known!.clockMs + 60_000 });
        a.fullRounds.mockClear();
        const before = Date.now();
        const entry = await a.audit.append({ actor: 'u', kind: 'test.knownhead', payload: 'drifted' });
        expect(a.fullRounds).toHaveBeenCalledTimes(1);
        expect(Date.parse(entry.at)).toBeLessThan(before + 30_000);
        await expect(a.audit.verify()).resolves.toMatchObject({ ok: true });
      });

      (kind === 'postgres' ? it : it.skip)('on PostgreSQL, chains what other replicas queued first, and writes nothing while another connection holds the chainer lock', async () => {
        const db = database();
        if (db.driver.kind !== 'postgres') throw new Error('PostgreSQL only');
        const a = withRepository();
        await a.audit.append({ actor: 'u', kind: 'test.knownhead', payload: 'sync' });
        expect(a.known()).toBeDefined();
        // A replica's entry waits in the queue: the round at the known head must not pass it by.
        const other = new AuditLogRepository(db.db);
        await other.enqueue([{ key: randomUUID(), actor: 'replica', kind: 'test.knownhead', projectId: null, sessionId: null, payload: canonicalJson('queued') }]);
        a.fullRounds.mockClear();
        const mine = await a.audit.append({ actor: 'u', kind: 'test.knownhead', payload: 'mine' });
        expect(a.fullRounds).toHaveBeenCalled();
        const listed = await a.audit.list({ kinds: ['test.knownhead'] });
        const queued = listed.find((e) => e.payload === 'queued');
        expect(queued && queued.seq < mine.seq).toBe(true);
        // A round that moved queued entries leaves no known head (other replicas are writing); the next one does.
        expect(a.known()).toBeUndefined();
        await a.audit.append({ actor: 'u', kind: 'test.knownhead', payload: 'quiet again' });
        expect(a.known()).toBeDefined();
        // Another connection holds the chainer lock: the statement at the known head writes nothing.
        const holder = await db.driver.pool.connect();
        try {
          await holder.query('SELECT pg_advisory_lock($1)', [CHAINER_LOCK]);
          const round = await a.repository.append(
            [{ key: randomUUID(), actor: 'u', kind: 'test.knownhead', projectId: null, sessionId: null, payload: canonicalJson('while locked') }],
            (head, at, entries) => entries.map((e, i) => ({ ...e, seq: head.seq + i + 1, at, prevHash: head.hash, hash: head.hash, entryKey: e.key }) as never),
          );
          expect(round.chained).toBe(false);
          await holder.query('SELECT pg_advisory_unlock($1)', [CHAINER_LOCK]);
        } finally {
          holder.release();
        }
        await a.audit.drain();
        await a.audit.sweep();
        await expect(a.audit.verify()).resolves.toMatchObject({ ok: true });
        expect((await a.audit.list({ kinds: ['test.knownhead'] })).map((e) => e.payload)).toContain('while locked');
      });
    });

    it('rejects every append of a batch the database refused, and carries on with the next', async () => {
      const repository = new AuditLogRepository(database().db);
      const audit = new AuditService(repository);
      jest.spyOn(repository, 'append').mockRejectedValueOnce(new Error('connection lost'));
      // Called in the same turn, the two share the first batch: both are refused.
      const [first, second] = await Promise.allSettled([audit.append({ actor: 'u', kind: 'test.fail', payload: 1 }), audit.append({ actor: 'u', kind: 'test.fail', payload: 2 })]);
      expect(first).toMatchObject({ status: 'rejected', reason: new Error('connection lost') });
      expect(second).toMatchObject({ status: 'rejected', reason: new Error('connection lost') });
      await expect(audit.append({ actor: 'u', kind: 'test.after', payload: 3 })).resolves.toMatchObject({ kind: 'test.after' });
      expect((await audit.list({})).map((e) => e.kind)).not.toContain('test.fail');
      await expect(audit.verify()).resolves.toMatchObject({ ok: true });
    });
  });

  describe('the database refuses changes', () => {
    it.each([
      ['UPDATE', `UPDATE audit_log SET actor = 'mallory' WHERE seq = 1`],
      ['DELETE', 'DELETE FROM audit_log WHERE seq = 1'],
      ['TRUNCATE', 'TRUNCATE audit_log'],
    ])('by trigger, even for a superuser: %s', async (op, statement) => {
      await expect(database().superuser(statement)).rejects.toThrow(`the audit log is append-only: ${op} is refused on audit_log`);
    });

    it.each([
      ['UPDATE', `UPDATE audit_log SET actor = 'mallory' WHERE seq = 1`],
      ['DELETE', 'DELETE FROM audit_log WHERE seq = 1'],
      ['TRUNCATE', 'TRUNCATE audit_log'],
    ])('by grant, for the role the gateway runs as: %s', async (_op, statement) => {
      const db = database();
      const run = db.driver.kind === 'pglite' ? db.driver.client.query(statement) : db.driver.pool.query(statement);
      await expect(run).rejects.toThrow('permission denied for table audit_log');
    });

    it('and the gateway role cannot switch the trigger off', async () => {
      const db = database();
      const statement = 'ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_delete';
      const run = db.driver.kind === 'pglite' ? db.driver.client.query(statement) : db.driver.pool.query(statement);
      await expect(run).rejects.toThrow('must be owner of table audit_log');
    });
  });

  describe('verify names the tampered entry', () => {
    let tampered: TestDatabase;
    let audit: AuditService;
    beforeEach(async () => {
      tampered = await freshDatabase(kind);
      audit = auditOf(tampered);
      await appendMany(audit, 10);
      await expect(audit.verify()).resolves.toMatchObject({ ok: true, checked: 10 });
    });
    afterEach(async () => {
      await tampered.close();
    });

    it('an altered payload', async () => {
      await tamper(tampered, [`UPDATE audit_log SET payload = '{"i":600}' WHERE seq = 6`]);
      await expect(audit.verify()).resolves.toEqual({
        ok: false,
        checked: 5,
        seq: 6,
        problem: 'altered',
        message: 'Entry 6 was altered: its content no longer matches the hash recorded when it was written.',
      });
    });

    it('a deleted row', async () => {
      await tamper(tampered, ['DELETE FROM audit_log WHERE seq = 4']);
      await expect(audit.verify()).resolves.toEqual({
        ok: false,
        checked: 3,
        seq: 4,
        problem: 'removed',
        message: 'Entry 4 was removed: the log goes from 3 to 5, so entry 4 is missing.',
      });
    });

    it("two rows' seq swapped", async () => {
      await tamper(tampered, ['UPDATE audit_log SET seq = 1000 WHERE seq = 7', 'UPDATE audit_log SET seq = 7 WHERE seq = 8', 'UPDATE audit_log SET seq = 8 WHERE seq = 1000']);
      await expect(audit.verify()).resolves.toMatchObject({ ok: false, checked: 6, seq: 7, problem: 'reordered' });
    });

    it('an altered entry whose hash was recomputed to match', async () => {
      const [row] = await tampered.superuser<{ at: Date; prev_hash: string }>('SELECT at, prev_hash FROM audit_log WHERE seq = 5');
      if (!row) throw new Error('entry 5 missing');
      const forged = { seq: 5, at: new Date(row.at), actor: 'someone-else', kind: 'test.entry', projectId: null, sessionId: null, payload: '{"i":4}' };
      await tamper(tampered, [`UPDATE audit_log SET actor = 'someone-else', hash = '${chainHash(row.prev_hash, forged)}' WHERE seq = 5`]);
      await expect(audit.verify()).resolves.toMatchObject({ ok: false, checked: 5, seq: 6, problem: 'reordered' });
    });

    it('a log rewritten and re-hashed end to end, caught with an anchor kept elsewhere', async () => {
      const anchor = await audit.verify();
      if (!anchor.ok) throw new Error(anchor.message);
      await rewriteEndToEnd(tampered, 3, 'mallory');
      await expect(audit.verify()).resolves.toMatchObject({ ok: true });
      await expect(audit.verify({ seq: anchor.lastSeq, hash: anchor.lastHash })).resolves.toMatchObject({ ok: false, seq: 10, problem: 'altered' });
    });

    it('refuses a malformed anchor with a sentence', async () => {
      await expect(audit.verify({ seq: 1, hash: 'abc' })).rejects.toThrow('An anchor is a positive seq and the 64-hex-digit hash of that entry.');
    });

    it('the last rows deleted', async () => {
      await tamper(tampered, ['DELETE FROM audit_log WHERE seq >= 9']);
      await expect(audit.verify()).resolves.toMatchObject({ ok: false, seq: 9, problem: 'truncated' });
    });

    it('a forged row slipped in after the head', async () => {
      const head = (await audit.list({}, { order: 'desc', limit: 1 }))[0] as AuditEntry;
      const forged = { seq: 11, at: new Date(), actor: 'mallory', kind: 'test.entry', projectId: null, sessionId: null, payload: '{}' };
      await tampered.superuser(`INSERT INTO audit_log (seq, at, actor, kind, payload, prev_hash, hash) VALUES (11, $1, 'mallory', 'test.entry', '{}', $2, $3)`, [
        forged.at,
        head.hash,
        chainHash(head.hash, forged),
      ]);
      await expect(audit.verify()).resolves.toMatchObject({ ok: false, seq: 11, problem: 'inserted' });
    });
  });

  describe('concurrent appends', () => {
    it('from 20 clients never fork the chain, and verify stays clean while they write', async () => {
      const db = database();
      const clients: Database[] = [];
      // PostgreSQL: twenty connections of their own. PGlite: twenty services sharing the process.
      for (let i = 0; i < 20; i++) clients.push(db.driver.kind === 'postgres' ? await openDatabase({ url: db.driver.url, migrate: false, poolSize: 1 }) : db);
      try {
        const before = await auditOf(db).verify();
        if (!before.ok) throw new Error(before.message);
        let appending = true;
        const writers = Promise.all(clients.map((client, c) => appendMany(auditOf(client), 25, (i) => ({ actor: `client-${c}`, payload: { c, i } })))).finally(() => {
          appending = false;
        });
        // Verifying while entries keep arriving must never report a break that is not there.
        const readings: boolean[] = [];
        while (appending) readings.push((await auditOf(db).verify()).ok);
        await writers;
        expect(readings.length).toBeGreaterThan(0);
        expect(readings.every((ok) => ok)).toBe(true);
        const after = await auditOf(db).verify();
        expect(after).toMatchObject({ ok: true, checked: before.checked + 500 });
        const [fork] = await db.superuser<{ n: string; links: string }>('SELECT count(*) AS n, count(DISTINCT prev_hash) AS links FROM audit_log');
        expect(Number(fork?.links)).toBe(Number(fork?.n));
      } finally {
        if (db.driver.kind === 'postgres') await Promise.all(clients.map((c) => c.close()));
      }
    });
  });
});

withTestDatabases((database) => {
  let all: AuditEntry[];
  const audit = () => auditOf(database());

  beforeAll(async () => {
    all = await appendMany(audit(), 40, (i) => ({
      actor: `user-${i % 3}`,
      kind: ['session.instruction', 'policy.decision', 'approval.answer', 'auth.login_failed'][i % 4] as string,
      projectId: i % 5 === 0 ? null : `project-${i % 2}`,
      sessionId: i % 4 === 3 ? null : `session-${i % 4}`,
      payload: { i, text: i % 7 === 0 ? 'comma, "quote"\nnewline' : `=cmd ${i}` },
    }));
  });

  describe('filters', () => {
    const cases: [string, Parameters<AuditService['list']>[0], (e: AuditEntry) => boolean][] = [
      ['project', { projectId: 'project-1' }, (e) => e.projectId === 'project-1'],
      ['projects in scope', { projectIds: ['project-0'] }, (e) => e.projectId === 'project-0'],
      ['empty scope', { projectIds: [] }, () => false],
      ['actor', { actor: 'user-2' }, (e) => e.actor === 'user-2'],
      ['session', { sessionId: 'session-1' }, (e) => e.sessionId === 'session-1'],
      ['kinds', { kinds: ['policy.decision', 'auth.login_failed'] }, (e) => e.kind === 'policy.decision' || e.kind === 'auth.login_failed'],
      ['combined', { projectId: 'project-0', actor: 'user-0', kinds: ['session.instruction'] }, (e) => e.projectId === 'project-0' && e.actor === 'user-0' && e.kind === 'session.instruction'],
    ];

    it.each(cases)('by %s', async (_name, filter, expected) => {
      const found = await audit().list(filter, { limit: 1000 });
      const wanted = all.filter(expected);
      expect(found.map((e) => e.seq)).toEqual(wanted.map((e) => e.seq));
    });

    it('by time range: from inclusive, to exclusive', async () => {
      const from = new Date((all[10] as AuditEntry).at);
      const to = new Date((all[30] as AuditEntry).at);
      const found = await audit().list({ from, to }, { limit: 1000 });
      const wanted = all.filter((e) => new Date(e.at) >= from && new Date(e.at) < to);
      expect(wanted.length).toBeGreaterThan(0);
      expect(found.map((e) => e.seq)).toEqual(wanted.map((e) => e.seq));
    });

    it('pages by seq in either order', async () => {
      const first = await audit().list({}, { order: 'desc', limit: 15 });
      const second = await audit().list({}, { order: 'desc', limit: 15, after: first[first.length - 1]?.seq });
      expect([...first, ...second].map((e) => e.seq)).toEqual(
        all
          .map((e) => e.seq)
          .reverse()
          .slice(0, 30),
      );
      const ascending = await audit().list({}, { after: 35 });
      expect(ascending.map((e) => e.seq)).toEqual([36, 37, 38, 39, 40]);
    });

    it('refuses a range that ends before it starts, and a date that is not one', async () => {
      await expect(audit().list({ from: new Date('2026-02-01'), to: new Date('2026-01-01') })).rejects.toThrow('The audit filter "from" is later than "to"; the range would match nothing.');
      await expect(audit().list({ to: new Date('not a date') })).rejects.toThrow('The audit filter "to" is not a valid date.');
    });
  });

  describe('export', () => {
    it('as JSONL: one exact line per matching entry, re-verifiable from the file alone', async () => {
      const text = await collect(audit().export({}, 'jsonl'));
      const lines = text.split('\n');
      expect(lines.pop()).toBe('');
      expect(lines).toHaveLength(all.length);
      let prev = GENESIS_HASH;
      for (const line of lines) {
        const e = JSON.parse(line) as AuditEntry;
        const entry = { seq: e.seq, at: new Date(e.at), actor: e.actor, kind: e.kind, projectId: e.projectId, sessionId: e.sessionId, payload: canonicalJson(e.payload) };
        expect(e.prevHash).toBe(prev);
        expect(chainHash(prev, entry)).toBe(e.hash);
        prev = e.hash;
      }
    });

    it('as CSV: quoted per RFC 4180, filtered, every field read back as written', async () => {
      const text = await collect(audit().export({ actor: 'user-0' }, 'csv'));
      const records = parseCsv(text);
      expect(`${(records[0] as string[]).join(',')}\r\n`).toBe(CSV_HEADER);
      const wanted = all.filter((e) => e.actor === 'user-0');
      expect(records.slice(1).map((r) => Number(r[0]))).toEqual(wanted.map((e) => e.seq));
      for (const [i, record] of records.slice(1).entries()) {
        const e = wanted[i] as AuditEntry;
        const flat = Object.values(flattenPayload(canonicalJson(e.payload))).map((v) => (v === null ? '' : String(v)).replace(/^([=+\-@\t\r])/, "'$1"));
        expect(record).toEqual([String(e.seq), e.at, e.actor, '', '', e.kind, e.projectId ?? '', e.sessionId ?? '', ...flat, e.prevHash, e.hash]);
      }
      expect(text).toContain('text=comma, ""quote""');
    });

    it('from a cursor: only the entries after it, in order, whatever the page size', async () => {
      for (const cut of [0, 1, Math.floor(all.length / 2), all.length - 1, all.length]) {
        const cursor = cut === 0 ? 0 : (all[cut - 1] as AuditEntry).seq;
        const lines = (await collect(audit().export({}, 'jsonl', undefined, cursor))).split('\n').filter(Boolean);
        expect(lines.map((l) => (JSON.parse(l) as AuditEntry).seq)).toEqual(all.filter((e) => e.seq > cursor).map((e) => e.seq));
      }
    });

    it('as CSV with no match: the header alone', async () => {
      await expect(collect(audit().export({ actor: 'nobody' }, 'csv'))).resolves.toBe(CSV_HEADER);
    });

    it('refuses an unknown format', async () => {
      await expect(collect(audit().export({}, 'xml' as 'csv'))).rejects.toThrow('The export format "xml" is not one of jsonl, csv.');
    });
  });
});

withTestDatabases((database) => {
  it('exports page by page: a consumer that stops early never makes the rest be read', async () => {
    const db = database();
    const repository = new AuditLogRepository(db.db);
    const audit = new AuditService(repository);
    await appendMany(audit, 2500, (i) => ({ payload: { i } }));
    const pages = jest.spyOn(repository, 'list');

    const chunks = audit.export({}, 'jsonl');
    const first = await chunks.next();
    expect(first.done).toBe(false);
    expect((first.value as string).split('\n')).toHaveLength(1001);
    expect(pages).toHaveBeenCalledTimes(1);
    await chunks.return(undefined);

    const streamed = await collect(audit.exportStream({}, 'jsonl'));
    expect(streamed.split('\n')).toHaveLength(2501);
    // Three pages of at most 1000 for 2500 entries, plus the first call above.
    expect(pages).toHaveBeenCalledTimes(4);
    for (const call of pages.mock.calls) expect(call[1]?.limit).toBe(1000);
  });
});
