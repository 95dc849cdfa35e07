import { Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import type { CreateUserRequest, TokenView, UpdateUserRequest, UserView } from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { generatePassword, hashPassword } from '../auth/password';
import { actorOf, type Principal } from '../auth/principal';
import { toTokenView, toUserView } from '../auth/views';
import { isUniqueViolation } from '../common/db-errors';
import { AppError, ErrorCode } from '../common/errors';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { ApiTokensRepository } from '../db/repositories/api-tokens.repository';
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
    private readonly tokens: ApiTokensRepository,
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
    await this.audit.record({ actor: 'system', kind: 'user.bootstrap_admin', payload: { userId: admin.id, email, passwordGenerated: generated } });
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

  /**
   * A new role takes effect at the person's next request (abilities are computed per request). An
   * administrator never changes their own role, and the last active administrator stays one, so the
   * platform always keeps someone who can manage it.
   */
  async update(principal: Principal, userId: string, input: UpdateUserRequest): Promise<UserView> {
    await this.access.require(principal, 'update', 'User', { id: userId });
    const user = await this.users.findById(userId);
    if (!user) throw new AppError(ErrorCode.NotFound, `There is no user ${userId}.`);
    if (user.revokedAt) throw new AppError(ErrorCode.Conflict, `${user.email} was revoked; a revoked account cannot be changed.`);
    const roleChanges = input.role !== undefined && input.role !== user.role;
    if (roleChanges && user.id === principal.userId) throw new AppError(ErrorCode.Conflict, 'You cannot change your own role; another administrator can.');
    const patch = { ...(roleChanges ? { role: input.role } : {}), ...(input.displayName !== undefined && input.displayName !== user.displayName ? { displayName: input.displayName } : {}) };
    const projectIds = await this.memberships.projectIdsOf(user.id);
    if (Object.keys(patch).length === 0) return toUserView(user, projectIds);
    const result = await this.users.updateKeepingAnAdmin(user.id, patch);
    if (result === 'last_admin') throw new AppError(ErrorCode.Conflict, `${user.email} is the last active administrator; make someone else an administrator first.`);
    const updated = result ?? user;
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'user.update',
      payload: { userId: user.id, email: user.email, before: { role: user.role, displayName: user.displayName }, after: { role: updated.role, displayName: updated.displayName } },
    });
    return toUserView(updated, projectIds);
  }

  async tokensOf(principal: Principal, userId: string): Promise<TokenView[]> {
    await this.access.require(principal, 'manage', 'User', { id: userId });
    if (!(await this.users.findById(userId))) throw new AppError(ErrorCode.NotFound, `There is no user ${userId}.`);
    return (await this.tokens.listForUser(userId)).map(toTokenView);
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
    await this.audit.record({ actor: actorOf(principal), kind: 'user.create', payload: { userId: user.id, email: user.email, role: user.role, projectIds: input.projectIds } });
    return toUserView(user, [...input.projectIds]);
  }
}
