import { Controller, Get } from '@nestjs/common';
import { DashboardQuery, DashboardStats } from '@lemniscate/contracts';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZQuery } from '../common/zod-validation';
import { StatsService } from './stats.service';

@Controller('stats')
export class StatsController {
  constructor(private readonly stats: StatsService) {}

  @Get('dashboard')
  @Can('read', 'Project')
  @Returns(DashboardStats, "The dashboard's figures over the sessions, tool calls and approvals of the caller's projects")
  dashboard(@CurrentPrincipal() principal: Principal, @ZQuery(DashboardQuery) query: DashboardQuery) {
    return this.stats.dashboard(principal, query);
  }
}
