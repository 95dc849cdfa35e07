// The audit chain written by several gateway replicas at once (docs/decisions/0013-audit-across-replicas.md):
// every replica an AuditService on connections of its own, against one PostgreSQL database; chainers
// killed or frozen in the middle of a round; a replica killed between queueing and chaining.
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { AuditService } from '../../src/audit/audit.service';
import { openDatabase, type Database } from '../../src/db/database';
import { AuditLogRepository, CHAINER_LOCK, type QueuedEntry } from '../../src/db/repositories/audit-log.repository';
import { withTestDatabases, type TestDatabase } from '../support/db';

jest.setTimeout(120_000);

interface Replica {
  database: Database;
  repository: AuditLogRepository;
  audit: AuditService;
}

async function openReplicas(db: TestDatabase, count: number, poolSize = 2): Promise<Replica[]> {
  if (db.driver.kind !== 'postgres') throw new Error('replicas need PostgreSQL');
  const url = db.driver.url;
  return Promise.all(
    Array.from({ length: count }, async () => {
      const database = await openDatabase({ url, migrate: false, poolSize });
      const repository = new AuditLogRepository(database.db);
      return { database, repository, audit: new AuditService(repository) };
    }),
  );
}

/** As a gateway shuts down: what it owes is done, then its database closes. */
async function closeReplicas(replicas: Replica[]): Promise<void> {
  await Promise.all(replicas.map((r) => r.audit.beforeApplicationShutdown()));
  await Promise.all(replicas.map((r) => r.database.close()));
}

interface Shape {
  entries: number;
  distinct: number;
  queued: number;
  disordered: number;
}

/** Entries of `kind`: how many, how many distinct tags, how many still queued, and session order breaks. */
async function shapeOf(db: TestDatabase, kind: string): Promise<Shape> {
  const [row] = await db.superuser<Shape>(
    `SELECT count(*)::int AS entries, count(DISTINCT payload::jsonb->>'tag')::int AS distinct,
            (SELECT count(*)::int FROM audit_pending) AS queued,
            count(*) FILTER (WHERE i < prev_i)::int AS disordered
       FROM (SELECT payload, (payload::jsonb->>'i')::int AS i,
                    lag((payload::jsonb->>'i')::int) OVER (PARTITION BY session_id ORDER BY seq) AS prev_i
               FROM audit_log WHERE kind = $1) t`,
    [kind],
  );
  return row as Shape;
}

