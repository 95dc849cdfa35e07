// Compiled to bench/audit/dist/bench/audit/ (hence the five levels up to the repository root).
// Audit chain throughput (bench/README.md, "Audit"): appends per second on PGlite and PostgreSQL,
// and the time verify() takes over 100,000 entries. Real databases, the real service, no mocks.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { openDatabase, redactUrl, type Database } from '../../apps/gateway/src/db/database';
import { AuditLogRepository } from '../../apps/gateway/src/db/repositories/audit-log.repository';
import { AuditService } from '../../apps/gateway/src/audit/audit.service';

const MIGRATIONS = path.resolve(__dirname, '..', '..', '..', '..', '..', 'apps', 'gateway', 'migrations');
const PG_URL = process.env['LEMNISCATE_TEST_PG_URL']?.trim() || 'postgres://postgres@/postgres?host=/var/run/postgresql';
const VERIFY_ENTRIES = Number(process.env['BENCH_VERIFY_ENTRIES'] ?? 100_000);
const APPENDS = Number(process.env['BENCH_APPENDS'] ?? 5_000);
const CLIENTS = 20;
const json = process.argv.includes('--json');
const only = process.argv.find((a) => a === 'pglite' || a === 'postgres');

interface Target {
  name: 'pglite' | 'postgres';
  open(): Promise<Database>;
  /** Extra connections of their own (PostgreSQL); undefined where one process is the only client. */
  connect?(): Promise<Database>;
  dispose(): Promise<void>;
}

const payload = (i: number) => ({ tool: 'Bash', command: `npm test -- --shard ${i % 8}/8`, exitCode: 0, outputDigest: 'sha256:' + 'ab'.repeat(32), bytes: 4096 + i });

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const start = process.hrtime.bigint();
  const result = await fn();
  return [result, Number(process.hrtime.bigint() - start) / 1e9];
}

async function pgliteTarget(): Promise<Target> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lemniscate-bench-'));
  return {
    name: 'pglite',
    open: () => openDatabase({ dataDir: dir, migrationsDir: MIGRATIONS }),
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

async function postgresTarget(): Promise<Target> {
  const name = `lemniscate_bench_${randomBytes(5).toString('hex')}`;
  const admin = new Client({ connectionString: PG_URL });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(`PostgreSQL at ${redactUrl(PG_URL)} could not be reached (${(error as Error).message}); set LEMNISCATE_TEST_PG_URL, or pass "pglite" to measure PGlite alone.`);
  }
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = PG_URL.replace(/^(postgres(?:ql)?:\/\/[^/?]*)(?:\/[^?]*)?/, `$1/${name}`);
  return {
    name: 'postgres',
    open: () => openDatabase({ url, migrationsDir: MIGRATIONS, poolSize: CLIENTS }),
    connect: () => openDatabase({ url, migrate: false, poolSize: 1 }),
    dispose: async () => {
      const drop = new Client({ connectionString: PG_URL });
      await drop.connect();
      await drop.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await drop.end();
    },
  };
}

async function run(target: Target) {
  const database = await target.open();
  const results: Record<string, number | string> = { database: target.name };
  try {
    const audit = new AuditService(new AuditLogRepository(database.db));
    let n = 0;

    // One caller, one append at a time: the latency floor of a commit under the chain lock.
    const sequential = Math.max(1, Math.floor(APPENDS / 5));
    const [, s1] = await timed(async () => {
      for (let i = 0; i < sequential; i++) await audit.append({ actor: 'bench', kind: 'bench.sequential', payload: payload(n++) });
    });
    results['sequentialPerSecond'] = Math.round(sequential / s1);

    // Twenty concurrent callers in one gateway: appends that arrive together share a transaction.
    const [, s2] = await timed(() =>
      Promise.all(
        Array.from({ length: CLIENTS }, async (_, c) => {
          for (let i = c; i < APPENDS; i += CLIENTS) await audit.append({ actor: `client-${c}`, kind: 'bench.concurrent', sessionId: `s-${c}`, payload: payload(n++) });
        }),
      ),
    );
    results['concurrentPerSecond'] = Math.round(APPENDS / s2);

    // Twenty clients with connections of their own (replicas): they queue on the chain head row.
    if (target.connect) {
      const clients = await Promise.all(Array.from({ length: CLIENTS }, () => (target.connect as () => Promise<Database>)()));
      try {
        const [, s3] = await timed(() =>
          Promise.all(
            clients.map(async (client, c) => {
              const own = new AuditService(new AuditLogRepository(client.db));
              for (let i = c; i < APPENDS; i += CLIENTS) await own.append({ actor: `replica-${c}`, kind: 'bench.replicas', payload: payload(n++) });
            }),
          ),
        );
        results['separateConnectionsPerSecond'] = Math.round(APPENDS / s3);
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
    }

    // Fill up to VERIFY_ENTRIES (not timed), then walk the whole chain.
    const missing = VERIFY_ENTRIES - n;
    if (missing > 0) {
      await Promise.all(
        Array.from({ length: 200 }, async (_, c) => {
          for (let i = c; i < missing; i += 200) await audit.append({ actor: `fill-${c % 20}`, kind: 'bench.fill', payload: payload(n++) });
        }),
      );
    }
    const [verification, s4] = await timed(() => audit.verify());
    if (!verification.ok) throw new Error(`verify failed: ${verification.message}`);
    results['verifiedEntries'] = verification.checked;
    results['verifySeconds'] = Number(s4.toFixed(2));
    results['verifyPerSecond'] = Math.round(verification.checked / s4);
  } finally {
    await database.close();
    await target.dispose();
  }
  return results;
}

async function main() {
  const all = [];
  const targets = [
    ['pglite', pgliteTarget],
    ['postgres', postgresTarget],
  ] as const;
  for (const [name, make] of targets) {
    if (only && only !== name) continue;
    all.push(await run(await make()));
  }
  if (json) {
    process.stdout.write(`${JSON.stringify({ node: process.version, appends: APPENDS, clients: CLIENTS, results: all })}\n`);
    return;
  }
  process.stdout.write(`audit chain, ${APPENDS} appends per scenario, ${CLIENTS} clients, verify over ${VERIFY_ENTRIES} entries (${process.version})\n`);
  for (const r of all) {
    process.stdout.write(
      `  ${String(r['database']).padEnd(9)} sequential ${r['sequentialPerSecond']}/s   20 callers, one gateway ${r['concurrentPerSecond']}/s` +
        (r['separateConnectionsPerSecond'] !== undefined ? `   20 connections ${r['separateConnectionsPerSecond']}/s` : '') +
        `   verify ${r['verifiedEntries']} entries in ${r['verifySeconds']} s (${r['verifyPerSecond']}/s)\n`,
    );
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
