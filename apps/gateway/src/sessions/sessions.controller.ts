import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { CreateSessionRequest, IdParams, StartSubagentRequest, SessionListQuery, StopSessionRequest, GatewayRoutes as R } from '@lemniscate/contracts';
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
  @Returns(R.createSession.response, 'Start a session: record the instruction and run the agent in a new sandbox', R.createSession.status)
  create(@CurrentPrincipal() principal: Principal, @ZBody(R.createSession.body) body: CreateSessionRequest) {
    return this.runtime.start(principal, body);
  }

  @Post(':id/subagents')
  @Can('create', 'Session')
  @Returns(R.startSubagent.response, 'Start a background subagent in a running session (a mention such as @explore)', R.startSubagent.status)
  startSubagent(@CurrentPrincipal() principal: Principal, @ZParams(R.startSubagent.params) params: IdParams, @ZBody(R.startSubagent.body) body: StartSubagentRequest) {
    return this.runtime.startSubagent(principal, params.id, body);
  }

  @Get()
  @Can('read', 'Session')
  @Returns(R.listSessions.response, 'Sessions you may see, newest first', R.listSessions.status)
  list(@CurrentPrincipal() principal: Principal, @ZQuery(R.listSessions.query) query: SessionListQuery) {
    return this.sessions.list(principal, query);
  }

  @Get(':id')
  @Can('read', 'Session')
  @Returns(R.getSession.response, 'One session', R.getSession.status)
  get(@CurrentPrincipal() principal: Principal, @ZParams(R.getSession.params) params: IdParams) {
    return this.sessions.get(principal, params.id);
  }

  @Get(':id/tool-calls')
  @Can('read', 'Session')
  @Returns(R.sessionToolCalls.response, "A session's tool calls with their decisions and results", R.sessionToolCalls.status)
  toolCalls(@CurrentPrincipal() principal: Principal, @ZParams(R.sessionToolCalls.params) params: IdParams) {
    return this.sessions.listToolCalls(principal, params.id);
  }

  @Post(':id/stop')
  @HttpCode(200)
  @Can('stop', 'Session')
  @Returns(R.stopSession.response, 'Stop a session: cancels its work, rejects pending approvals, destroys its sandbox', R.stopSession.status)
  stop(@CurrentPrincipal() principal: Principal, @ZParams(R.stopSession.params) params: IdParams, @ZBody(R.stopSession.body) body: StopSessionRequest) {
    return this.revocation.stop(principal, params.id, body.reason);
  }

  @Post(':id/revoke')
  @HttpCode(200)
  @Can('revoke', 'Session')
  @Returns(R.revokeSession.response, 'Revoke a session (administrators)', R.revokeSession.status)
  revoke(@CurrentPrincipal() principal: Principal, @ZParams(R.revokeSession.params) params: IdParams, @ZBody(R.revokeSession.body) body: StopSessionRequest) {
    return this.revocation.revokeSession(principal, params.id, body.reason);
  }
}
