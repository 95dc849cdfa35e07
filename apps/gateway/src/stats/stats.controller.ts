import { Controller, Get } from '@nestjs/common';
import { DashboardQuery, GatewayRoutes as R } from '@lemniscate/contracts';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZQuery } from '../common/zod-validation';
import { StatsService } from './stats.service';

@Controller('stats')
export class StatsController {
  constructor(private readonly stats: StatsService) {}

  @Get('dashboard')
  @Can('read', 'Project')
  @Returns(R.dashboard.response, "The dashboard's figures over the sessions, tool calls and approvals of the caller's projects", R.dashboard.status)
  dashboard(@CurrentPrincipal() principal: Principal, @ZQuery(R.dashboard.query) query: DashboardQuery) {
    return this.stats.dashboard(principal, query);
  }
}
