import { Controller, Get, HttpCode, Inject, Param, Post, Query } from '@nestjs/common';
import { EnvironmentLogQuery, EnvironmentRequest, PrepareEnvironmentRequest, type EnvironmentRequestParsed, type PrepareEnvironmentRequestParsed } from '@lemniscate/contracts';
import { EnvironmentService } from '../environment/environment.service';
import { ExecHostError } from '../errors';
import { ZBody } from './zod-pipe';

/** Project environments: what a project's devcontainer gives its sessions, prepared once per inputs. */
@Controller('v1/environments')
export class EnvironmentsController {
  constructor(@Inject(EnvironmentService) private readonly environments: EnvironmentService) {}

  @Post('status')
  @HttpCode(200)
  status(@ZBody(EnvironmentRequest) body: EnvironmentRequestParsed) {
    return this.environments.publicStatus(body);
  }

  @Post('prepare')
  @HttpCode(202)
  prepare(@ZBody(PrepareEnvironmentRequest) body: PrepareEnvironmentRequestParsed) {
    return this.environments.prepare(body);
  }

  @Get('jobs/:jobId/log')
  log(@Param('jobId') jobId: string, @Query() query: Record<string, unknown>) {
    const parsed = EnvironmentLogQuery.safeParse(query);
    if (!parsed.success) throw new ExecHostError('invalid_request', 'offset must be a whole number of bytes.');
    return this.environments.logOf(jobId, parsed.data.offset);
  }
}
