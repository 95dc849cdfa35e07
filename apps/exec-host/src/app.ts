import 'reflect-metadata';
import { Logger, Module, type DynamicModule, type INestApplication } from '@nestjs/common';
import { APP_FILTER, NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { execHostRouteOf, Limits } from '@lemniscate/contracts';
import { traceHttpServer } from '@lemniscate/telemetry';
import { EXEC_HOST_CONFIG, type ExecHostConfig } from './config';
import { SANDBOX_DRIVER, type SandboxDriver } from './driver/sandbox.driver';
import { requireToken } from './http/auth.middleware';
import { requireClientName } from './http/client-certificate.middleware';
import { ErrorFilter } from './http/error.filter';
import { LivenessController, SandboxesController } from './http/sandboxes.controller';
import { EnvironmentsController } from './http/environments.controller';
import { RepositoryController } from './http/repository.controller';
import { EnvironmentService } from './environment/environment.service';
import { ExecHostMetrics } from './metrics';
import { Reaper } from './reaper';
import { SandboxService } from './sandbox.service';
import { holdLauncher } from './workspace/launcher';

@Module({})
class ExecHostModule {
  static forRoot(config: ExecHostConfig, driver: SandboxDriver, sandboxes: SandboxService, environments: EnvironmentService, metrics: ExecHostMetrics): DynamicModule {
    return {
      module: ExecHostModule,
      controllers: [SandboxesController, EnvironmentsController, RepositoryController, LivenessController],
      providers: [
        { provide: EXEC_HOST_CONFIG, useValue: config },
        { provide: SANDBOX_DRIVER, useValue: driver },
        { provide: SandboxService, useValue: sandboxes },
        { provide: EnvironmentService, useValue: environments },
        { provide: ExecHostMetrics, useValue: metrics },
        { provide: APP_FILTER, useClass: ErrorFilter },
      ],
    };
  }
}

export interface ExecHost {
  app: INestApplication;
  sandboxes: SandboxService;
  environments: EnvironmentService;
  reaper: Reaper;
  metrics: ExecHostMetrics;
  /** Destroys every sandbox, stops the reaper and the HTTP server. */
  close(): Promise<void>;
}

/**
 * Builds the exec-host: start-up checks (seccomp, AppArmor, state dir), a first reaper pass that
 * removes what a previous run left, then the HTTP application with the token check before routing.
 * With mutual TLS configured it is an HTTPS application that requires a client certificate from the
 * client CA (the handshake refuses any other) and one of the allowed common names, before the token.
 */
export async function createExecHost(config: ExecHostConfig, driver: SandboxDriver & { close?: () => void }, options: { logger?: false } = {}): Promise<ExecHost> {
  // git is started from a small helper process rather than by forking this one (launcher.ts).
  const releaseLauncher = holdLauncher();
  try {
    return await buildExecHost(config, driver, options, releaseLauncher);
  } catch (e) {
    releaseLauncher();
    throw e;
  }
}

async function buildExecHost(config: ExecHostConfig, driver: SandboxDriver & { close?: () => void }, options: { logger?: false }, releaseLauncher: () => void): Promise<ExecHost> {
  const logger = new Logger('exec-host');
  const environments = new EnvironmentService(config, driver);
  await environments.init();
  const sandboxes = new SandboxService(config, driver, environments);
  await sandboxes.init();
  if (sandboxes.apparmorState.state === 'unavailable') logger.warn(sandboxes.apparmorState.message ?? 'AppArmor is unavailable.');
  const reaper = new Reaper(config, driver, sandboxes, (m) => logger.log(m));
  await reaper.reap();
  sandboxes.log = (m) => logger.log(m);
  await sandboxes.startPool();
  const metrics = new ExecHostMetrics({ sandboxes: () => sandboxes.ids().length, capacity: config.maxSandboxes, warm: () => sandboxes.poolStats() });
  const app = await NestFactory.create<NestExpressApplication>(ExecHostModule.forRoot(config, driver, sandboxes, environments, metrics), {
    bodyParser: false,
    logger: options.logger === false ? false : ['error', 'warn', 'log'],
    ...(config.tls
      ? {
          httpsOptions: {
            cert: config.tls.cert,
            key: config.tls.key,
            ca: config.tls.clientCa,
            requestCert: true,
            rejectUnauthorized: true,
          },
        }
      : {}),
  });
  if (config.tls) app.use(requireClientName(config.tls.clientNames, () => metrics.refused('client_certificate')));
  app.use(requireToken(config.token, () => metrics.refused('token')));
  // A span per authenticated request, continuing the gateway's W3C trace context (a no-op unless tracing is on).
  app.use(traceHttpServer((_method, path) => execHostRouteOf(path)));
  // The one limit of the control channel: a session's starting patch at its limit, JSON-encoded.
  app.useBodyParser('json', { limit: Limits.sessionRequestBodyBytes });
  reaper.start();
  let closed = false;
  return {
    app,
    sandboxes,
    environments,
    reaper,
    metrics,
    async close() {
      if (closed) return;
      closed = true;
      reaper.stop();
      await sandboxes.destroyAll();
      await app.close();
      driver.close?.();
      releaseLauncher();
    },
  };
}
