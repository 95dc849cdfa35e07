import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { AnswerApprovalRequest, ApprovalListQuery, ApprovalView, IdParams } from '@lemniscate/contracts';
import { z } from 'zod';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams, ZQuery } from '../common/zod-validation';
import { ApprovalsService } from './approvals.service';

@Controller('approvals')
export class ApprovalsController {
  constructor(private readonly approvals: ApprovalsService) {}

  @Get()
  @Can('read', 'Approval')
  @Returns(z.array(ApprovalView), 'Approval requests you may see, newest first')
  list(@CurrentPrincipal() principal: Principal, @ZQuery(ApprovalListQuery) query: ApprovalListQuery) {
    return this.approvals.list(principal, query);
  }

  @Get(':id')
  @Can('read', 'Approval')
  @Returns(ApprovalView, 'One approval request, with the exact command or diff')
  get(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams) {
    return this.approvals.get(principal, params.id);
  }

  @Post(':id/approve')
  @HttpCode(200)
  @Can('answer', 'Approval')
  @Returns(ApprovalView, 'Approve (once, or for identical commands when the policy allows)')
  approve(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams, @ZBody(AnswerApprovalRequest.default({ rememberCommand: false })) body: AnswerApprovalRequest) {
    return this.approvals.answer(principal, params.id, 'approved', body);
  }

  @Post(':id/reject')
  @HttpCode(200)
  @Can('answer', 'Approval')
  @Returns(ApprovalView, 'Reject')
  reject(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams, @ZBody(AnswerApprovalRequest.default({ rememberCommand: false })) body: AnswerApprovalRequest) {
    return this.approvals.answer(principal, params.id, 'rejected', body);
  }
}
