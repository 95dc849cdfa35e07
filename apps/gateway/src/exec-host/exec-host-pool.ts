import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type {
  CreateSandboxRequest,
  EnvironmentLog,
  EnvironmentRequest,
  EnvironmentState,
  EnvironmentStatus,
  PrepareEnvironmentRequest,
  RepositoryDirectory,
  RepositoryDirectoryRequest,
  SandboxInfo,
  SandboxRuntime,
} from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { MetricsService } from '../metrics/metrics.service';
import { ExecHostsRepository } from '../db/repositories/exec-hosts.repository';
import { Transactions } from '../db/repositories/transactions';
import type { ExecHostRow } from '../db/schema';
import { SessionRunRegistry } from '../sessions/session-run.registry';
import { ExecHostClients } from './exec-host-clients';
import { ExecHostCallError, type ExecHostCheck, type ExecHostPort } from './exec-host.port';
import { environmentHome, place, type PlacementHost } from './placement';

/** How many hosts a sandbox's creation tries when one refuses it for room or cannot be reached. */
const PLACEMENT_ATTEMPTS = 3;

/**
 * The exec-host pool (docs/decisions/0010-exec-host-pool.md), as the one ExecHostPort the gateway
 * uses in pool mode. It places each new sandbox, records the placement on the session, and sends
 * every later call for that sandbox to the host it was placed on — from any gateway replica, since
 * the placement is read back from the database. It watches the heartbeats: a silent host is declared
 * lost (by exactly one gateway, which audits it), and every gateway then cuts the calls in flight to
 * it and ends the sessions it runs there as `sandbox_lost`.
 */
