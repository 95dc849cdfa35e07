import { Inject, Injectable } from '@nestjs/common';
import type { DrainExecHostRequest, ExecHostHeartbeat, ExecHostHeartbeatResponse, ExecHostView } from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { safeEqual } from '../auth/password';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { ExecHostsRepository } from '../db/repositories/exec-hosts.repository';
import type { ExecHostRow } from '../db/schema';
import { ExecHostClients } from './exec-host-clients';
import { ExecHostPool } from './exec-host-pool';

/** A refused registration is audited at most this often per claimed id, source address and reason. */
const REFUSAL_AUDIT_MS = 60_000;

/**
 * The pool's registrations and heartbeats (docs/decisions/0010-exec-host-pool.md) and its
 * administration: list, drain, undrain.
 */
@Injectable()
export class ExecHostsService {
  private readonly refusalsAudited = new Map<string, number>();

  constructor(
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    private readonly repository: ExecHostsRepository,
    private readonly clients: ExecHostClients,
    private readonly pool: ExecHostPool,
    private readonly audit: AuditService,
  ) {}

  /**
   * An exec-host's heartbeat: its token checked, its address checked against the pool's transport, its
   * identity checked by calling it back when it is new or its address changed, then recorded.
   */
  async heartbeat(authorization: string | undefined, source: string, beat: ExecHostHeartbeat): Promise<ExecHostHeartbeatResponse> {
    const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1];
    const expected = this.config.execHost.token;
    if (!token || !expected || !safeEqual(token, expected)) {
      await this.refuse(beat, source, token ? 'wrong token' : 'no token');
      throw new AppError(ErrorCode.Unauthenticated, 'The exec-host did not present the token this gateway was given (LEMNISCATE_EXEC_HOST_TOKEN), so its registration is refused.');
    }
    const pool = this.config.execHost.pool;
    if (!pool) {
      throw new AppError(
        ErrorCode.Conflict,
        'This gateway has one fixed exec-host (LEMNISCATE_EXEC_HOST_URL) and takes no registrations; start the gateways with LEMNISCATE_EXEC_HOST_POOL=true to run a pool.',
      );
    }
    const transport = this.transportRefusal(beat.address);
    if (transport) {
      await this.refuse(beat, source, transport);
      throw new AppError(ErrorCode.Forbidden, transport);
    }
    const known = await this.repository.find(beat.id);
    if (!known || known.address !== beat.address || known.state === 'lost') {
      // Before a host is placed on, the gateway calls it at the address it gave, as it will for every
      // session: the call needs the host's certificate for that address (mutual TLS) and the token.
      const probe = this.clients.fresh(beat.address);
      const check = await probe.health().finally(() => probe.close());
      if (!check.ok) {
        const why = `The gateway could not verify exec-host ${beat.id} at ${beat.address}: ${check.message ?? 'it did not answer.'}`;
        await this.refuse(beat, source, why);
        throw new AppError(ErrorCode.Forbidden, why);
      }
    }
    const { row, before } = await this.repository.heartbeat(beat);
    const actor = `exec-host:${beat.id}`;
    if (!before) {
      await this.audit.record({ actor, kind: 'exec_host.registered', payload: { hostId: row.id, address: row.address, runtimes: row.runtimes, capacity: row.capacity, version: row.version, source } });
    } else if (before.state === 'lost' && row.state !== 'lost') {
      await this.audit.record({ actor, kind: 'exec_host.returned', payload: { hostId: row.id, address: row.address, state: row.state, lostSince: before.stateChangedAt.toISOString(), source } });
    }
    if (!before || before.state !== row.state || before.address !== row.address) await this.pool.refresh();
    return { id: row.id, state: row.state, heartbeatSeconds: Math.max(1, Math.floor(pool.lostSeconds / 4)), lostAfterSeconds: pool.lostSeconds };
  }

  async list(): Promise<ExecHostView[]> {
    if (!this.config.execHost.pool) return [await this.fixedView()];
    const live = await this.repository.liveSessions();
    return (await this.repository.list()).map((r) => viewOf(r, live.get(r.id) ?? 0));
  }

  async drain(principal: Principal, hostId: string, body: DrainExecHostRequest): Promise<ExecHostView> {
    this.refuseFixed('drained');
    const row = await this.repository.drain(hostId, actorOf(principal), body.reason ?? null);
    if (!row) throw notFound(hostId);
    const live = (await this.repository.liveSessions()).get(row.id) ?? 0;
    await this.audit.record({ actor: actorOf(principal), kind: 'exec_host.drained', payload: { hostId: row.id, reason: body.reason ?? null, state: row.state, liveSessions: live } });
    await this.pool.refresh();
    return viewOf(row, live);
  }

  async undrain(principal: Principal, hostId: string): Promise<ExecHostView> {
    this.refuseFixed('undrained');
    const row = await this.repository.undrain(hostId);
    if (!row) throw notFound(hostId);
    await this.audit.record({ actor: actorOf(principal), kind: 'exec_host.undrained', payload: { hostId: row.id, state: row.state } });
    await this.pool.refresh();
    return viewOf(row, (await this.repository.liveSessions()).get(row.id) ?? 0);
  }

  private refuseFixed(what: string): void {
    if (this.config.execHost.pool) return;
    throw new AppError(ErrorCode.Conflict, `This gateway has one fixed exec-host (LEMNISCATE_EXEC_HOST_URL), not a pool, so it cannot be ${what}: there is no other exec-host to place sessions on.`);
  }

  /** Without a CA to verify exec-hosts, only this machine's are accepted; with one, only mutual TLS. */
  private transportRefusal(address: string): string | null {
    if (address.startsWith('unix:')) return null;
    const url = new URL(address);
    if (this.config.execHost.tls) {
      return url.protocol === 'https:' ? null : `The pool uses mutual TLS (LEMNISCATE_EXEC_HOST_CA is set): an exec-host must advertise an https:// address, not ${address}.`;
    }
    if (url.protocol === 'http:' && isLoopback(url.hostname)) return null;
    return `This gateway has no exec-host CA (LEMNISCATE_EXEC_HOST_CA), so it accepts only exec-hosts on its own machine (unix: or http://127.0.0.1); ${address} needs mutual TLS.`;
  }

  private async refuse(beat: ExecHostHeartbeat, source: string, reason: string): Promise<void> {
    // Per reason too: a host refused for its token, then for its certificate, is audited for both.
    const key = `${beat.id}\0${source}\0${reason}`;
    const now = Date.now();
    if ((this.refusalsAudited.get(key) ?? 0) > now - REFUSAL_AUDIT_MS) return;
    this.refusalsAudited.set(key, now);
    if (this.refusalsAudited.size > 10_000) this.refusalsAudited.clear();
    await this.audit.record({ actor: `exec-host:${beat.id}`, kind: 'exec_host.registration_refused', payload: { hostId: beat.id, address: beat.address, source, reason } });
  }

  private async fixedView(): Promise<ExecHostView> {
    return {
      id: 'fixed',
      address: this.config.execHost.url,
      kind: 'fixed',
      state: 'active',
      runtimes: [],
      images: [],
      environments: [],
      capacity: 0,
      load: 0,
      warm: null,
      liveSessions: await this.repository.runningRootSessions(),
      version: null,
      registeredAt: null,
      lastHeartbeatAt: null,
      drainedBy: null,
      drainReason: null,
      stateChangedAt: null,
    };
  }
}

function viewOf(r: ExecHostRow, liveSessions: number): ExecHostView {
  return {
    id: r.id,
    address: r.address,
    kind: 'registered',
    state: r.state,
    runtimes: r.runtimes,
    images: r.images,
    environments: r.environments,
    capacity: r.capacity,
    load: r.load,
    warm: r.warm ?? null,
    liveSessions,
    version: r.version,
    registeredAt: r.registeredAt.toISOString(),
    lastHeartbeatAt: r.lastHeartbeatAt.toISOString(),
    drainedBy: r.drainedBy,
    drainReason: r.drainReason,
    stateChangedAt: r.stateChangedAt.toISOString(),
  };
}

function notFound(hostId: string): AppError {
  return new AppError(ErrorCode.NotFound, `No exec-host "${hostId}" has registered with the platform; \`lemni admin exec-hosts list\` shows those that have.`);
}

function isLoopback(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}
