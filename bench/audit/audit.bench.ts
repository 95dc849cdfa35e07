// Compiled to bench/audit/dist/bench/audit/ (hence the five levels up to the repository root).
// Audit chain throughput (bench/README.md, "Audit"): appends per second on PGlite and PostgreSQL, one
// gateway and twenty replicas, and the time verify() takes over 100,000 entries. Real databases, the
// real service, no mocks.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { openDatabase, redactUrl, type Database } from '../../apps/gateway/src/db/database';
import type { AuditLogRow } from '../../apps/gateway/src/db/schema';
import { AuditLogRepository } from '../../apps/gateway/src/db/repositories/audit-log.repository';
import { AuditService } from '../../apps/gateway/src/audit/audit.service';
import { chainHash, GENESIS_HASH } from '../../apps/gateway/src/audit/audit-chain';

const MIGRATIONS = path.resolve(__dirname, '..', '..', '..', '..', '..', 'apps', 'gateway', 'migrations');
const PG_URL = process.env['LEMNISCATE_TEST_PG_URL']?.trim() || 'postgres://postgres@/postgres?host=/var/run/postgresql';
const VERIFY_ENTRIES = Number(process.env['BENCH_VERIFY_ENTRIES'] ?? 100_000);
const APPENDS = Number(process.env['BENCH_APPENDS'] ?? 5_000);
const CLIENTS = 20;
/** Issue targets: twenty replicas together on PostgreSQL, and one gateway with twenty callers. */
const TARGET_REPLICAS = 5_000;
const TARGET_ONE_GATEWAY = 10_000;
const json = process.argv.includes('--json');
const floors = process.argv.includes('--floors');
const only = process.argv.find((a) => a === 'pglite' || a === 'postgres');

interface Target {
  name: 'pglite' | 'postgres';
  open(): Promise<Database>;
  /** Extra connections of their own (PostgreSQL); undefined where one process is the only client. */
  connect?(): Promise<Database>;
  /** A plain client on the same database, for the floor measurement and the checks (PostgreSQL). */
  client?(): Promise<Client>;
  dispose(): Promise<void>;
}

type Results = Record<string, number | string | boolean>;

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
    client: async () => {
      const client = new Client({ connectionString: url });
      await client.connect();
      return client;
    },
    dispose: async () => {
      const drop = new Client({ connectionString: PG_URL });
      await drop.connect();
      await drop.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await drop.end();
    },
  };
}

/** Busy jiffies of the whole machine (every process on every CPU: the database server included). */
function machineBusyTicks(): number {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  return fields.reduce((a, b) => a + b, 0) - fields[3]! - fields[4]!;
}
/** Milliseconds of CPU per jiffy (USER_HZ, 100 on Linux). */
const TICK_MS = 10;

/** Runs `fn` and returns its result, the machine's CPU milliseconds spent meanwhile, and this process's share of them. */
async function withMachineCpu<T>(fn: () => Promise<T>): Promise<[T, number, number]> {
  const before = machineBusyTicks();
  const own = process.cpuUsage();
  const result = await fn();
  const spent = process.cpuUsage(own);
  return [result, (machineBusyTicks() - before) * TICK_MS, (spent.user + spent.system) / 1000];
}

/**
 * What the machine allows without any chain: twenty connections each committing one small row at a
 * time into a table of their own, no lock between them (PostgreSQL's group commit only). Entries
 * queued by replicas cost at least such a commit each; it shows how loaded the machine was in the run.
 */
