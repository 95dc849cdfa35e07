import { Injectable } from '@nestjs/common';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** One registry per application instance, so tests that start several apps never share counters. */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'lemniscate_http_requests_total',
    help: 'HTTP requests handled, by method, route and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'lemniscate_http_request_duration_seconds',
    help: 'HTTP request duration in seconds, by method and route.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly approvalsAnswered = new Counter({
    name: 'lemniscate_approvals_answered_total',
    help: 'Approvals answered, by answer.',
    labelNames: ['answer'] as const,
    registers: [this.registry],
  });
  readonly sessionsEnded = new Counter({
    name: 'lemniscate_sessions_ended_total',
    help: 'Sessions ended by a stop or a revocation, by reason.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly deniedRequests = new Counter({
    name: 'lemniscate_denied_requests_total',
    help: 'Requests refused for authentication or authorisation, by code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  readonly wsClients = new Counter({
    name: 'lemniscate_ws_connections_total',
    help: 'WebSocket connections accepted on the event stream.',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'lemniscate_' });
  }
}
