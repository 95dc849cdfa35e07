import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** One registry per application instance, so tests that start several apps never share counters. */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  readonly httpRequests = this.counter('lemniscate_http_requests_total', 'HTTP requests handled, by method, route and status.', ['method', 'route', 'status']);
  readonly httpDuration = new Histogram({
    name: 'lemniscate_http_request_duration_seconds',
    help: 'HTTP request duration in seconds, by method and route.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly approvalsAnswered = this.counter('lemniscate_approvals_answered_total', 'Approvals answered, by answer.', ['answer']);
  readonly sessionsEnded = this.counter('lemniscate_sessions_ended_total', 'Sessions ended by a stop or a revocation, by reason.', ['reason']);
  readonly deniedRequests = this.counter('lemniscate_denied_requests_total', 'Requests refused for authentication or authorisation, by code.', ['code']);
  readonly wsClients = this.counter('lemniscate_ws_connections_total', 'WebSocket connections accepted on the event stream.', []);
  /** The exec-host pool as this gateway last read it (pool mode only). */
  readonly execHosts = new Gauge({ name: 'lemniscate_exec_hosts', help: 'Exec-hosts of the pool, by state.', labelNames: ['state'] as const, registers: [this.registry] });
  readonly placements = this.counter('lemniscate_exec_host_placements_total', 'Sandboxes placed on the pool, by result (placed, retried, refused).', ['result']);
  /** Audit sinks (T2), as this gateway last read them from the database. */
  readonly auditSinkLag = new Gauge({
    name: 'lemniscate_audit_sink_lag_entries',
    help: 'Audit entries chained but not yet sent to the sink.',
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  readonly auditSinkLagSeconds = new Gauge({
    name: 'lemniscate_audit_sink_lag_seconds',
    help: 'Age of the oldest audit entry not yet sent to the sink (0 when it is up to date).',
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  readonly auditSinkFailing = new Gauge({
    name: 'lemniscate_audit_sink_failing',
    help: '1 while the sink refuses or cannot be reached, else 0.',
    labelNames: ['sink'] as const,
    registers: [this.registry],
  });
  readonly auditSinkDelivered = this.counter('lemniscate_audit_sink_delivered_total', 'Audit entries this gateway sent to the sink.', ['sink']);
  readonly auditSinkFailures = this.counter('lemniscate_audit_sink_failures_total', 'Failed attempts to send audit entries to the sink.', ['sink']);
  readonly auditVerifyFailures = this.counter('lemniscate_audit_verify_failures_total', 'Audit chain verifications that found a broken entry.', []);
  readonly approvalWait = new Histogram({
    name: 'lemniscate_approval_wait_seconds',
    help: 'Time from an approval request to its answer, in seconds, by answer.',
    labelNames: ['answer'] as const,
    buckets: [5, 15, 30, 60, 120, 300, 600, 1800, 3600],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'lemniscate_' });
  }

  private counter<L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }
}
