import { Injectable } from '@nestjs/common';
import { summariseDashboard, type DashboardQuery, type DashboardStats } from '@lemniscate/contracts';
import { AccessService } from '../auth/access.service';
import type { Principal } from '../auth/principal';
import { ProjectsRepository } from '../db/repositories/projects.repository';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { ToolCallsRepository } from '../db/repositories/tool-calls.repository';
import { UsersRepository } from '../db/repositories/users.repository';
import { ApprovalsService } from '../sessions/approvals.service';
import { toSessionView, toToolCallView } from '../sessions/views';

/** Sessions counted per request: the dashboard covers at most 90 days of them. */
const MAX_SESSIONS = 5000;

/**
 * The console's dashboard figures, computed here over exactly what the caller may read (C1):
 * the sessions of their member projects (a developer's own), those sessions' tool calls, and the
 * pending approvals they may see.
 */
@Injectable()
export class StatsService {
  constructor(
    private readonly sessions: SessionsRepository,
    private readonly toolCalls: ToolCallsRepository,
    private readonly approvals: ApprovalsService,
    private readonly access: AccessService,
    private readonly projects: ProjectsRepository,
    private readonly users: UsersRepository,
  ) {}

  async dashboard(principal: Principal, query: DashboardQuery): Promise<DashboardStats> {
    const now = new Date();
    const since = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - (query.days - 1) * 86_400_000;
    const mine = principal.role === 'developer' ? { userId: principal.userId } : {};
    const rows = (await this.sessions.list({ ...mine, projectIds: principal.projectIds, limit: MAX_SESSIONS })).filter(
      (s) => s.startedAt.getTime() >= since && this.access.can(principal, 'read', 'Session', { projectId: s.projectId, userId: s.userId }),
    );
    const toolCalls = [];
    for (const s of rows) toolCalls.push(...(await this.toolCalls.listForSession(s.id)).map(toToolCallView));
    const pending = principal.ability.can('read', 'Approval') ? await this.approvals.list(principal, { state: 'pending', limit: 500 }) : [];
    const [userEmails, projectNames] = await Promise.all([this.users.emailsOf(rows.map((s) => s.userId)), this.projects.namesOf(rows.map((s) => s.projectId))]);
    return summariseDashboard({ sessions: rows.map(toSessionView), toolCalls, pending, days: query.days, now, projectNames, userEmails });
  }
}
