import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ExecExit } from '@lemniscate/contracts';
import type { WarmPoolStats } from './pool/warm-pool';

/** The outcome label of a command: how it ended, in a few values (never its text). */
export function execOutcome(exit: Pick<ExecExit, 'exitCode' | 'timedOut' | 'class'> | null): string {
  if (!exit) return 'error';
  if (exit.timedOut) return 'timeout';
  if (exit.class) return exit.class;
  return exit.exitCode === 0 ? 'ok' : exit.exitCode === null ? 'lost' : 'nonzero';
}

/**
 * The exec-host's Prometheus metrics, in a registry of its own (never prom-client's global one, so two
 * exec-hosts in one process, as in tests, do not share values). Served at GET /metrics.
 */
export class ExecHostMetrics {
  readonly registry = new Registry();
  private readonly createSeconds: Histogram<'outcome'>;
  private readonly execSeconds: Histogram<'outcome'>;
  private readonly refusals: Counter<'reason'>;

  constructor(sources: { sandboxes: () => number; capacity: number; warm?: () => Pick<WarmPoolStats, 'ready' | 'target' | 'hits' | 'misses'> }) {
    new Gauge({
      name: 'lemniscate_exec_host_sandboxes',
      help: 'Sandboxes this exec-host runs now.',
      registers: [this.registry],
      collect() {
        this.set(sources.sandboxes());
      },
    });
    new Gauge({
      name: 'lemniscate_exec_host_capacity',
      help: "Sandboxes this exec-host runs at most: LEMNISCATE_EXEC_HOST_MAX_SANDBOXES, else computed at start from the host's memory and process ids. New ones are also refused below the memory floor.",
      registers: [this.registry],
    }).set(sources.capacity);
    const warm = sources.warm;
    if (warm) {
      new Gauge({
        name: 'lemniscate_exec_host_warm_sandboxes',
        help: 'Warm sandboxes (made ahead of their sessions): ready now, and wanted (target).',
        labelNames: ['state'],
        registers: [this.registry],
        collect() {
          const s = warm();
          this.set({ state: 'ready' }, s.ready);
          this.set({ state: 'target' }, s.target);
        },
      });
      new Gauge({
        name: 'lemniscate_exec_host_sandbox_starts',
        help: 'Sandboxes created since start, by start: warm (taken from the pool) or cold (none was ready).',
        labelNames: ['start'],
        registers: [this.registry],
        collect() {
          const s = warm();
          this.set({ start: 'warm' }, s.hits);
          this.set({ start: 'cold' }, s.misses);
        },
      });
    }
    this.createSeconds = new Histogram({
      name: 'lemniscate_exec_host_sandbox_create_seconds',
      help: 'Time to create a sandbox (clone, patch, disk, container), by outcome (ok or the error code).',
      labelNames: ['outcome'],
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120],
      registers: [this.registry],
    });
    this.execSeconds = new Histogram({
      name: 'lemniscate_exec_host_exec_seconds',
      help: 'Time a command ran in a sandbox, by outcome (ok, nonzero, timeout, its class, or error).',
      labelNames: ['outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
      registers: [this.registry],
    });
    this.refusals = new Counter({
      name: 'lemniscate_exec_host_refused_requests_total',
      help: 'Requests refused before routing, by reason (token, client_certificate).',
      labelNames: ['reason'],
      registers: [this.registry],
    });
  }

  observeCreate(seconds: number, outcome: string): void {
    this.createSeconds.observe({ outcome }, seconds);
  }

  observeExec(seconds: number, outcome: string): void {
    this.execSeconds.observe({ outcome }, seconds);
  }

  refused(reason: 'token' | 'client_certificate'): void {
    this.refusals.inc({ reason });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
