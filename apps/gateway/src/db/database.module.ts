import { Global, Inject, Injectable, Module, type DynamicModule, type OnApplicationShutdown, type Provider } from '@nestjs/common';
import { openDatabase, type Database, type DatabaseOptions } from './database';
import { ApiTokensRepository } from './repositories/api-tokens.repository';
import { ApprovalsRepository } from './repositories/approvals.repository';
import { ApprovedCommandsRepository } from './repositories/approved-commands.repository';
import { AuditLogRepository } from './repositories/audit-log.repository';
import { AuditSinkCursorsRepository } from './repositories/audit-sink-cursors.repository';
import { OidcLoginsRepository } from './repositories/oidc-logins.repository';
import { EnvironmentJobsRepository } from './repositories/environment-jobs.repository';
import { EventsRepository } from './repositories/events.repository';
import { ExecHostsRepository } from './repositories/exec-hosts.repository';
import { RepositoryAccessRepository } from './repositories/repository-access.repository';
import { LoginFailuresRepository } from './repositories/login-failures.repository';
import { PolicyVersionsRepository } from './repositories/policy-versions.repository';
import { ProjectMembershipsRepository } from './repositories/project-memberships.repository';
import { ProjectsRepository } from './repositories/projects.repository';
import { SessionsRepository } from './repositories/sessions.repository';
import { ToolCallsRepository } from './repositories/tool-calls.repository';
import { Transactions } from './repositories/transactions';
import { UsersRepository } from './repositories/users.repository';
import { WebSessionsRepository } from './repositories/web-sessions.repository';
import { DATABASE, DB } from './tokens';

const REPOSITORIES = [
  UsersRepository,
  ProjectsRepository,
  ProjectMembershipsRepository,
  PolicyVersionsRepository,
  ApiTokensRepository,
  WebSessionsRepository,
  LoginFailuresRepository,
  SessionsRepository,
  ToolCallsRepository,
  ApprovalsRepository,
  ApprovedCommandsRepository,
  AuditLogRepository,
  AuditSinkCursorsRepository,
  OidcLoginsRepository,
  EventsRepository,
  EnvironmentJobsRepository,
  ExecHostsRepository,
  RepositoryAccessRepository,
  Transactions,
];

@Injectable()
class DatabaseCloser implements OnApplicationShutdown {
  constructor(@Inject(DATABASE) private readonly database: Database) {}

  async onApplicationShutdown(): Promise<void> {
    await this.database.close();
  }
}

/**
 * The database for the whole app: `DatabaseModule.forRoot(options)` opens (and migrates) it at
 * start-up and closes it on shutdown; `DatabaseModule.forDatabase(db)` uses one already open (tests,
 * where the test owns its closing). Every repository is injectable everywhere.
 */
@Global()
@Module({})
export class DatabaseModule {
  static forRoot(options: DatabaseOptions): DynamicModule {
    return DatabaseModule.build({ provide: DATABASE, useFactory: () => openDatabase(options) }, true);
  }

  static forDatabase(database: Database): DynamicModule {
    return DatabaseModule.build({ provide: DATABASE, useValue: database }, false);
  }

  private static build(database: Provider, owned: boolean): DynamicModule {
    const providers: Provider[] = [database, { provide: DB, useFactory: (d: Database) => d.db, inject: [DATABASE] }, ...REPOSITORIES];
    if (owned) providers.push(DatabaseCloser);
    return { module: DatabaseModule, global: true, providers, exports: [DATABASE, DB, ...REPOSITORIES] };
  }
}
