import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { CreateSessionRequest, IdParams, StartSubagentRequest, SessionListQuery, SessionView, StopSessionRequest, StopSessionResponse, ToolCallView } from '@lemniscate/contracts';
import { z } from 'zod';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZBody, ZParams, ZQuery } from '../common/zod-validation';
import { SessionRuntimeService } from '../runtime/runtime.service';
import { RevocationService } from './revocation.service';
import { SessionsService } from './sessions.service';


@Controller('sessions')
export class SessionsController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly revocation: RevocationService,
    private readonly runtime: SessionRuntimeService,
  ) {}

  @Post()
  @Can('create', 'Session')
  @Returns(SessionView, 'Start a session: record the instruction and run the agent in a new sandbox', 201)
  create(@CurrentPrincipal() principal: Principal, @ZBody(CreateSessionRequest) body: CreateSessionRequest) {
    return this.runtime.start(principal, body);
  }

  @Post(':id/subagents')
  @Can('create', 'Session')
  @Returns(SessionView, 'Start a background subagent in a running session (a mention such as @explore)', 201)
  startSubagent(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams, @ZBody(StartSubagentRequest) body: StartSubagentRequest) {
    return this.runtime.startSubagent(principal, params.id, body);
  }

  @Get()
  @Can('read', 'Session')
  @Returns(z.array(SessionView), 'Sessions you may see, newest first')
  list(@CurrentPrincipal() principal: Principal, @ZQuery(SessionListQuery) query: SessionListQuery) {
    return this.sessions.list(principal, query);
  }

  @Get(':id')
  @Can('read', 'Session')
  @Returns(SessionView, 'One session')
  get(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams) {
    return this.sessions.get(principal, params.id);
  }

  @Get(':id/tool-calls')
  @Can('read', 'Session')
  @Returns(z.array(ToolCallView), "A session's tool calls with their decisions and results")
  toolCalls(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams) {
    return this.sessions.listToolCalls(principal, params.id);
  }

  @Post(':id/stop')
  @HttpCode(200)
  @Can('stop', 'Session')
  @Returns(StopSessionResponse, 'Stop a session: cancels its work, rejects pending approvals, destroys its sandbox')
  stop(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams, @ZBody(StopSessionRequest.default({})) body: StopSessionRequest) {
    return this.revocation.stop(principal, params.id, body.reason);
  }

  @Post(':id/revoke')
  @HttpCode(200)
  @Can('revoke', 'Session')
  @Returns(StopSessionResponse, 'Revoke a session (administrators)')
  revoke(@CurrentPrincipal() principal: Principal, @ZParams(IdParams) params: IdParams, @ZBody(StopSessionRequest.default({})) body: StopSessionRequest) {
    return this.revocation.revokeSession(principal, params.id, body.reason);
  }
}