async function eventually(check: () => Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`Timed out waiting until ${what}.`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A gateway started after a replica died: its sweep chains the three entries of `kind` the dead one left queued. */
async function sweptByAnother(db: TestDatabase, kind: string): Promise<void> {
  const [survivor] = await openReplicas(db, 1);
  try {
    survivor!.audit.onApplicationBootstrap();
    await eventually(async () => (await shapeOf(db, kind)).entries === 3, 'the sweep chained the entries');
    await expect(shapeOf(db, kind)).resolves.toEqual({ entries: 3, distinct: 3, queued: 0, disordered: 0 });
    await expect(survivor!.audit.verify()).resolves.toMatchObject({ ok: true });
  } finally {
    await closeReplicas([survivor as Replica]);
  }
}

/** `count` replicas while another connection is in a chaining round (the test may end it sooner). */
async function whileChaining(db: TestDatabase, count: number, fn: (replicas: Replica[], chainer: HeldLock) => Promise<void>): Promise<void> {
  if (db.driver.kind !== 'postgres') throw new Error('expected PostgreSQL');
  const replicas = await openReplicas(db, count);
  const chainer = await holdChainerLock(db.driver.url);
  try {
    await fn(replicas, chainer);
  } finally {
    await chainer.release();
    await closeReplicas(replicas);
  }
}

interface HeldLock {
  release(): Promise<void>;
}

/** Another connection in a chaining round: it holds the chainer lock until released (idempotent). */
async function holdChainerLock(url: string): Promise<HeldLock> {
  const client = new Client({ connectionString: url });
  await client.connect();
  client.on('error', () => undefined);
  await client.query('BEGIN');
  await client.query(`SELECT pg_try_advisory_xact_lock(${CHAINER_LOCK})`);
  let released: Promise<void> | undefined;
  return {
    release: () =>
      (released ??= (async () => {
        await client.query('COMMIT').catch(() => undefined);
        await client.end().catch(() => undefined);
      })()),
  };
}

const queuedEntry = (kind: string, session: string, i: number): QueuedEntry => ({
  key: randomUUID(),
  actor: 'replica-gone',
  kind,
  projectId: null,
  sessionId: session,
  payload: JSON.stringify({ i, tag: `${session}:${i}` }),
});

withTestDatabases(
  (database) => {
    it('eight replicas with three sessions each, appending together: one chain that verifies, every entry once, each session in order', async () => {
      const db = database();
      const replicas = await openReplicas(db, 8);
      try {
        const kind = 'test.replicas';
        const returned = await Promise.all(
          replicas.flatMap((replica, r) =>
            [0, 1, 2].map(async (s) => {
              const entries = [];
              for (let i = 0; i < 40; i++) entries.push(await replica.audit.append({ actor: `replica-${r}`, kind, sessionId: `r${r}-s${s}`, payload: { i, tag: `r${r}-s${s}:${i}` } }));
              return entries;
            }),
          ),
        );
        // What each caller was told is what the chain holds, and a session's entries come in call order.
        for (const session of returned) {
          for (let i = 1; i < session.length; i++) expect((session[i] as { seq: number }).seq).toBeGreaterThan((session[i - 1] as { seq: number }).seq);
        }
        const told = returned.flat();
        const stored = await replicas[0]!.audit.list({ kinds: [kind] }, { order: 'asc', limit: 5000 });
        expect(new Map(stored.map((e) => [e.seq, e.hash]))).toEqual(new Map(told.map((e) => [e.seq, e.hash])));
        await expect(shapeOf(db, kind)).resolves.toEqual({ entries: 960, distinct: 960, queued: 0, disordered: 0 });
        await expect(replicas[0]!.audit.verify()).resolves.toMatchObject({ ok: true });
      } finally {
        await closeReplicas(replicas);
      }
    });

    it('a chainer killed in the middle of its round loses nothing: the replicas that queued meanwhile chain it all', async () => {
      const db = database();
      if (db.driver.kind !== 'postgres') throw new Error('expected PostgreSQL');
      const replicas = await openReplicas(db, 3);
      const chainer = new Client({ connectionString: db.driver.url });
      await chainer.connect();
      chainer.on('error', () => undefined);
      try {
        const kind = 'test.chainer_killed';
        // A round under way: lock held, head locked, entries already taken out of the queue.
        await replicas[0]!.repository.enqueue([queuedEntry(kind, 'left', 0), queuedEntry(kind, 'left', 1)]);
        await chainer.query('BEGIN');
        const [{ pid }] = (await chainer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
        await chainer.query(`SELECT pg_try_advisory_xact_lock(${CHAINER_LOCK})`);
        await chainer.query(`SELECT seq FROM audit_chain_head WHERE chain = 'main' FOR UPDATE`);
        await chainer.query('DELETE FROM audit_pending');
        const appends = replicas.flatMap((replica, r) =>
          Array.from({ length: 5 }, (_, i) => replica.audit.append({ actor: `replica-${r}`, kind, sessionId: `r${r}`, payload: { i, tag: `r${r}:${i}` } })),
        );
        await eventually(async () => (await db.superuser<{ n: number }>('SELECT count(*)::int AS n FROM audit_pending'))[0]!.n >= 5, 'the replicas queued their entries');
        await db.superuser('SELECT pg_terminate_backend($1)', [pid]);
        await Promise.all(appends);
        await expect(shapeOf(db, kind)).resolves.toEqual({ entries: 17, distinct: 17, queued: 0, disordered: 0 });
        await expect(replicas[0]!.audit.verify()).resolves.toMatchObject({ ok: true });
      } finally {
        await chainer.end().catch(() => undefined);
        await closeReplicas(replicas);
      }
    });

    it('a chainer frozen in the middle of its round is ended by its lease, and its entries and everyone else’s are chained once', async () => {
      const db = database();
      const replicas = await openReplicas(db, 3);
      try {
        const kind = 'test.chainer_frozen';
        const frozen = replicas[0]!;
        frozen.repository.chainerLeaseMs = 500;
        // The others queue first, then the frozen one takes the lock for its round and stops for
        // 1.5 s (the whole process, as a long pause would) after reading the queue.
        await replicas[1]!.repository.enqueue([queuedEntry(kind, 'queued', 0)]);
        const original = frozen.repository.append.bind(frozen.repository);
        let froze = false;
        jest.spyOn(frozen.repository, 'append').mockImplementation((own, link) =>
          original(own, (head, at, entries) => {
            if (!froze) {
              froze = true;
              Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1_500);
            }
            return link(head, at, entries);
          }),
        );
        const first = frozen.audit.append({ actor: 'replica-0', kind, sessionId: 'r0', payload: { i: 0, tag: 'r0:0' } });
        await eventually(async () => froze, 'the chainer froze');
        const others = replicas
          .slice(1)
          .flatMap((replica, r) => Array.from({ length: 5 }, (_, i) => replica.audit.append({ actor: `replica-${r + 1}`, kind, sessionId: `r${r + 1}`, payload: { i, tag: `r${r + 1}:${i}` } })));
        await Promise.all([first, ...others]);
        expect(froze).toBe(true);
        await expect(shapeOf(db, kind)).resolves.toEqual({ entries: 12, distinct: 12, queued: 0, disordered: 0 });
        await expect(replicas[1]!.audit.verify()).resolves.toMatchObject({ ok: true });
      } finally {
        await closeReplicas(replicas);
      }
    });

    it('record answers once the entry is on disk, without waiting for a round under way; a read on another replica then shows it, in order', async () => {
      const db = database();
      await whileChaining(db, 2, async (replicas, chainer) => {
        const kind = 'test.recorded_queued';
        // Every record resolves while another connection holds the chainer lock: none waits for a round.
        for (let i = 0; i < 5; i++) await replicas[0]!.audit.record({ actor: 'replica-0', kind, sessionId: 'r0', payload: { i, tag: `r0:${i}` } });
        await expect(db.superuser<{ n: number }>('SELECT count(*)::int AS n FROM audit_pending')).resolves.toEqual([{ n: 5 }]);
        await expect(shapeOf(db, kind)).resolves.toMatchObject({ entries: 0 });
        // A read begun now waits for what was queued before it; the round under way ends soon after.
        const read = replicas[1]!.audit.list({ kinds: [kind] }, { order: 'asc' });
        await new Promise((resolve) => setTimeout(resolve, 200));
        await chainer.release();
        const shown = await read;
        expect(shown.map((e) => (e.payload as { i: number }).i)).toEqual([0, 1, 2, 3, 4]);
        await replicas[0]!.audit.drain();
        await expect(shapeOf(db, kind)).resolves.toEqual({ entries: 5, distinct: 5, queued: 0, disordered: 0 });
        await expect(replicas[1]!.audit.verify()).resolves.toMatchObject({ ok: true });
      });
    });

    it('recorded entries left queued for a round that then ends without them are chained by their replica once it is quiet: no sweep, read or other write needed', async () => {
      const db = database();
      await whileChaining(db, 1, async (replicas, chainer) => {
        const kind = 'test.recorded_tail';
        for (let i = 0; i < 3; i++) await replicas[0]!.audit.record({ actor: 'replica-0', kind, sessionId: 'r0', payload: { i, tag: `r0:${i}` } });
        // The round under way ends having chained none of them, and announces nothing.
        await chainer.release();
        await eventually(async () => (await shapeOf(db, kind)).entries === 3, 'the replica chained what it left queued', 5_000);
        await expect(shapeOf(db, kind)).resolves.toEqual({ entries: 3, distinct: 3, queued: 0, disordered: 0 });
      });
    });

    it('a read whose queued entries cannot be chained (a round holds the lock throughout) answers with the chain as it is, and shows them once chained', async () => {
      await whileChaining(database(), 2, async (replicas, chainer) => {
        const kind = 'test.recorded_stuck';
        await replicas[0]!.audit.record({ actor: 'replica-0', kind, sessionId: 'r0', payload: { i: 0, tag: 'r0:0' } });
        await expect(replicas[1]!.audit.count({ kinds: [kind] })).resolves.toBe(0);
        await chainer.release();
        await expect(replicas[1]!.audit.count({ kinds: [kind] })).resolves.toBe(1);
      });
    });

    it('a replica that dies right after record answered loses nothing: a running gateway chains its queued entries', async () => {
      const db = database();
      if (db.driver.kind !== 'postgres') throw new Error('expected PostgreSQL');
      const kind = 'test.recorded_died';
      const dying = await openReplicas(db, 1);
      const chainer = await holdChainerLock(db.driver.url);
      for (let i = 0; i < 3; i++) await dying[0]!.audit.record({ actor: 'replica-gone', kind, sessionId: 'died', payload: { i, tag: `died:${i}` } });
      // Gone without its shutdown: its connections end with whatever it was still following.
      await dying[0]!.database.close();
      await chainer.release();
      await sweptByAnother(db, kind);
    });

    it('six replicas recording and appending together: every entry once, each session in call order, one chain that verifies', async () => {
      const db = database();
      const replicas = await openReplicas(db, 6);
      try {
        const kind = 'test.replicas_recorded';
        await Promise.all(
          replicas.flatMap((replica, r) =>
            [0, 1].map(async (s) => {
              for (let i = 0; i < 40; i++) {
                const input = { actor: `replica-${r}`, kind, sessionId: `r${r}-s${s}`, payload: { i, tag: `r${r}-s${s}:${i}` } };
                // One session records only; the other mixes both, as a gateway's actions and tests do.
                if (s === 0 || i % 3 !== 0) await replica.audit.record(input);
                else await replica.audit.append(input);
              }
            }),
          ),
        );
        await expect(replicas[0]!.audit.count({ kinds: [kind] })).resolves.toBe(480);
        await Promise.all(replicas.map((r) => r.audit.drain()));
        await expect(shapeOf(db, kind)).resolves.toEqual({ entries: 480, distinct: 480, queued: 0, disordered: 0 });
        await expect(replicas[0]!.audit.verify()).resolves.toMatchObject({ ok: true });
      } finally {
        await closeReplicas(replicas);
      }
    });

    it('entries queued by a replica that then died are chained by a running gateway’s sweep, with no other append', async () => {
      const db = database();
      const kind = 'test.replica_died';
      const dying = await openReplicas(db, 1);
      await dying[0]!.repository.enqueue([0, 1, 2].map((i) => queuedEntry(kind, 'died', i)));
      await Promise.all(dying.map((r) => r.database.close()));
      await sweptByAnother(db, kind);
    });
  },
  ['postgres'],
);

withTestDatabases((database) => {
  it('entries left in the queue are chained before the next append, oldest first, and verify', async () => {
    const db = database();
    const repository = new AuditLogRepository(db.db);
    const audit = new AuditService(repository);
    const kind = 'test.leftovers';
    await repository.enqueue([0, 1].map((i) => queuedEntry(kind, 'left', i)));
    const next = await audit.append({ actor: 'u', kind, sessionId: 'left', payload: { i: 2, tag: 'left:2' } });
    const stored = await audit.list({ kinds: [kind] }, { order: 'asc' });
    expect(stored.map((e) => (e.payload as { i: number }).i)).toEqual([0, 1, 2]);
    expect(stored[2]?.seq).toBe(next.seq);
    await expect(repository.queue()).resolves.toEqual({ entries: 0, oldest: null });
    await expect(audit.verify()).resolves.toMatchObject({ ok: true });
    // The round owed after moving queued entries ends before the next test's rounds begin.
    await audit.drain();
  });

  it('sweep chains what is queued and says how many', async () => {
    const db = database();
    const repository = new AuditLogRepository(db.db);
    const audit = new AuditService(repository);
    await repository.enqueue([0, 1, 2, 3].map((i) => queuedEntry('test.sweep', 'swept', i)));
    await expect(audit.sweep()).resolves.toBe(4);
    await expect(audit.sweep()).resolves.toBe(0);
    await expect(audit.verify()).resolves.toMatchObject({ ok: true });
  });
});