@Injectable()
export class ExecHostPool implements ExecHostPort, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('ExecHostPool');
  /** The hosts as last read from the database. */
  private hosts = new Map<string, ExecHostRow>();
  /** Aborted when the host is declared lost; renewed when it comes back. */
  private readonly lossSignals = new Map<string, AbortController>();
  private readonly sandboxHosts = new Map<string, string>();
  private readonly jobHosts = new Map<string, string>();
  /** What a status read last said of each project's environment, and on which host. */
  private readonly environments = new Map<string, { state: EnvironmentState; hostId: string }>();
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;

  constructor(
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    private readonly repository: ExecHostsRepository,
    private readonly transactions: Transactions,
    private readonly clients: ExecHostClients,
    private readonly audit: AuditService,
    private readonly registry: SessionRunRegistry,
    private readonly metrics: MetricsService,
  ) {}

  private get lostSeconds(): number {
    return this.config.execHost.pool?.lostSeconds ?? 20;
  }

  onApplicationBootstrap(): void {
    if (!this.config.execHost.pool) return;
    const everyMs = Math.max(250, Math.min(2_000, Math.floor((this.lostSeconds * 1000) / 4)));
    this.timer = setInterval(() => void this.refresh().catch((e: unknown) => this.logger.warn(`Reading the exec-host pool failed: ${(e as Error).message}`)), everyMs);
    this.timer.unref();
    void this.refresh().catch(() => undefined);
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
    for (const c of this.lossSignals.values()) c.abort();
  }

  /** Declares silent hosts lost, then reads every host again and acts on the ones newly lost. */
  refresh(): Promise<void> {
    this.refreshing ??= this.pass().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async pass(): Promise<void> {
    const now = new Date();
    for (const row of await this.repository.markLost(new Date(now.getTime() - this.lostSeconds * 1000), now)) {
      const sessions = await this.repository.runningOn(row.id);
      this.logger.warn(`Exec-host ${row.id} sent no heartbeat for ${this.lostSeconds} s and is lost; ${sessions.length} live session(s) end as sandbox_lost.`);
      await this.audit.record({
        actor: 'system',
        kind: 'exec_host.lost',
        payload: { hostId: row.id, address: row.address, lastHeartbeatAt: row.lastHeartbeatAt.toISOString(), lostAfterSeconds: this.lostSeconds, sessions: sessions.map((s) => s.id) },
      });
    }
    const rows = await this.repository.list();
    const previous = this.hosts;
    this.hosts = new Map(rows.map((r) => [r.id, r]));
    for (const state of ['active', 'draining', 'lost'] as const) this.metrics.execHosts.set({ state }, rows.filter((r) => r.state === state).length);
    for (const row of rows) {
      const was = previous.get(row.id);
      if (row.state === 'lost' && was?.state !== 'lost') await this.onLost(row);
      if (row.state !== 'lost' && this.lossSignals.get(row.id)?.signal.aborted) this.lossSignals.delete(row.id);
    }
  }

  /** A host this gateway sees lost: calls in flight to it are cut, and the loops running here on it end. */
  private async onLost(row: ExecHostRow): Promise<void> {
    this.lossSignal(row.id).abort();
    for (const session of await this.repository.runningOn(row.id)) {
      if (this.registry.cancel(session.id, 'sandbox_lost')) this.logger.warn(`Session ${session.id} ended: its exec-host ${row.id} is lost.`);
    }
  }

  private lossSignal(hostId: string): AbortController {
    let controller = this.lossSignals.get(hostId);
    if (!controller) {
      controller = new AbortController();
      this.lossSignals.set(hostId, controller);
    }
    return controller;
  }

  private freshSince(): Date {
    return new Date(Date.now() - this.lostSeconds * 1000);
  }

  /** The hosts as placement sees them, with live sessions counted now (through `repository`, which may be bound to a transaction). */
  private async placementHosts(rows: readonly ExecHostRow[], repository: ExecHostsRepository = this.repository): Promise<PlacementHost[]> {
    const live = await repository.liveSessions();
    return rows.map((r) => toPlacementHost(r, live.get(r.id) ?? 0));
  }

  private async host(hostId: string): Promise<ExecHostRow | undefined> {
    if (!this.hosts.has(hostId)) await this.refresh();
    return this.hosts.get(hostId);
  }

  // ───────────────────────────── the port

  async health(): Promise<ExecHostCheck> {
    if (this.hosts.size === 0) await this.refresh().catch(() => undefined);
    const since = this.freshSince();
    const usable = [...this.hosts.values()].filter((h) => h.state === 'active' && h.lastHeartbeatAt >= since);
    // The gateway itself is ready without exec-hosts (they register through it): the check says how the pool stands.
    if (usable.length === 0) return { ok: true, message: `No exec-host can take a session now (${this.hosts.size} registered, none active with a fresh heartbeat).` };
    return { ok: true, message: `${usable.length} of ${this.hosts.size} exec-host(s) take sessions.` };
  }

  async create(request: CreateSandboxRequest, signal?: AbortSignal): Promise<SandboxInfo> {
    const exclude: string[] = [];
    let last: unknown;
    for (let attempt = 0; attempt < PLACEMENT_ATTEMPTS; attempt++) {
      const hostId = await this.placeSandbox(request, exclude);
      try {
        const info = await this.onHost(hostId, (client, s) => client.create(request, s), signal);
        this.sandboxHosts.set(info.sandboxId, hostId);
        this.metrics.placements.inc({ result: 'placed' });
        return info;
      } catch (err) {
        // Full after all (another gateway's placement, or sandboxes the host runs for nobody yet), or
        // not reachable before anything was sent: another host may take it.
        const retry = err instanceof ExecHostCallError && (err.code === 'sandbox_limit_reached' || (err.code === 'engine_unavailable' && err.neverReached));
        if (!retry || signal?.aborted) throw err;
        this.logger.warn(`Exec-host ${hostId} did not take the sandbox of session ${request.sessionId} (${err.message}); placing it again.`);
        exclude.push(hostId);
        this.metrics.placements.inc({ result: 'retried' });
        last = err;
      }
    }
    throw last;
  }

  /** Chooses a host in a transaction that locks the active hosts, and records the choice on the session. */
  private async placeSandbox(request: CreateSandboxRequest, exclude: readonly string[]): Promise<string> {
    const runtime: SandboxRuntime = request.runtime ?? 'runc';
    const projectId = request.environment?.projectId;
    const known = projectId ? this.environments.get(projectId) : undefined;
    // A project whose repository has no devcontainer runs from the sandbox image, present on every host.
    const needsEnvironment = projectId !== undefined && known !== undefined && known.state !== 'base';
    if (this.hosts.size === 0) await this.refresh();
    const placed = await this.transactions.run(async (tx) => {
      const repository = this.repository.withTx(tx);
      const active = await repository.lockActive();
      // The others only say why they were passed over; what the locked read found active wins over this replica's last read.
      const others = [...this.hosts.values()].filter((h) => h.state !== 'active' && !active.some((a) => a.id === h.id));
      const hosts = await this.placementHosts([...active, ...others], repository);
      const choice = place(hosts, {
        runtime,
        ...(needsEnvironment ? { environmentProjectId: projectId, environmentHosts: known?.state === 'ready' ? [known.hostId] : [] } : {}),
        exclude,
        freshSince: this.freshSince(),
      });
      if (choice.ok) await repository.place(request.sessionId, choice.hostId);
      return choice;
    });
    if (!placed.ok) this.metrics.placements.inc({ result: 'refused' });
    if (!placed.ok) throw new ExecHostCallError('sandbox_limit_reached', placed.message, 503, { answered: false });
    return placed.hostId;
  }

  destroy(sandboxId: string): Promise<void> {
    return this.onSandbox(sandboxId, (c, s) => c.destroy(sandboxId).then(() => void s));
  }
  exec(...[id, request, onOutput, signal]: Parameters<ExecHostPort['exec']>) {
    return this.onSandbox(id, (c, s) => c.exec(id, request, onOutput, s), signal);
  }
  read(...[id, request, signal]: Parameters<ExecHostPort['read']>) {
    return this.onSandbox(id, (c, s) => c.read(id, request, s), signal);
  }
  list(...[id, request, signal]: Parameters<ExecHostPort['list']>) {
    return this.onSandbox(id, (c, s) => c.list(id, request, s), signal);
  }
  search(...[id, request, signal]: Parameters<ExecHostPort['search']>) {
    return this.onSandbox(id, (c, s) => c.search(id, request, s), signal);
  }
  proposeWrite(...[id, request, signal]: Parameters<ExecHostPort['proposeWrite']>) {
    return this.onSandbox(id, (c, s) => c.proposeWrite(id, request, s), signal);
  }
  proposeEdit(...[id, request, signal]: Parameters<ExecHostPort['proposeEdit']>) {
    return this.onSandbox(id, (c, s) => c.proposeEdit(id, request, s), signal);
  }
  apply(...[id, diff, signal]: Parameters<ExecHostPort['apply']>) {
    return this.onSandbox(id, (c, s) => c.apply(id, diff, s), signal);
  }
  changes(...[id, signal]: Parameters<ExecHostPort['changes']>) {
    return this.onSandbox(id, (c, s) => c.changes(id, s), signal);
  }
  accept(...[id, paths, signal]: Parameters<ExecHostPort['accept']>) {
    return this.onSandbox(id, (c, s) => c.accept(id, paths, s), signal);
  }
  revert(...[id, paths, signal]: Parameters<ExecHostPort['revert']>) {
    return this.onSandbox(id, (c, s) => c.revert(id, paths, s), signal);
  }
  mcpOpen(...[id, request, signal]: Parameters<ExecHostPort['mcpOpen']>) {
    return this.onSandbox(id, (c, s) => c.mcpOpen(id, request, s), signal);
  }
  mcpMessage(...[id, processId, request, signal]: Parameters<ExecHostPort['mcpMessage']>) {
    return this.onSandbox(id, (c, s) => c.mcpMessage(id, processId, request, s), signal);
  }
  mcpClose(...[id, processId, signal]: Parameters<ExecHostPort['mcpClose']>) {
    return this.onSandbox(id, (c, s) => c.mcpClose(id, processId, s), signal);
  }
  patch(...[id, signal]: Parameters<ExecHostPort['patch']>) {
    return this.onSandbox(id, (c, s) => c.patch(id, s), signal);
  }

  async environmentStatus(request: EnvironmentRequest, signal?: AbortSignal): Promise<EnvironmentStatus> {
    const hostId = await this.environmentHost(request);
    return this.noteEnvironment(request.projectId, hostId, await this.onHost(hostId, (c, s) => c.environmentStatus(request, s), signal));
  }

  async prepareEnvironment(request: PrepareEnvironmentRequest, signal?: AbortSignal): Promise<EnvironmentStatus> {
    const hostId = await this.environmentHost(request);
    return this.noteEnvironment(request.projectId, hostId, await this.onHost(hostId, (c, s) => c.prepareEnvironment(request, s), signal));
  }

  /** Read where the project's environment is read: the same host, so one host fetches the project's repository. */
  async readRepositoryDirectory(request: RepositoryDirectoryRequest, signal?: AbortSignal): Promise<RepositoryDirectory> {
    const hostId = await this.environmentHost({ projectId: request.projectId, repository: request.repository });
    return this.onHost(hostId, (c, s) => c.readRepositoryDirectory(request, s), signal);
  }

  async environmentLog(jobId: string, offset: number, signal?: AbortSignal): Promise<EnvironmentLog> {
    const known = this.jobHosts.get(jobId);
    if (known) return this.onHost(known, (c, s) => c.environmentLog(jobId, offset, s), signal);
    // Another gateway replica started it: the host that knows the job answers, the others do not know it.
    let last: unknown = new ExecHostCallError('job_not_found', `No exec-host knows environment preparation ${jobId}.`, 404);
    if (this.hosts.size === 0) await this.refresh();
    for (const host of [...this.hosts.values()].filter((h) => h.state !== 'lost')) {
      try {
        const page = await this.onHost(host.id, (c, s) => c.environmentLog(jobId, offset, s), signal);
        this.jobHosts.set(jobId, host.id);
        return page;
      } catch (err) {
        if (!(err instanceof ExecHostCallError) || signal?.aborted) throw err;
        last = err;
      }
    }
    throw last;
  }

  // ───────────────────────────── routing

  /**
   * The host a project's environment is read or prepared on: one that reports it ready (the least
   * loaded), else the one a status already named, else its home (the same on every replica).
   */
  private async environmentHost(request: EnvironmentRequest): Promise<string> {
    if (this.hosts.size === 0) await this.refresh();
    const runtime: SandboxRuntime = request.runtime ?? 'runc';
    const hosts = await this.placementHosts([...this.hosts.values()]);
    const ready = place(hosts, { runtime, environmentProjectId: request.projectId, freshSince: this.freshSince() });
    if (ready.ok) return ready.hostId;
    const known = this.environments.get(request.projectId);
    const usable = (id: string) => hosts.some((h) => h.id === id && h.state === 'active' && h.runtimes.includes(runtime) && h.lastHeartbeatAt >= this.freshSince());
    if (known && usable(known.hostId)) return known.hostId;
    const home = environmentHome(hosts, request.projectId, runtime, this.freshSince());
    if (home) return home;
    throw new ExecHostCallError('engine_unavailable', `No exec-host with the ${runtime} runtime takes work now, so project ${request.projectId}'s environment cannot be read or prepared.`, 503, {
      answered: false,
    });
  }

  private noteEnvironment(projectId: string, hostId: string, status: EnvironmentStatus): EnvironmentStatus {
    this.environments.set(projectId, { state: status.state, hostId });
    if (status.job) this.jobHosts.set(status.job.jobId, hostId);
    return status;
  }

  private async onSandbox<T>(sandboxId: string, fn: (client: ExecHostPort, signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    let hostId = this.sandboxHosts.get(sandboxId);
    if (!hostId) {
      hostId = await this.repository.hostOfSandbox(sandboxId);
      if (!hostId) throw new ExecHostCallError('sandbox_not_found', `No exec-host holds sandbox ${sandboxId}: the platform has no placement for it.`, 404);
      this.sandboxHosts.set(sandboxId, hostId);
    }
    return this.onHost(hostId, fn, signal);
  }

  /** A call to one host, cut with `sandbox_lost` when the host is (or becomes) lost. */
  private async onHost<T>(hostId: string, fn: (client: ExecHostPort, signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    let host = await this.host(hostId);
    // This replica's last read may predate the host's return, while placement reads the database
    // itself: a host last seen lost is read again before a call to it is refused.
    if (host?.state === 'lost') {
      // A database that does not answer leaves the last read standing.
      await this.refresh().catch(() => undefined);
      host = this.hosts.get(hostId);
    }
    if (!host) throw new ExecHostCallError('sandbox_lost', `Exec-host ${hostId} is no longer registered with the platform: the sandbox it held is lost.`, 410);
    if (host.state === 'lost') throw lostError(host);
    // Read back as not lost: a loss signal left from before its return no longer applies.
    if (this.lossSignals.get(hostId)?.signal.aborted) this.lossSignals.delete(hostId);
    const loss = this.lossSignal(hostId).signal;
    try {
      return await fn(this.clients.for(host.address), signal ? AbortSignal.any([signal, loss]) : loss);
    } catch (err) {
      if (loss.aborted && !signal?.aborted) throw lostError(this.hosts.get(hostId) ?? host);
      throw err;
    }
  }
}

function toPlacementHost(r: ExecHostRow, live: number): PlacementHost {
  return { id: r.id, state: r.state, runtimes: r.runtimes, environments: r.environments, capacity: r.capacity, live, lastHeartbeatAt: r.lastHeartbeatAt };
}

function lostError(host: ExecHostRow): ExecHostCallError {
  return new ExecHostCallError(
    'sandbox_lost',
    `Exec-host ${host.id} stopped sending heartbeats (last at ${host.lastHeartbeatAt.toISOString()}) and was declared lost: the sandbox it held is gone.`,
    410,
  );
}
