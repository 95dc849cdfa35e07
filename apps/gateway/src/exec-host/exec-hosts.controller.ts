import { Controller, Get, Headers, HttpCode, Post } from '@nestjs/common';
import { DrainExecHostRequest, ExecHostHeartbeat, ExecHostParams, GatewayRoutes as R } from '@lemniscate/contracts';
import { Can, CurrentPrincipal, Public } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { ClientIp } from '../auth/session-cookie';
import { Returns, ZBody, ZParams } from '../common/zod-validation';
import { AllowedWhenUnrecorded } from '../audit-sinks/audit-recording.guard';
import { ExecHostsService } from './exec-hosts.service';

/** Exec-hosts' own route: their heartbeat, authenticated by the exec-host token (checked by the service, audited when refused). */
@Controller('exec-hosts')
export class ExecHostHeartbeatController {
  constructor(private readonly hosts: ExecHostsService) {}

  @Post('heartbeat')
  @HttpCode(200)
  @AllowedWhenUnrecorded('a heartbeat is no one’s action; refusing it would end every running session as lost')
  @Public('exec-hosts register and heartbeat with the exec-host token, not a person’s credential; the service checks it and audits refusals')
  @Returns(R.execHostHeartbeat.response, 'Registers the exec-host or records its heartbeat; says its state in the pool', R.execHostHeartbeat.status)
  heartbeat(@Headers('authorization') authorization: string | undefined, @ClientIp() source: string, @ZBody(R.execHostHeartbeat.body) body: ExecHostHeartbeat) {
    return this.hosts.heartbeat(authorization, source, body);
  }
}

/** The pool's administration: where sessions run, and draining a host on purpose. */
@Controller('admin/exec-hosts')
export class ExecHostsAdminController {
  constructor(private readonly hosts: ExecHostsService) {}

  @Get()
  @Can('read', 'ExecHost')
  @Returns(R.listExecHosts.response, 'The exec-hosts of the pool (or the one fixed exec-host), with their state and load', R.listExecHosts.status)
  list() {
    return this.hosts.list();
  }

  @Post(':hostId/drain')
  @HttpCode(200)
  @Can('update', 'ExecHost')
  @Returns(R.drainExecHost.response, 'No new session is placed on the host; its live sessions finish', R.drainExecHost.status)
  drain(@CurrentPrincipal() principal: Principal, @ZParams(R.drainExecHost.params) params: ExecHostParams, @ZBody(R.drainExecHost.body) body: DrainExecHostRequest) {
    return this.hosts.drain(principal, params.hostId, body);
  }

  @Post(':hostId/undrain')
  @HttpCode(200)
  @Can('update', 'ExecHost')
  @Returns(R.undrainExecHost.response, 'Sessions may be placed on the host again', R.undrainExecHost.status)
  undrain(@CurrentPrincipal() principal: Principal, @ZParams(R.undrainExecHost.params) params: ExecHostParams) {
    return this.hosts.undrain(principal, params.hostId);
  }
}
