import { Controller, Delete, Get, Post } from '@nestjs/common';
import { AddMemberRequest, CreateProjectRequest, OkResponse, ProjectMemberParams, ProjectParams, ProjectView } from '@lemniscate/contracts';
import { z } from 'zod';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams } from '../common/zod-validation';
import { ProjectsService } from './projects.service';

@Controller('projects')
export class ProjectsController {
  constructor(private readonly projects: ProjectsService) {}

  @Get()
  @Can('read', 'Project')
  @Returns(z.array(ProjectView), 'Projects you are a member of')
  list(@CurrentPrincipal() principal: Principal) {
    return this.projects.list(principal);
  }

  @Post()
  @Can('create', 'Project')
  @Returns(ProjectView, 'Create a project (its policy starts as the built-in default)', 201)
  create(@CurrentPrincipal() principal: Principal, @ZBody(CreateProjectRequest) body: CreateProjectRequest) {
    return this.projects.create(principal, body);
  }

  @Get(':projectId')
  @Can('read', 'Project')
  @Returns(ProjectView, 'One project')
  get(@CurrentPrincipal() principal: Principal, @ZParams(ProjectParams) params: ProjectParams) {
    return this.projects.get(principal, params.projectId);
  }

  @Post(':projectId/members')
  @Can('update', 'Project')
  @Returns(OkResponse, 'Add a user to the project', 201)
  addMember(@CurrentPrincipal() principal: Principal, @ZParams(ProjectParams) params: ProjectParams, @ZBody(AddMemberRequest) body: AddMemberRequest) {
    return this.projects.addMember(principal, params.projectId, body);
  }

  @Delete(':projectId/members/:userId')
  @Can('update', 'Project')
  @Returns(OkResponse, 'Remove a user from the project')
  removeMember(@CurrentPrincipal() principal: Principal, @ZParams(ProjectMemberParams) params: ProjectMemberParams) {
    return this.projects.removeMember(principal, params.projectId, params.userId);
  }
}
