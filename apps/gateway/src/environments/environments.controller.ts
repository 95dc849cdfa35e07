import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { PrepareEnvironmentBody, ProjectParams, GatewayRoutes as R } from '@lemniscate/contracts';
import type { z } from 'zod';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams, ZQuery } from '../common/zod-validation';
import { EnvironmentsService } from './environments.service';

/** A project's environment (S8): its status, a preparation, a preparation's log. */
@Controller('projects/:projectId/environment')
export class EnvironmentsController {
  constructor(private readonly environments: EnvironmentsService) {}

  @Get()
  @Can('read', 'Project')
  @Returns(R.environmentStatus.response, "Where the project's environment stands for its default ref: what a session started now gets, or why it would be refused", R.environmentStatus.status)
  status(@CurrentPrincipal() principal: Principal, @ZParams(R.environmentStatus.params) params: ProjectParams) {
    return this.environments.status(principal, params.projectId);
  }

  @Post('prepare')
  @HttpCode(202)
  @Can('create', 'Session')
  @Returns(
    R.prepareEnvironment.response,
    'Prepare the environment for its current inputs (or join the preparation running); ready at once when it already is, unless forced',
    R.prepareEnvironment.status,
  )
  prepare(@CurrentPrincipal() principal: Principal, @ZParams(R.prepareEnvironment.params) params: ProjectParams, @ZBody(R.prepareEnvironment.body) body: PrepareEnvironmentBody) {
    return this.environments.prepare(principal, params.projectId, body);
  }

  @Get('jobs/:jobId/log')
  @Can('read', 'Project')
  @Returns(R.environmentLog.response, "A preparation's log from a byte offset; complete once the job is over", R.environmentLog.status)
  log(
    @CurrentPrincipal() principal: Principal,
    @ZParams(R.environmentLog.params) params: z.output<typeof R.environmentLog.params>,
    @ZQuery(R.environmentLog.query) query: z.output<typeof R.environmentLog.query>,
  ) {
    return this.environments.log(principal, params.projectId, params.jobId, query.offset);
  }
}
