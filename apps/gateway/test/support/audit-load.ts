// Shared by audit-load.*.medium.ts, one file per database so Jest runs them side by side.
// The load test of issue 4: 20 concurrent clients, 10,000 appends; the chain verifies, with no gap
// and no fork.
import { expect, it, jest } from '@jest/globals';
import { openDatabase, type Database, type DatabaseKind } from '../../src/db/database';
import { AuditLogRepository } from '../../src/db/repositories/audit-log.repository';
import { withTestDatabases } from './db';
import { AuditService } from '../../src/audit/audit.service';

const CLIENTS = 20;
const APPENDS = 10_000;
const REPLICAS = 4;

export function loadTest(kind: DatabaseKind): void {
  withTestDatabases(
    (database) => {
      it(`${APPENDS} appends from ${CLIENTS} concurrent clients: verifies, no gap, no fork`, async () => {
        const db = database();
        // As deployed: every client talks to a gateway, and each gateway has one AuditService. On
        // PostgreSQL, four replicas with pools of their own contend for the chain head (the
        // twenty-connection case is in audit.medium.ts); PGlite is a single process.
        const replicas: Database[] = [];
        for (let i = 0; i < (db.driver.kind === 'postgres' ? REPLICAS : 1); i++) {
          replicas.push(db.driver.kind === 'postgres' ? await openDatabase({ url: db.driver.url, migrate: false, poolSize: CLIENTS / REPLICAS }) : db);
        }
        try {
          const services = replicas.map((replica) => new AuditService(new AuditLogRepository(replica.db)));
          const started = process.hrtime.bigint();
          await Promise.all(
            Array.from({ length: CLIENTS }, async (_, c) => {
              const audit = services[c % services.length] as AuditService;
              for (let i = c; i < APPENDS; i += CLIENTS) {
                await audit.append({ actor: `client-${c}`, kind: 'load.append', sessionId: `s-${c}`, payload: { c, i, output: 'x'.repeat(200) } });
              }
            }),
          );
          const seconds = Number(process.hrtime.bigint() - started) / 1e9;
          process.stdout.write(`audit load (${kind}): ${APPENDS} appends in ${seconds.toFixed(1)} s, ${Math.round(APPENDS / seconds)} appends/s\n`);

          const reader = new AuditLogRepository(db.db);
          const pages = jest.spyOn(reader, 'range');
          await expect(new AuditService(reader).verify()).resolves.toMatchObject({ ok: true, checked: APPENDS, lastSeq: APPENDS });
          // Constant memory: the walk reads bounded pages, never the whole table.
          expect(pages.mock.calls.map((call) => call[2])).toEqual([5000, 5000]);
          const [shape] = await db.superuser<Record<string, number>>(
            `SELECT count(*)::int AS n, min(seq)::int AS min, max(seq)::int AS max, count(DISTINCT prev_hash)::int AS links,
                count(DISTINCT actor)::int AS per_client
           FROM audit_log`,
          );
          // No gap: seq runs 1..N. No fork: every entry names a different predecessor.
          expect(shape).toEqual({ n: APPENDS, min: 1, max: APPENDS, links: APPENDS, per_client: CLIENTS });
        } finally {
          if (db.driver.kind === 'postgres') await Promise.all(replicas.map((r) => r.close()));
        }
      });
    },
    [kind],
  );
}