async function plainCommits(target: Target): Promise<{ perSecond: number; cpuMsPerCommit: number; nodeCpuMsPerCommit: number }> {
  const make = target.client as () => Promise<Client>;
  const clients = await Promise.all(Array.from({ length: CLIENTS }, make));
  try {
    await (clients[0] as Client).query('CREATE TABLE bench_plain (id bigserial PRIMARY KEY, payload text NOT NULL)');
    const text = JSON.stringify(payload(0));
    const [[, seconds], cpuMs, ownCpuMs] = await withMachineCpu(() =>
      timed(() =>
        Promise.all(
          clients.map(async (client, c) => {
            for (let i = c; i < APPENDS; i += CLIENTS) await client.query('INSERT INTO bench_plain (payload) VALUES ($1)', [text]);
          }),
        ),
      ),
    );
    await (clients[0] as Client).query('DROP TABLE bench_plain');
    return { perSecond: Math.round(APPENDS / seconds), cpuMsPerCommit: +(cpuMs / APPENDS).toFixed(2), nodeCpuMsPerCommit: +(ownCpuMs / APPENDS).toFixed(2) };
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
}

/**
 * `--floors` (docs/decisions/0013-audit-across-replicas.md, "What still limits twenty replicas"):
 * twenty connections each writing one entry at a time, as replicas do, in three ways no replica uses
 * today: into a copy of the queue alone (the least any entry passing through the queue costs);
 * written once into a copy of `audit_log` with all its indexes, `seq` from a sequence and each entry
 * linked to its writer's previous one (the least an entry written in its final place costs); and
 * chained in place (`chainedInPlace`).
 */
async function floorWrites(target: Target): Promise<Results> {
  const make = target.client as () => Promise<Client>;
  const clients = await Promise.all(Array.from({ length: CLIENTS }, make));
  const first = clients[0] as Client;
  try {
    await first.query(`CREATE TABLE bench_queue (LIKE audit_pending INCLUDING ALL);
      CREATE TABLE bench_log (LIKE audit_log INCLUDING ALL, prev_seq int8);
      CREATE SEQUENCE bench_log_seq OWNED BY bench_log.seq;
      ALTER TABLE bench_log ALTER COLUMN seq SET DEFAULT nextval('bench_log_seq')`);
    const results: Results = {};
    const measure = async (name: string, write: (client: Client, c: number, i: number, state: { seq: string | null; hash: string }) => Promise<void>) => {
      const [[, seconds], cpuMs] = await withMachineCpu(() =>
        timed(() =>
          Promise.all(
            clients.map(async (client, c) => {
              const state = { seq: null as string | null, hash: GENESIS_HASH };
              for (let i = c; i < APPENDS; i += CLIENTS) await write(client, c, i, state);
            }),
          ),
        ),
      );
      results[`${name}PerSecond`] = Math.round(APPENDS / seconds);
      results[`${name}CpuMsPerEntry`] = +(cpuMs / APPENDS).toFixed(2);
    };
    await measure('queueOnly', async (client, c, i) => {
      await client.query({
        name: 'bench_queue',
        text: 'INSERT INTO bench_queue (entry_key, actor, kind, project_id, session_id, payload) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, entry_key',
        values: [randomUUID(), `replica-${c}`, 'bench.replicas', null, `r-${c}`, JSON.stringify({ ...payload(i), i })],
      });
    });
    await measure('writtenOnce', async (client, c, i, state) => {
      // Hashed as the chain hashes an entry; the writer's own sequence number stands in for its seq.
      const at = new Date();
      const entry = { seq: i + 1, at, actor: `replica-${c}`, kind: 'bench.replicas', projectId: null, sessionId: `r-${c}`, payload: JSON.stringify({ ...payload(i), i }) };
      const hash = chainHash(state.hash, entry);
      const { rows } = await client.query<{ seq: string }>({
        name: 'bench_log',
        text: `INSERT INTO bench_log (at, actor, kind, project_id, session_id, payload, prev_hash, hash, entry_key, prev_seq)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq`,
        values: [at.toISOString(), entry.actor, entry.kind, entry.projectId, entry.sessionId, entry.payload, state.hash, hash, randomUUID(), state.seq],
      });
      state.seq = (rows[0] as { seq: string }).seq;
      state.hash = hash;
    });
    Object.assign(results, await chainedInPlace(clients, target));
    await first.query('DROP TABLE bench_queue; DROP TABLE bench_log');
    return results;
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
}

/**
 * The third floor: written once and chained in place. The writers insert each entry in its final
 * place, `seq` from a sequence and its hashes empty (each insert holding a shared advisory lock, as
 * a round that finds a gap would wait for the inserts under way); meanwhile one bare chainer links
 * the unbroken run past the head with the chain's own hash and writes the two hash columns, which
 * no index covers, so the row is rewritten in its page (a HOT update; the table leaves room for it).
 */
/** The shared advisory lock each insert of `chainedInPlace` takes (a key none of the gateway's locks uses). */
const INSERT_LOCK = 7_341_205_121;

async function chainedInPlace(writers: Client[], target: Target): Promise<Results> {
  const chainer = await (target.client as () => Promise<Client>)();
  try {
    await chainer.query(`CREATE TABLE bench_inplace (LIKE audit_log INCLUDING ALL) WITH (fillfactor = 70);
      ALTER TABLE bench_inplace ALTER COLUMN prev_hash DROP NOT NULL, ALTER COLUMN hash DROP NOT NULL;
      CREATE SEQUENCE bench_inplace_seq OWNED BY bench_inplace.seq;
      CREATE TABLE bench_inplace_head (seq int8 NOT NULL, hash text NOT NULL);
      INSERT INTO bench_inplace_head VALUES (0, '${GENESIS_HASH}')`);
    let written = false;
    let rounds = 0;
    const write = Promise.all(
      writers.map(async (client, c) => {
        for (let i = c; i < APPENDS; i += CLIENTS) {
          await client.query({
            name: 'bench_inplace',
            text: `WITH l AS (SELECT pg_advisory_xact_lock_shared(${INSERT_LOCK}) AS x)
                   INSERT INTO bench_inplace (seq, at, actor, kind, project_id, session_id, payload, entry_key)
                   SELECT nextval('bench_inplace_seq'), date_trunc('milliseconds', clock_timestamp()), $1, $2, $3, $4, $5, $6 FROM l`,
            values: [`replica-${c}`, 'bench.replicas', null, `r-${c}`, JSON.stringify({ ...payload(i), i }), randomUUID()],
          });
        }
      }),
    ).finally(() => {
      written = true;
    });
    const chain = async () => {
      for (let head = 0; head < APPENDS;) {
        await chainer.query('BEGIN');
        const [at] = (await chainer.query<{ seq: string; hash: string }>('SELECT seq, hash FROM bench_inplace_head FOR UPDATE')).rows;
        let seq = Number(at?.seq);
        let prev = at?.hash as string;
        const { rows } = await chainer.query<AuditLogRow>({
          name: 'bench_inplace_read',
          text: `SELECT seq, at, actor, kind, project_id AS "projectId", session_id AS "sessionId", payload FROM bench_inplace WHERE seq > $1 ORDER BY seq LIMIT 2000`,
          values: [seq],
        });
        const link: { seqs: number[]; prev: string[]; hash: string[] } = { seqs: [], prev: [], hash: [] };
        // Only the unbroken run: a missing seq is an insert still under way, chained next round.
        for (const row of rows) {
          if (Number(row.seq) !== seq + 1) break;
          const hash = chainHash(prev, { ...row, seq: Number(row.seq) });
          link.seqs.push(seq + 1);
          link.prev.push(prev);
          link.hash.push(hash);
          prev = hash;
          seq += 1;
        }
        if (link.seqs.length > 0) {
          await chainer.query({
            name: 'bench_inplace_link',
            text: 'UPDATE bench_inplace l SET prev_hash = x.p, hash = x.h FROM unnest($1::int8[], $2::text[], $3::text[]) AS x(s, p, h) WHERE l.seq = x.s',
            values: [link.seqs, link.prev, link.hash],
          });
          await chainer.query('UPDATE bench_inplace_head SET seq = $1, hash = $2', [seq, prev]);
        }
        await chainer.query('COMMIT');
        rounds += 1;
        head = seq;
        if (link.seqs.length < 50 && !written) await new Promise((resolve) => setTimeout(resolve, 2));
      }
    };
    const [[, seconds], cpuMs] = await withMachineCpu(() => timed(() => Promise.all([write, chain()])));
    // The chainer's statistics reach the shared counters once its connection has been idle.
    await chainer.query('SELECT pg_stat_force_next_flush()');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const [check] = (
      await chainer.query<{ chained: number; hot: number; updated: number }>(
        `SELECT (SELECT count(*)::int FROM bench_inplace WHERE hash IS NOT NULL) AS chained, n_tup_hot_upd::int AS hot, n_tup_upd::int AS updated
           FROM pg_stat_user_tables WHERE relname = 'bench_inplace'`,
      )
    ).rows;
    await chainer.query('DROP TABLE bench_inplace; DROP TABLE bench_inplace_head');
    if (check?.chained !== APPENDS) throw new Error(`chained in place: ${String(check?.chained)} of ${APPENDS} entries were chained.`);
    return {
      inPlacePerSecond: Math.round(APPENDS / seconds),
      inPlaceCpuMsPerEntry: +(cpuMs / APPENDS).toFixed(2),
      inPlaceRounds: rounds,
      inPlaceHotShare: check.updated > 0 ? +(check.hot / check.updated).toFixed(2) : 0,
    };
  } finally {
    await chainer.end();
  }
}

async function run(target: Target): Promise<Results> {
  const database = await target.open();
  const results: Results = { database: target.name };
  try {
    const audit = new AuditService(new AuditLogRepository(database.db));
    let n = 0;

    // One caller, one append at a time: the latency floor of one chaining transaction.
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

    // Twenty replicas, each its own AuditService on a connection of its own, one caller each
    // appending one entry at a time: whoever holds the chainer lock chains, the others queue.
    if (target.connect && target.client) {
      const plain = await plainCommits(target);
      results['plainCommitsPerSecond'] = plain.perSecond;
      results['plainCpuMsPerCommit'] = plain.cpuMsPerCommit;
      results['plainNodeCpuMsPerCommit'] = plain.nodeCpuMsPerCommit;
      if (floors) Object.assign(results, await floorWrites(target));
      const replicas = await Promise.all(Array.from({ length: CLIENTS }, () => (target.connect as () => Promise<Database>)()));
      const services = replicas.map((replica) => new AuditService(new AuditLogRepository(replica.db)));
      try {
        // What a gateway's actions call: `record`, answered once the entry is on disk (chained, or
        // queued for the round under way). Timed until every entry is in the chain, not just queued.
        let recordedSeconds = 0;
        const started = process.hrtime.bigint();
        const [[, s3], cpuMs, ownCpuMs] = await withMachineCpu(() =>
          timed(async () => {
            await Promise.all(
              services.map(async (own, c) => {
                for (let i = c; i < APPENDS; i += CLIENTS) await own.record({ actor: `replica-${c}`, kind: 'bench.replicas', sessionId: `r-${c}`, payload: { ...payload(n++), i } });
              }),
            );
            recordedSeconds = Number(process.hrtime.bigint() - started) / 1e9;
            await Promise.all(services.map((own) => own.drain()));
          }),
        );
        results['separateConnectionsPerSecond'] = Math.round(APPENDS / s3);
        results['replicaRecordedPerSecond'] = Math.round(APPENDS / recordedSeconds);
        results['replicaCpuMsPerEntry'] = +(cpuMs / APPENDS).toFixed(2);
        results['replicaNodeCpuMsPerEntry'] = +(ownCpuMs / APPENDS).toFixed(2);
      } finally {
        // As a gateway shuts down: the round a chainer owes is done before its database closes.
        await Promise.all(services.map((s) => s.beforeApplicationShutdown()));
        await Promise.all(replicas.map((r) => r.close()));
      }
      // Every entry once, none left queued, and each replica's entries in the order it wrote them.
      const check = await target.client();
      try {
        const { rows } = await check.query<{ entries: number; sessions: number; queued: number; disordered: number }>(
          `SELECT count(*)::int AS entries, count(DISTINCT session_id)::int AS sessions,
                  (SELECT count(*)::int FROM audit_pending) AS queued,
                  count(*) FILTER (WHERE i < prev_i)::int AS disordered
             FROM (SELECT session_id, (payload::jsonb->>'i')::int AS i,
                          lag((payload::jsonb->>'i')::int) OVER (PARTITION BY session_id ORDER BY seq) AS prev_i
                     FROM audit_log WHERE kind = 'bench.replicas') t`,
        );
        const shape = rows[0] as { entries: number; sessions: number; queued: number; disordered: number };
        results['replicaEntriesOnceInOrder'] = shape.entries === APPENDS && shape.sessions === CLIENTS && shape.queued === 0 && shape.disordered === 0;
      } finally {
        await check.end();
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

const verdict = (value: unknown, target: number) => (typeof value === 'number' && value >= target ? 'met' : 'missed');

async function main() {
  const all: Results[] = [];
  const targets = [
    ['pglite', pgliteTarget],
    ['postgres', postgresTarget],
  ] as const;
  for (const [name, make] of targets) {
    if (only && only !== name) continue;
    all.push(await run(await make()));
  }
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ node: process.version, cpus: os.cpus().length, appends: APPENDS, clients: CLIENTS, targets: { replicas: TARGET_REPLICAS, oneGateway: TARGET_ONE_GATEWAY }, results: all })}\n`,
    );
    return;
  }
  process.stdout.write(`audit chain, ${APPENDS} appends per scenario, ${CLIENTS} callers, verify over ${VERIFY_ENTRIES} entries (${process.version}, ${os.cpus().length} CPUs)\n`);
  for (const r of all) {
    process.stdout.write(`  ${r['database']}\n`);
    process.stdout.write(`    sequential, one caller           ${String(r['sequentialPerSecond']).padStart(6)}/s\n`);
    process.stdout.write(
      `    20 callers, one gateway          ${String(r['concurrentPerSecond']).padStart(6)}/s   target ≥ ${TARGET_ONE_GATEWAY}/s: ${verdict(r['concurrentPerSecond'], TARGET_ONE_GATEWAY)}\n`,
    );
    if (r['separateConnectionsPerSecond'] !== undefined) {
      process.stdout.write(
        `    20 replicas, own connections     ${String(r['separateConnectionsPerSecond']).padStart(6)}/s   target ≥ ${TARGET_REPLICAS}/s: ${verdict(r['separateConnectionsPerSecond'], TARGET_REPLICAS)}` +
          `   (every entry once, in order per replica: ${r['replicaEntriesOnceInOrder'] ? 'yes' : 'NO'}; answered at ${r['replicaRecordedPerSecond']}/s)   machine CPU ${r['replicaCpuMsPerEntry']} ms/entry, of which the replicas' Node.js ${r['replicaNodeCpuMsPerEntry']} ms\n`,
      );
      process.stdout.write(
        `    20 connections, one-row commits  ${String(r['plainCommitsPerSecond']).padStart(6)}/s   (no chain: plain commits the machine managed during this run)   machine CPU ${r['plainCpuMsPerCommit']} ms/commit, of which Node.js ${r['plainNodeCpuMsPerCommit']} ms\n`,
      );
      if (r['queueOnlyPerSecond'] !== undefined) {
        const share = (key: string) => (Number(r[key]) / Number(r['plainCommitsPerSecond'])).toFixed(2);
        process.stdout.write(
          `    20 connections, queue insert     ${String(r['queueOnlyPerSecond']).padStart(6)}/s   (${share('queueOnlyPerSecond')} of plain commits: the least an entry that passes through the queue costs)   machine CPU ${r['queueOnlyCpuMsPerEntry']} ms/entry\n`,
        );
        process.stdout.write(
          `    20 connections, written once     ${String(r['writtenOncePerSecond']).padStart(6)}/s   (${share('writtenOncePerSecond')} of plain commits: an entry in its final place, linked to its writer's previous one)   machine CPU ${r['writtenOnceCpuMsPerEntry']} ms/entry\n`,
        );
        process.stdout.write(
          `    20 connections, chained in place ${String(r['inPlacePerSecond']).padStart(6)}/s   (${share('inPlacePerSecond')} of plain commits: written once, then linked in place by one chainer in ${r['inPlaceRounds']} rounds, ${Math.round(Number(r['inPlaceHotShare']) * 100)} % of them rewritten within their page)   machine CPU ${r['inPlaceCpuMsPerEntry']} ms/entry\n`,
        );
      }
    } else {
      process.stdout.write(`    20 replicas                         n/a   (one process holds an embedded database)\n`);
    }
    process.stdout.write(`    verify ${r['verifiedEntries']} entries in ${r['verifySeconds']} s (${r['verifyPerSecond']}/s)\n`);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}${error instanceof Error && error.cause ? `\n(${String((error.cause as Error).message ?? error.cause)})` : ''}\n`);
  process.exit(1);
});
