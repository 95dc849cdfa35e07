import { Injectable } from '@nestjs/common';
import type { AddMemberRequest, CreateProjectRequest, OkResponse, ProjectMemberView, ProjectView, UpdateProjectRequest } from '@lemniscate/contracts';
import { AuditService } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { isUniqueViolation } from '../common/db-errors';
import { AppError, ErrorCode } from '../common/errors';
import { ProjectMembershipsRepository } from '../db/repositories/project-memberships.repository';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { RepositoryAccessRepository } from '../db/repositories/repository-access.repository';
import { Transactions } from '../db/repositories/transactions';
import { UsersRepository } from '../db/repositories/users.repository';
import type { ProjectRow } from '../db/schema';
import { toProjectView } from './views';

@Injectable()
export class ProjectsService {
  constructor(
    private readonly projects: ProjectsRepository,
    private readonly memberships: ProjectMembershipsRepository,
    private readonly users: UsersRepository,
    private readonly repositoryAccess: RepositoryAccessRepository,
    private readonly transactions: Transactions,
    private readonly access: AccessService,
    private readonly audit: AuditService,
  ) {}

  async list(principal: Principal): Promise<ProjectView[]> {
    return (await this.projects.listForUser(principal.userId)).map(toProjectView);
  }

  async get(principal: Principal, projectId: string): Promise<ProjectView> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'read', 'Project', { id: project.id });
    return toProjectView(project);
  }

  /**
   * A new project has its creator as member and no published policy: until an administrator
   * publishes one, the built-in default applies (P2: nothing is free).
   */
  async create(principal: Principal, input: CreateProjectRequest): Promise<ProjectView> {
    let project: ProjectRow;
    try {
      project = await this.transactions.run(async (tx) => {
        const created = await this.projects.withTx(tx).create({ name: input.name, repositorySource: input.repositorySource, defaultRef: input.defaultRef });
        await this.memberships.withTx(tx).add(principal.userId, created.id);
        return created;
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new AppError(ErrorCode.Conflict, `A project named "${input.name}" already exists.`);
      throw error;
    }
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'project.create',
      projectId: project.id,
      payload: { name: project.name, repositorySource: project.repositorySource, defaultRef: project.defaultRef },
    });
    return toProjectView(project);
  }

  /**
   * Changes where the project's repository comes from or its default ref; sessions already running
   * keep what they started from. A new source is refused while repository access (a credential, known
   * hosts, a CA) is set: those were given for the old source, and a credential is never sent to a
   * place it was not set for.
   */
  async update(principal: Principal, projectId: string, input: UpdateProjectRequest): Promise<ProjectView> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'update', 'Project', { id: project.id });
    const patch: { repositorySource?: string; defaultRef?: string } = {};
    if (input.repositorySource !== undefined && input.repositorySource !== project.repositorySource) patch.repositorySource = input.repositorySource;
    if (input.defaultRef !== undefined && input.defaultRef !== project.defaultRef) patch.defaultRef = input.defaultRef;
    if (Object.keys(patch).length === 0) return toProjectView(project);
    if (patch.repositorySource !== undefined && (await this.repositoryAccess.find(project.id))) {
      throw new AppError(
        ErrorCode.Conflict,
        `Project "${project.name}" has repository access set for ${project.repositorySource}; clear it first (\`lemni repository clear --project ${project.name}\`), then change the source and set the access again for the new one, so a credential is never sent where it was not set for.`,
      );
    }
    const updated = await this.projects.update(project.id, patch);
    if (!updated) throw new AppError(ErrorCode.NotFound, `There is no project ${projectId}.`);
    const before = Object.fromEntries(Object.keys(patch).map((k) => [k, project[k as keyof typeof patch]]));
    await this.audit.record({ actor: actorOf(principal), kind: 'project.update', projectId: project.id, payload: { name: project.name, before, after: patch } });
    return toProjectView(updated);
  }

  /** The project's members, for its administrators. */
  async members(principal: Principal, projectId: string): Promise<ProjectMemberView[]> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'update', 'Project', { id: project.id });
    return (await this.memberships.membersOf(project.id)).map(({ user, addedAt }) => ({
      userId: user.id,
      email: user.email,
      displayName: user.displayName,
      role: user.role,
      addedAt: addedAt.toISOString(),
    }));
  }

  async addMember(principal: Principal, projectId: string, input: AddMemberRequest): Promise<OkResponse> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'update', 'Project', { id: project.id });
    const user = await this.users.findById(input.userId);
    if (!user) throw new AppError(ErrorCode.NotFound, `There is no user ${input.userId}.`);
    await this.memberships.add(user.id, project.id);
    await this.audit.record({ actor: actorOf(principal), kind: 'project.member_add', projectId: project.id, payload: { userId: user.id, role: user.role } });
    return { ok: true };
  }

  async removeMember(principal: Principal, projectId: string, userId: string): Promise<OkResponse> {
    const project = await this.find(projectId);
    await this.access.require(principal, 'update', 'Project', { id: project.id });
    if (!(await this.memberships.remove(userId, project.id))) throw new AppError(ErrorCode.NotFound, `User ${userId} is not a member of project "${project.name}".`);
    await this.audit.record({ actor: actorOf(principal), kind: 'project.member_remove', projectId: project.id, payload: { userId } });
    return { ok: true };
  }

  private async find(projectId: string): Promise<ProjectRow> {
    const project = await this.projects.findById(projectId);
    if (!project) throw new AppError(ErrorCode.NotFound, `There is no project ${projectId}.`);
    return project;
  }
}
