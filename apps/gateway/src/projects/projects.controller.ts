import { Controller, Delete, Get, HttpCode, Post } from '@nestjs/common';
import { AddMemberRequest, CreateProjectRequest, ProjectMemberParams, ProjectParams, GatewayRoutes as R, type SetRepositoryAccessRequest, type UpdateProjectRequest } from '@lemniscate/contracts';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams } from '../common/zod-validation';
import { ProjectMcpService } from '../mcp/project-mcp.service';
import { ProjectAgentsService } from '../runtime/project-agents.service';
import { ProjectsService } from './projects.service';
import { RepositoryAccessService } from './repository-access.service';

@Controller('projects')
export class ProjectsController {
  constructor(
    private readonly projects: ProjectsService,
    private readonly repositoryAccess: RepositoryAccessService,
    private readonly agents: ProjectAgentsService,
    private readonly mcp: ProjectMcpService,
  ) {}

  @Get()
  @Can('read', 'Project')
  @Returns(R.listProjects.response, 'Projects you are a member of', R.listProjects.status)
  list(@CurrentPrincipal() principal: Principal) {
    return this.projects.list(principal);
  }

  @Post()
  @Can('create', 'Project')
  @Returns(R.createProject.response, 'Create a project (its policy starts as the built-in default)', R.createProject.status)
  create(@CurrentPrincipal() principal: Principal, @ZBody(R.createProject.body) body: CreateProjectRequest) {
    return this.projects.create(principal, body);
  }

  @Get(':projectId')
  @Can('read', 'Project')
  @Returns(R.getProject.response, 'One project', R.getProject.status)
  get(@CurrentPrincipal() principal: Principal, @ZParams(R.getProject.params) params: ProjectParams) {
    return this.projects.get(principal, params.projectId);
  }

  @Post(':projectId')
  @HttpCode(200)
  @Can('update', 'Project')
  @Returns(R.updateProject.response, "Change a project's repository source or default ref", R.updateProject.status)
  update(@CurrentPrincipal() principal: Principal, @ZParams(R.updateProject.params) params: ProjectParams, @ZBody(R.updateProject.body) body: UpdateProjectRequest) {
    return this.projects.update(principal, params.projectId, body);
  }

  @Get(':projectId/members')
  @Can('update', 'Project')
  @Returns(R.listMembers.response, "The project's members (its administrators)", R.listMembers.status)
  members(@CurrentPrincipal() principal: Principal, @ZParams(R.listMembers.params) params: ProjectParams) {
    return this.projects.members(principal, params.projectId);
  }

  @Post(':projectId/members')
  @Can('update', 'Project')
  @Returns(R.addMember.response, 'Add a user to the project', R.addMember.status)
  addMember(@CurrentPrincipal() principal: Principal, @ZParams(R.addMember.params) params: ProjectParams, @ZBody(R.addMember.body) body: AddMemberRequest) {
    return this.projects.addMember(principal, params.projectId, body);
  }

  @Delete(':projectId/members/:userId')
  @Can('update', 'Project')
  @Returns(R.removeMember.response, 'Remove a user from the project', R.removeMember.status)
  removeMember(@CurrentPrincipal() principal: Principal, @ZParams(R.removeMember.params) params: ProjectMemberParams) {
    return this.projects.removeMember(principal, params.projectId, params.userId);
  }

  @Get(':projectId/repository')
  @Can('read', 'Project')
  @Returns(R.repositoryAccess.response, "How the platform fetches the project's repository (never the credential itself)", R.repositoryAccess.status)
  repository(@CurrentPrincipal() principal: Principal, @ZParams(R.repositoryAccess.params) params: ProjectParams) {
    return this.repositoryAccess.view(principal, params.projectId);
  }

  @Post(':projectId/repository/access')
  @HttpCode(200)
  @Can('update', 'Project')
  @Returns(R.setRepositoryAccess.response, "Set how the platform fetches the project's repository: credential (sealed at rest), known hosts, CA", R.setRepositoryAccess.status)
  setRepositoryAccess(@CurrentPrincipal() principal: Principal, @ZParams(R.setRepositoryAccess.params) params: ProjectParams, @ZBody(R.setRepositoryAccess.body) body: SetRepositoryAccessRequest) {
    return this.repositoryAccess.set(principal, params.projectId, body);
  }

  @Delete(':projectId/repository/access')
  @Can('update', 'Project')
  @Returns(R.clearRepositoryAccess.response, "Remove the project's repository access (its credential is deleted)", R.clearRepositoryAccess.status)
  clearRepositoryAccess(@CurrentPrincipal() principal: Principal, @ZParams(R.clearRepositoryAccess.params) params: ProjectParams) {
    return this.repositoryAccess.clear(principal, params.projectId);
  }

  @Get(':projectId/agents')
  @Can('read', 'Project')
  @Returns(R.projectAgents.response, "The agents the project's repository defines at its default ref, with notices", R.projectAgents.status)
  projectAgents(@CurrentPrincipal() principal: Principal, @ZParams(R.projectAgents.params) params: ProjectParams) {
    return this.agents.view(principal, params.projectId);
  }

  @Get(':projectId/mcp')
  @Can('read', 'Project')
  @Returns(R.projectMcp.response, "The project's MCP servers, what each listed when a session last started it, and each tool's pin status", R.projectMcp.status)
  projectMcp(@CurrentPrincipal() principal: Principal, @ZParams(R.projectMcp.params) params: ProjectParams) {
    return this.mcp.view(principal, params.projectId);
  }
}
