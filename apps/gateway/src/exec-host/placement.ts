import type { ExecHostState, SandboxRuntime } from '@lemniscate/contracts';

/** What placement knows of one exec-host. */
export interface PlacementHost {
  id: string;
  state: ExecHostState;
  runtimes: readonly SandboxRuntime[];
  environments: readonly string[];
  capacity: number;
  /** Running root sessions placed on it (the database's count, not the host's own report, which lags). */
  live: number;
  lastHeartbeatAt: Date;
}

export interface PlacementRequest {
  runtime: SandboxRuntime;
  /** The project, when its sessions start from a prepared environment. */
  environmentProjectId?: string;
  /** Hosts known to have that environment ready (they said so answering a status, before their next heartbeat says so). */
  environmentHosts?: readonly string[];
  /** Hosts tried already for this sandbox (they refused it). */
  exclude?: readonly string[];
  /** Heartbeats older than this are stale: the host may be gone. */
  freshSince: Date;
}

export type Placement = { ok: true; hostId: string } | { ok: false; message: string };

/**
 * Chooses the exec-host a new sandbox goes to (docs/decisions/0010-exec-host-pool.md): among active,
 * fresh hosts that have the runtime and room, those with the project's environment ready first, then
 * the least loaded (live sessions / capacity, then live sessions), then the id — so every gateway
 * replica, given the same rows, chooses the same host. When none qualifies, a sentence says why each
 * host was passed over.
 */
export function place(hosts: readonly PlacementHost[], request: PlacementRequest): Placement {
  const reasons: string[] = [];
  const candidates: PlacementHost[] = [];
  for (const host of [...hosts].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    const why = passedOver(host, request);
    if (why) reasons.push(`${host.id} ${why}`);
    else candidates.push(host);
  }
  if (request.environmentProjectId) {
    const ready = candidates.filter((h) => hasEnvironment(h, request));
    if (ready.length > 0) return { ok: true, hostId: leastLoaded(ready).id };
    if (candidates.length > 0) {
      // Environments are prepared per host: a host without this one would refuse the sandbox.
      const elsewhere = hosts.filter((h) => hasEnvironment(h, request)).map((h) => h.id);
      return {
        ok: false,
        message: elsewhere.length
          ? `No exec-host with project ${request.environmentProjectId}'s environment ready can take a new session now (${elsewhere.join(', ')}: ${reasonsFor(elsewhere, reasons)}). Try again when a session there ends, or prepare the environment again so it is prepared on another exec-host.`
          : `No exec-host has project ${request.environmentProjectId}'s environment ready: prepare it (\`lemni env prepare\`) and start again.`,
      };
    }
  } else if (candidates.length > 0) {
    return { ok: true, hostId: leastLoaded(candidates).id };
  }
  if (hosts.length === 0)
    return { ok: false, message: 'No exec-host has registered with the platform, so there is nowhere to run a sandbox. Start an exec-host with LEMNISCATE_GATEWAY_URL pointing at this gateway.' };
  return { ok: false, message: `No exec-host can take a new ${request.runtime} sandbox now: ${reasons.join('; ')}.` };
}

/**
 * The host a project's environment is prepared on when no host has it ready: chosen by rendezvous
 * hashing over the hosts that could run it, so every gateway replica, at any time, picks the same
 * one while the pool is unchanged, whatever the load.
 */
export function environmentHome(hosts: readonly PlacementHost[], projectId: string, runtime: SandboxRuntime, freshSince: Date): string | undefined {
  const usable = hosts.filter((h) => !passedOver({ ...h, live: 0 }, { runtime, freshSince }));
  let best: { id: string; score: bigint } | undefined;
  for (const h of usable) {
    const score = fnv1a64(`${projectId}\0${h.id}`);
    if (!best || score > best.score || (score === best.score && h.id < best.id)) best = { id: h.id, score };
  }
  return best?.id;
}

function passedOver(host: PlacementHost, request: Pick<PlacementRequest, 'runtime' | 'freshSince' | 'exclude'>): string | null {
  if (host.state === 'draining') return 'is drained';
  if (host.state === 'lost') return 'is lost (no heartbeat)';
  if (host.lastHeartbeatAt < request.freshSince) return `has not sent a heartbeat since ${host.lastHeartbeatAt.toISOString()}`;
  if (!host.runtimes.includes(request.runtime)) return `has no ${request.runtime} runtime`;
  if (request.exclude?.includes(host.id)) return 'refused this sandbox';
  if (host.live >= host.capacity) return `is full (${host.live} of ${host.capacity} sessions)`;
  return null;
}

function hasEnvironment(host: PlacementHost, request: PlacementRequest): boolean {
  return (request.environmentProjectId !== undefined && host.environments.includes(request.environmentProjectId)) || (request.environmentHosts?.includes(host.id) ?? false);
}

function leastLoaded(hosts: readonly PlacementHost[]): PlacementHost {
  return [...hosts].sort((a, b) => a.live / a.capacity - b.live / b.capacity || a.live - b.live || (a.id < b.id ? -1 : 1))[0] as PlacementHost;
}

function reasonsFor(ids: readonly string[], reasons: readonly string[]): string {
  return reasons.filter((r) => ids.some((id) => r.startsWith(`${id} `))).join('; ') || 'busy';
}

function fnv1a64(text: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h;
}
