import { Controller, Delete, Get, Post } from '@nestjs/common';
import { AddMemberRequest, CreateProjectRequest, ProjectMemberParams, ProjectParams, GatewayRoutes as R } from '@lemniscate/contracts';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams } from '../common/zod-validation';
import { ProjectsService } from './projects.service';

@Controller('projects')
export class ProjectsController {
  constructor(private readonly projects: ProjectsService) {}

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
}
