import { Inject, Injectable } from '@nestjs/common';
import type { ExecHostHeartbeat } from '@lemniscate/contracts';
import { and, asc, count, eq, isNotNull, isNull, lt, ne, sql } from 'drizzle-orm';
import type { Db } from '../database';
import { execHosts, sessions, type ExecHostRow } from '../schema';
import { DB } from '../tokens';
import { Repository } from './repository';

export interface HeartbeatRecorded {
  row: ExecHostRow;
  /** What the row said before this heartbeat; undefined when this heartbeat registered the host. */
  before: ExecHostRow | undefined;
}

/** The exec-host pool (0010_exec_hosts): registrations, heartbeats, states, and the sessions placed on each host. */
@Injectable()
export class ExecHostsRepository extends Repository {
  constructor(@Inject(DB) db: Db) {
    super(db);
  }

  list(): Promise<ExecHostRow[]> {
    return this.db.select().from(execHosts).orderBy(asc(execHosts.id));
  }

  async find(id: string): Promise<ExecHostRow | undefined> {
    const [row] = await this.db.select().from(execHosts).where(eq(execHosts.id, id));
    return row;
  }

  /**
   * Records a heartbeat: registers the host, or refreshes what it says about itself. A lost host
   * comes back `active`, or `draining` while an operator keeps it drained.
   */
  async heartbeat(beat: ExecHostHeartbeat, at: Date = new Date()): Promise<HeartbeatRecorded> {
    const before = await this.find(beat.id);
    const said = {
      address: beat.address,
      runtimes: beat.runtimes,
      images: beat.images,
      environments: beat.environments,
      capacity: beat.capacity,
      load: beat.load,
      warm: beat.warm ?? null,
      version: beat.version,
    };
    const [row] = await this.db
      .insert(execHosts)
      .values({ id: beat.id, ...said, state: 'active', stateChangedAt: at, registeredAt: at, lastHeartbeatAt: at })
      .onConflictDoUpdate({
        target: execHosts.id,
        set: {
          ...said,
          lastHeartbeatAt: at,
          state: sql`CASE WHEN ${execHosts.state} = 'lost' THEN (CASE WHEN ${execHosts.drainedBy} IS NULL THEN 'active' ELSE 'draining' END) ELSE ${execHosts.state} END`,
          stateChangedAt: sql`CASE WHEN ${execHosts.state} = 'lost' THEN ${at.toISOString()}::timestamptz ELSE ${execHosts.stateChangedAt} END`,
        },
      })
      .returning();
    return { row: row as ExecHostRow, before };
  }

  /** Hosts silent since `before`, now lost; each is returned to exactly one caller (the one whose update changed it). */
  markLost(before: Date, at: Date = new Date()): Promise<ExecHostRow[]> {
    return this.db
      .update(execHosts)
      .set({ state: 'lost', stateChangedAt: at })
      .where(and(ne(execHosts.state, 'lost'), lt(execHosts.lastHeartbeatAt, before)))
      .returning();
  }

  /** Keeps the host drained (no new session) until undrained; a lost host returns drained. */
  async drain(id: string, by: string, reason: string | null, at: Date = new Date()): Promise<ExecHostRow | undefined> {
    const [row] = await this.db
      .update(execHosts)
      .set({
        drainedBy: by,
        drainReason: reason,
        state: sql`CASE WHEN ${execHosts.state} = 'active' THEN 'draining' ELSE ${execHosts.state} END`,
        stateChangedAt: sql`CASE WHEN ${execHosts.state} = 'active' THEN ${at.toISOString()}::timestamptz ELSE ${execHosts.stateChangedAt} END`,
      })
      .where(eq(execHosts.id, id))
      .returning();
    return row;
  }

  async undrain(id: string, at: Date = new Date()): Promise<ExecHostRow | undefined> {
    const [row] = await this.db
      .update(execHosts)
      .set({
        drainedBy: null,
        drainReason: null,
        state: sql`CASE WHEN ${execHosts.state} = 'draining' THEN 'active' ELSE ${execHosts.state} END`,
        stateChangedAt: sql`CASE WHEN ${execHosts.state} = 'draining' THEN ${at.toISOString()}::timestamptz ELSE ${execHosts.stateChangedAt} END`,
      })
      .where(eq(execHosts.id, id))
      .returning();
    return row;
  }

  /** The active hosts, locked until the transaction ends: two placements never both take a host's last slot. */
  lockActive(): Promise<ExecHostRow[]> {
    return this.db.select().from(execHosts).where(eq(execHosts.state, 'active')).orderBy(asc(execHosts.id)).for('update');
  }

  /** Running root sessions per host (a session tree shares its root's sandbox). */
  async liveSessions(): Promise<Map<string, number>> {
    const rows = await this.db
      .select({ host: sessions.execHost, n: count() })
      .from(sessions)
      .where(and(eq(sessions.status, 'running'), isNull(sessions.parentSessionId), isNotNull(sessions.execHost)))
      .groupBy(sessions.execHost);
    return new Map(rows.map((r) => [r.host as string, Number(r.n)]));
  }

  /** Running root sessions, wherever they run (a gateway with one fixed exec-host records no placement). */
  async runningRootSessions(): Promise<number> {
    const [row] = await this.db
      .select({ n: count() })
      .from(sessions)
      .where(and(eq(sessions.status, 'running'), isNull(sessions.parentSessionId)));
    return Number(row?.n ?? 0);
  }

  /** Records where a session's sandbox is placed (before it is created, so a crash mid-creation is traceable). */
  async place(sessionId: string, hostId: string): Promise<void> {
    await this.db.update(sessions).set({ execHost: hostId }).where(eq(sessions.id, sessionId));
  }

  /** The host a sandbox was placed on, from its session. */
  async hostOfSandbox(sandboxId: string): Promise<string | undefined> {
    const [row] = await this.db
      .select({ host: sessions.execHost })
      .from(sessions)
      .where(and(eq(sessions.sandboxId, sandboxId), isNotNull(sessions.execHost)))
      .limit(1);
    return row?.host ?? undefined;
  }

  /** The running root sessions placed on a host. */
  runningOn(hostId: string): Promise<{ id: string; sandboxId: string | null }[]> {
    return this.db
      .select({ id: sessions.id, sandboxId: sessions.sandboxId })
      .from(sessions)
      .where(and(eq(sessions.execHost, hostId), eq(sessions.status, 'running'), isNull(sessions.parentSessionId)));
  }
}
