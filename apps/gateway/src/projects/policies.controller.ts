import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import {
  PolicyDiffQuery,
  PolicyDryRunRequest,
  PolicyDryRunResponse,
  PolicyDiffResponse,
  PolicyVersionParams,
  PolicyVersionSummary,
  PolicyVersionView,
  ProjectParams,
  PublishPolicyRequest,
  RollbackPolicyRequest,
} from '@lemniscate/contracts';
import { z } from 'zod';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams, ZQuery } from '../common/zod-validation';
import { PoliciesService } from './policies.service';
import { PolicyDryRunService } from './policy-dry-run.service';

@Controller('projects/:projectId/policy')
export class PoliciesController {
  constructor(
    private readonly policies: PoliciesService,
    private readonly dryRuns: PolicyDryRunService,
  ) {}

  @Post('dry-run')
  @HttpCode(200)
  @Can('publish', 'Policy')
  @Returns(PolicyDryRunResponse, "Replay the last sessions' tool calls under a draft and list the decisions that would change")
  dryRun(@CurrentPrincipal() principal: Principal, @ZParams(ProjectParams) params: ProjectParams, @ZBody(PolicyDryRunRequest) body: PolicyDryRunRequest) {
    return this.dryRuns.run(principal, params.projectId, body);
  }

  @Get()
  @Can('read', 'Policy')
  @Returns(PolicyVersionView, 'The policy version in force')
  current(@CurrentPrincipal() principal: Principal, @ZParams(ProjectParams) params: ProjectParams) {
    return this.policies.current(principal, params.projectId);
  }

  @Post()
  @Can('publish', 'Policy')
  @Returns(PolicyVersionView, 'Publish a new policy version (validated first; in force from the next action)', 201)
  publish(@CurrentPrincipal() principal: Principal, @ZParams(ProjectParams) params: ProjectParams, @ZBody(PublishPolicyRequest) body: PublishPolicyRequest) {
    return this.policies.publish(principal, params.projectId, body);
  }

  @Get('versions')
  @Can('read', 'Policy')
  @Returns(z.array(PolicyVersionSummary), 'Every version, newest first')
  list(@CurrentPrincipal() principal: Principal, @ZParams(ProjectParams) params: ProjectParams) {
    return this.policies.list(principal, params.projectId);
  }

  @Get('versions/:version')
  @Can('read', 'Policy')
  @Returns(PolicyVersionView, 'One version')
  show(@CurrentPrincipal() principal: Principal, @ZParams(PolicyVersionParams) params: PolicyVersionParams) {
    return this.policies.show(principal, params.projectId, params.version);
  }

  @Get('diff')
  @Can('read', 'Policy')
  @Returns(PolicyDiffResponse, 'Unified diff between two versions')
  diff(@CurrentPrincipal() principal: Principal, @ZParams(ProjectParams) params: ProjectParams, @ZQuery(PolicyDiffQuery) query: PolicyDiffQuery) {
    return this.policies.diff(principal, params.projectId, query.from, query.to);
  }

  @Post('rollback')
  @Can('publish', 'Policy')
  @Returns(PolicyVersionView, 'Publish an old version again as the newest', 201)
  rollback(@CurrentPrincipal() principal: Principal, @ZParams(ProjectParams) params: ProjectParams, @ZBody(RollbackPolicyRequest) body: RollbackPolicyRequest) {
    return this.policies.rollback(principal, params.projectId, body);
  }
}
