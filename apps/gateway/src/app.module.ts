import { DynamicModule, Inject, Module, type OnApplicationShutdown, type Provider } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, DiscoveryModule } from '@nestjs/core';
import { LoggerModule } from 'nestjs-pino';
import type { DestinationStream } from 'pino';
import type { Options as PinoHttpOptions } from 'pino-http';
import { AuditApiController } from './audit-api/audit-api.controller';
import { AuditApiService } from './audit-api/audit-api.service';
import { StatsController } from './stats/stats.controller';
import { StatsService } from './stats/stats.service';
import { AuditModule } from './audit/audit.module';
import { AuditRetentionService } from './audit-retention/audit-retention.service';
import { AuditRecordingGuard } from './audit-sinks/audit-recording.guard';
import { AuditSinksController } from './audit-sinks/audit-sinks.controller';
import { AUDIT_SINK_TIMING, AuditSinksService, type SinkTiming } from './audit-sinks/audit-sinks.service';
import { AccessService } from './auth/access.service';
import { AuthController } from './auth/auth.controller';
import { OidcController } from './auth/oidc/oidc.controller';
import { OidcService } from './auth/oidc/oidc.service';
import { AuthGuard } from './auth/auth.guard';
import { AuthService } from './auth/auth.service';
import { AppErrorFilter } from './common/error.filter';
import { requestIdFor } from './common/request-id';
import { GATEWAY_CONFIG, type GatewayConfig } from './config/config';
import { DatabaseModule } from './db/database.module';
import { DATABASE } from './db/tokens';
import type { Database } from './db/database';
import { EVENT_FAN_OUT, InProcessFanOut, type EventFanOut } from './events/event-bus';
import { EventsGateway } from './events/events.gateway';
import { EnvironmentsController } from './environments/environments.controller';
import { ENVIRONMENT_POLL_MS, EnvironmentsService } from './environments/environments.service';
import { EventsService } from './events/events.service';
import { PgNotifyFanOut } from './events/pg-notify.fan-out';
import { execHostProvider } from './exec-host/exec-host.provider';
import { ExecHostClients } from './exec-host/exec-host-clients';
import { ExecHostPool } from './exec-host/exec-host-pool';
import { ExecHostHeartbeatController, ExecHostsAdminController } from './exec-host/exec-hosts.controller';
import { ExecHostsService } from './exec-host/exec-hosts.service';
import { HealthController } from './health/health.controller';
import { MetricsService } from './metrics/metrics.service';
import { OpenApiController } from './openapi/openapi.controller';
import { PoliciesController } from './projects/policies.controller';
import { PoliciesService } from './projects/policies.service';
import { PolicyDryRunService } from './projects/policy-dry-run.service';
import { ProjectsController } from './projects/projects.controller';
import { ProjectsService } from './projects/projects.service';
import { RepositoryAccessService } from './projects/repository-access.service';
import { ProjectAgentsService } from './runtime/project-agents.service';
import { secretBoxProvider } from './secrets/secret-box.provider';
import { ApprovalsController } from './sessions/approvals.controller';
import { ApprovalContextService } from './sessions/approval-context.service';
import { ApprovalsService } from './sessions/approvals.service';
import { RevocationService } from './sessions/revocation.service';
import { SessionLeaseService } from './sessions/session-lease.service';
import { SessionRunRegistry } from './sessions/session-run.registry';
import { SessionsController } from './sessions/sessions.controller';
import { DbRecorders } from './runtime/db-recorder';
import { SESSION_LOOPS, SessionRuntimeService, type SessionLoops } from './runtime/runtime.service';
import { SessionTrees } from './runtime/session-tree';
import { McpCredentials } from './mcp/mcp-clients';
import { ProjectMcpService } from './mcp/project-mcp.service';
import { SessionsService } from './sessions/sessions.service';
import { CREDENTIALS_OUTPUT, UsersService, type CredentialsOutput } from './users/users.service';
import { UsersController } from './users/users.controller';

export interface AppModuleOptions {
  config: GatewayConfig;
  /** An already open database (tests); otherwise the module opens and migrates its own. */
  database?: Database;
  /** Where first-start credentials are printed (standard output by default). */
  credentialsOutput?: CredentialsOutput;
  /** Where log lines go (standard output by default). */
  logStream?: DestinationStream;
  /**
   * `run` (the default) starts each session's loop; `record` only records the session, for tests of
   * the HTTP layer that have no model, exec-host or Docker. Only code can choose it, never a variable.
   */
  sessionLoops?: SessionLoops;
  /** How often a preparation of a project's environment is asked about (default 1.5 s; tests go faster). */
  environmentPollMs?: number;
  /** Audit sinks' lease and pauses (tests that cannot wait for a 15-second lease to lapse). */
  auditSinkTiming?: SinkTiming;
  /** Runs last when the gateway shuts down (the trace exporter sends what it holds). */
  onShutdown?: () => Promise<void>;
}

