import { queryOptions } from '@tanstack/react-query';
import { z } from 'zod';
import { ApprovalView, SessionView, ToolCallView } from '@lemniscate/contracts';
import { api, isApiError } from '../client';
import { routes } from '../routes';
import { DashboardStats } from '../console-contracts';
import { summarise } from '../dashboard-summary';

/** At most this many sessions' tool calls are read to build the dashboard in the browser. */
const MAX_SESSIONS_SCANNED = 50;
const PARALLEL = 6;

async function inBatches<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

/**
 * The gateway's statistics route when it has one; otherwise the same figures built from the
 * sessions, tool calls and approvals the person may read (the server scopes each list).
 */
async function loadDashboard(days: number, signal: AbortSignal): Promise<DashboardStats> {
  try {
    return await api.json(DashboardStats, routes.dashboard, { signal, query: { days } });
  } catch (e) {
    if (!(isApiError(e) && e.status === 404)) throw e;
  }
  const since = Date.now() - days * 86_400_000;
  const [sessions, pending] = await Promise.all([
    api.json(z.array(SessionView), routes.sessions, { signal, query: { limit: 500 } }),
    api.json(z.array(ApprovalView), routes.approvals, { signal, query: { state: 'pending', limit: 500 } }).catch((e: unknown) => {
      // Security officers may read approvals; a role that cannot simply has none waiting.
      if (isApiError(e) && e.status === 403) return [];
      throw e;
    }),
  ]);
  const recent = sessions.filter((s) => Date.parse(s.startedAt) >= since).slice(0, MAX_SESSIONS_SCANNED);
  const calls = await inBatches(recent, PARALLEL, (s) => api.json(z.array(ToolCallView), routes.sessionToolCalls(s.id), { signal }));
  return summarise({ sessions, toolCalls: calls.flat(), pending, days, now: new Date() });
}

export const dashboardQuery = (filter: { days: number }) =>
  queryOptions({
    queryKey: ['dashboard', filter],
    queryFn: ({ signal }) => loadDashboard(filter.days, signal),
    refetchInterval: 30_000,
  });
