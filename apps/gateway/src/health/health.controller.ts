import { Controller, Get, Header, Inject, Res } from '@nestjs/common';
import { GatewayHealth, GatewayReadiness, GatewayRoutes as R } from '@lemniscate/contracts';
import type { Response } from 'express';
import { Public } from '../auth/permission.decorator';
import { Returns } from '../common/zod-validation';
import { DATABASE } from '../db/tokens';
import type { Database } from '../db/database';
import { EXEC_HOST, type ExecHostPort } from '../exec-host/exec-host.port';
import { MetricsService } from '../metrics/metrics.service';

/** Probes and metrics live outside /api/v1 so load balancers and Prometheus need no credentials. */
@Controller()
export class HealthController {
  constructor(
    @Inject(DATABASE) private readonly database: Database,
    @Inject(EXEC_HOST) private readonly execHost: ExecHostPort,
    private readonly metrics: MetricsService,
  ) {}

  @Get('healthz')
  @Public('liveness probe: says only that the process answers')
  @Returns(R.healthz.response, 'The process is alive', R.healthz.status)
  healthz(): GatewayHealth {
    return { status: 'ok' };
  }

  @Get('readyz')
  @Public('readiness probe: says whether the database and the exec-host answer')
  @Returns(R.readyz.response, 'Ready when the database and the exec-host answer (503 otherwise)', R.readyz.status)
  async readyz(@Res({ passthrough: true }) res: Response): Promise<GatewayReadiness> {
    const [database, execHost] = await Promise.all([
      this.database.ping().then(
        () => ({ ok: true }),
        (e: unknown) => ({ ok: false, message: `The database did not answer: ${(e as Error).message}` }),
      ),
      this.execHost.health(),
    ]);
    const ready = database.ok && execHost.ok;
    res.status(ready ? 200 : 503);
    return { status: ready ? 'ready' : 'not_ready', checks: { database, execHost } };
  }

  @Get('metrics')
  @Public('Prometheus scrape endpoint; exposes counters, no personal data')
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  @Returns(null, 'Prometheus metrics', R.metrics.status)
  metricsText(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
