import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { AnswerApprovalRequest, ApprovalContextQuery, ApprovalListQuery, IdParams, GatewayRoutes as R } from '@lemniscate/contracts';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams, ZQuery } from '../common/zod-validation';
import { ApprovalContextService } from './approval-context.service';
import { ApprovalsService } from './approvals.service';

@Controller('approvals')
export class ApprovalsController {
  constructor(
    private readonly approvals: ApprovalsService,
    private readonly contexts: ApprovalContextService,
  ) {}

  @Get()
  @Can('read', 'Approval')
  @Returns(R.listApprovals.response, 'Approval requests you may see, newest first', R.listApprovals.status)
  list(@CurrentPrincipal() principal: Principal, @ZQuery(R.listApprovals.query) query: ApprovalListQuery) {
    return this.approvals.list(principal, query);
  }

  @Get(':id')
  @Can('read', 'Approval')
  @Returns(R.getApproval.response, 'One approval request, with the exact command or diff', R.getApproval.status)
  get(@CurrentPrincipal() principal: Principal, @ZParams(R.getApproval.params) params: IdParams) {
    return this.approvals.get(principal, params.id);
  }

  @Get(':id/context')
  @Can('read', 'Approval')
  @Returns(R.approvalContext.response, "Lines of a changed file around the change's hunks, read from the session's sandbox", R.approvalContext.status)
  context(@CurrentPrincipal() principal: Principal, @ZParams(R.approvalContext.params) params: IdParams, @ZQuery(R.approvalContext.query) query: ApprovalContextQuery) {
    return this.contexts.context(principal, params.id, query);
  }

  @Post(':id/approve')
  @HttpCode(200)
  @Can('answer', 'Approval')
  @Returns(R.approve.response, 'Approve (once, or for identical commands when the policy allows)', R.approve.status)
  approve(@CurrentPrincipal() principal: Principal, @ZParams(R.approve.params) params: IdParams, @ZBody(R.approve.body) body: AnswerApprovalRequest) {
    return this.approvals.answer(principal, params.id, 'approved', body);
  }

  @Post(':id/reject')
  @HttpCode(200)
  @Can('answer', 'Approval')
  @Returns(R.reject.response, 'Reject', R.reject.status)
  reject(@CurrentPrincipal() principal: Principal, @ZParams(R.reject.params) params: IdParams, @ZBody(R.reject.body) body: AnswerApprovalRequest) {
    return this.approvals.answer(principal, params.id, 'rejected', body);
  }
}