const ON_SHUTDOWN = Symbol('ON_SHUTDOWN');

/** Calls the entry point's last work when the application shuts down. */
class ShutdownHook implements OnApplicationShutdown {
  constructor(@Inject(ON_SHUTDOWN) private readonly onShutdown: () => Promise<void>) {}
  async onApplicationShutdown(): Promise<void> {
    await this.onShutdown();
  }
}

export const CONTROLLERS = [
  AuthController,
  OidcController,
  UsersController,
  ProjectsController,
  PoliciesController,
  EnvironmentsController,
  SessionsController,
  ApprovalsController,
  AuditApiController,
  AuditSinksController,
  StatsController,
  ExecHostHeartbeatController,
  ExecHostsAdminController,
  HealthController,
  OpenApiController,
];

@Module({})
export class AppModule {
  static forRoot(options: AppModuleOptions): DynamicModule {
    const { config } = options;
    const pinoOptions: PinoHttpOptions = {
      level: config.logLevel,
      genReqId: (req, res) => (typeof (req as { id?: unknown }).id === 'string' ? (req as { id: string }).id : requestIdFor(req, res)),
      // Credentials never reach the logs.
      redact: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-csrf-token"]', 'res.headers["set-cookie"]'],
      autoLogging: { ignore: (req) => req.url === '/healthz' || req.url === '/metrics' },
    };
    const providers: Provider[] = [
      { provide: GATEWAY_CONFIG, useValue: config },
      { provide: SESSION_LOOPS, useValue: options.sessionLoops ?? 'run' },
      { provide: ENVIRONMENT_POLL_MS, useValue: options.environmentPollMs ?? 1_500 },
      ...(options.auditSinkTiming ? [{ provide: AUDIT_SINK_TIMING, useValue: options.auditSinkTiming }] : []),
      ...(options.onShutdown ? [{ provide: ON_SHUTDOWN, useValue: options.onShutdown }, ShutdownHook] : []),
      { provide: CREDENTIALS_OUTPUT, useValue: options.credentialsOutput ?? ((text: string) => process.stdout.write(`${text}\n`)) },
      {
        provide: EVENT_FAN_OUT,
        // PostgreSQL: LISTEN/NOTIFY reaches every replica. PGlite is in-process, so is its fan-out.
        useFactory: (database: Database): EventFanOut => (database.driver.kind === 'postgres' ? new PgNotifyFanOut(database.driver.url) : new InProcessFanOut()),
        inject: [DATABASE],
      },
      { provide: APP_GUARD, useClass: AuthGuard },
      { provide: APP_GUARD, useClass: AuditRecordingGuard },
      { provide: APP_FILTER, useClass: AppErrorFilter },
      MetricsService,
      AuditApiService,
      AuditSinksService,
      AuditRetentionService,
      StatsService,
      ExecHostClients,
      ExecHostPool,
      execHostProvider,
      ExecHostsService,
      AuthService,
      OidcService,
      AccessService,
      UsersService,
      ProjectsService,
      RepositoryAccessService,
      ProjectAgentsService,
      secretBoxProvider,
      PoliciesService,
      PolicyDryRunService,
      EnvironmentsService,
      SessionsService,
      ApprovalsService,
      ApprovalContextService,
      RevocationService,
      SessionLeaseService,
      SessionRuntimeService,
      SessionTrees,
      { provide: McpCredentials, useFactory: (c: GatewayConfig) => new McpCredentials(c.mcpCredentialsFile), inject: [GATEWAY_CONFIG] },
      ProjectMcpService,
      DbRecorders,
      SessionRunRegistry,
      EventsService,
      EventsGateway,
    ];
    return {
      module: AppModule,
      imports: [
        options.database ? DatabaseModule.forDatabase(options.database) : DatabaseModule.forRoot({ url: config.databaseUrl, dataDir: config.dataDir }),
        AuditModule,
        DiscoveryModule,
        LoggerModule.forRoot({ pinoHttp: options.logStream ? [pinoOptions, options.logStream] : pinoOptions }),
      ],
      controllers: CONTROLLERS,
      providers,
      exports: [SessionRunRegistry, ApprovalsService, SessionsService, PoliciesService, EventsService, RevocationService],
    };
  }
}
