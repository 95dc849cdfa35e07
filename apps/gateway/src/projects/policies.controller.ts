import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { PolicyDiffQuery, PolicyDryRunRequest, PolicyVersionParams, ProjectParams, PublishPolicyRequest, RollbackPolicyRequest, GatewayRoutes as R } from '@lemniscate/contracts';
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
  @Returns(R.policyDryRun.response, "Replay the last sessions' tool calls under a draft and list the decisions that would change", R.policyDryRun.status)
  dryRun(@CurrentPrincipal() principal: Principal, @ZParams(R.policyDryRun.params) params: ProjectParams, @ZBody(R.policyDryRun.body) body: PolicyDryRunRequest) {
    return this.dryRuns.run(principal, params.projectId, body);
  }

  @Get()
  @Can('read', 'Policy')
  @Returns(R.currentPolicy.response, 'The policy version in force', R.currentPolicy.status)
  current(@CurrentPrincipal() principal: Principal, @ZParams(R.currentPolicy.params) params: ProjectParams) {
    return this.policies.current(principal, params.projectId);
  }

  @Post()
  @Can('publish', 'Policy')
  @Returns(R.publishPolicy.response, 'Publish a new policy version (validated first; in force from the next action)', R.publishPolicy.status)
  publish(@CurrentPrincipal() principal: Principal, @ZParams(R.publishPolicy.params) params: ProjectParams, @ZBody(R.publishPolicy.body) body: PublishPolicyRequest) {
    return this.policies.publish(principal, params.projectId, body);
  }

  @Get('versions')
  @Can('read', 'Policy')
  @Returns(R.policyVersions.response, 'Every version, newest first', R.policyVersions.status)
  list(@CurrentPrincipal() principal: Principal, @ZParams(R.policyVersions.params) params: ProjectParams) {
    return this.policies.list(principal, params.projectId);
  }

  @Get('versions/:version')
  @Can('read', 'Policy')
  @Returns(R.policyVersion.response, 'One version', R.policyVersion.status)
  show(@CurrentPrincipal() principal: Principal, @ZParams(R.policyVersion.params) params: PolicyVersionParams) {
    return this.policies.show(principal, params.projectId, params.version);
  }

  @Get('diff')
  @Can('read', 'Policy')
  @Returns(R.policyDiff.response, 'Unified diff between two versions', R.policyDiff.status)
  diff(@CurrentPrincipal() principal: Principal, @ZParams(R.policyDiff.params) params: ProjectParams, @ZQuery(R.policyDiff.query) query: PolicyDiffQuery) {
    return this.policies.diff(principal, params.projectId, query.from, query.to);
  }

  @Post('rollback')
  @Can('publish', 'Policy')
  @Returns(R.policyRollback.response, 'Publish an old version again as the newest', R.policyRollback.status)
  rollback(@CurrentPrincipal() principal: Principal, @ZParams(R.policyRollback.params) params: ProjectParams, @ZBody(R.policyRollback.body) body: RollbackPolicyRequest) {
    return this.policies.rollback(principal, params.projectId, body);
  }
}
