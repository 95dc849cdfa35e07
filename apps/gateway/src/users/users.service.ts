import { Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import type { CreateUserRequest, UserView } from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { generatePassword, hashPassword } from '../auth/password';
import { actorOf, type Principal } from '../auth/principal';
import { toUserView } from '../auth/views';
import { isUniqueViolation } from '../common/db-errors';
import { AppError, ErrorCode } from '../common/errors';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { ProjectMembershipsRepository } from '../db/repositories/project-memberships.repository';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { Transactions } from '../db/repositories/transactions';
import { UsersRepository } from '../db/repositories/users.repository';
import type { UserRow } from '../db/schema';

const DEFAULT_ADMIN_EMAIL = 'admin@lemniscate.local';

/** Where first-start credentials are written; standard output unless a test captures them. */
export const CREDENTIALS_OUTPUT = Symbol('CREDENTIALS_OUTPUT');
export type CredentialsOutput = (text: string) => void;

@Injectable()
export class UsersService implements OnApplicationBootstrap {
  private readonly logger = new Logger('Users');

  constructor(
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    @Inject(CREDENTIALS_OUTPUT) private readonly output: CredentialsOutput,
    private readonly users: UsersRepository,
    private readonly memberships: ProjectMembershipsRepository,
    private readonly projects: ProjectsRepository,
    private readonly transactions: Transactions,
    private readonly access: AccessService,
    private readonly audit: AuditService,
  ) {}

  /**
   * First start: with no user at all, create an administrator from LEMNISCATE_ADMIN_EMAIL /
   * LEMNISCATE_ADMIN_PASSWORD, or with a generated password printed once and never stored in clear.
   */
  async onApplicationBootstrap(): Promise<void> {
    if ((await this.users.count()) > 0) return;
    const email = this.config.admin.email ?? DEFAULT_ADMIN_EMAIL;
    const generated = this.config.admin.password === undefined;
    const password = this.config.admin.password ?? generatePassword();
    let admin: UserRow;
    try {
      admin = await this.users.create({ email, displayName: 'Administrator', role: 'admin', passwordHash: await hashPassword(password) });
    } catch (error) {
      // Another replica starting at the same moment created it first.
      if (isUniqueViolation(error)) return;
      throw error;
    }
    await this.audit.append({ actor: 'system', kind: 'user.bootstrap_admin', payload: { userId: admin.id, email, passwordGenerated: generated } });
    if (generated) {
      this.output(
        [
          '',
          'Lemniscate: first start, an administrator account was created.',
          `  email:    ${email}`,
          `  password: ${password}`,
          'This password is shown once and is not stored in clear; keep it somewhere safe.',
          '',
        ].join('\n'),
      );
    } else {
      this.logger.log(`First start: administrator ${email} created from LEMNISCATE_ADMIN_EMAIL / LEMNISCATE_ADMIN_PASSWORD.`);
    }
  }

  async list(principal: Principal): Promise<UserView[]> {
    const rows = await this.users.list();
    const visible = rows.filter((u) => this.access.can(principal, 'read', 'User', { id: u.id }));
    return Promise.all(visible.map(async (u) => toUserView(u, await this.memberships.projectIdsOf(u.id))));
  }

  async get(principal: Principal, userId: string): Promise<UserView> {
    await this.access.require(principal, 'read', 'User', { id: userId });
    const user = await this.users.findById(userId);
    if (!user) throw new AppError(ErrorCode.NotFound, `There is no user ${userId}.`);
    return toUserView(user, await this.memberships.projectIdsOf(user.id));
  }

  async create(principal: Principal, input: CreateUserRequest): Promise<UserView> {
    for (const projectId of input.projectIds) {
      if (!(await this.projects.findById(projectId))) throw new AppError(ErrorCode.NotFound, `There is no project ${projectId} to add the user to.`);
    }
    const passwordHash = await hashPassword(input.password);
    let user: UserRow;
    try {
      user = await this.transactions.run(async (tx) => {
        const created = await this.users.withTx(tx).create({ email: input.email, displayName: input.displayName, role: input.role, passwordHash });
        for (const projectId of input.projectIds) await this.memberships.withTx(tx).add(created.id, projectId);
        return created;
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new AppError(ErrorCode.Conflict, `A user with the email ${input.email} already exists.`);
      throw error;
    }
    await this.audit.append({ actor: actorOf(principal), kind: 'user.create', payload: { userId: user.id, email: user.email, role: user.role, projectIds: input.projectIds } });
    return toUserView(user, [...input.projectIds]);
  }
}
