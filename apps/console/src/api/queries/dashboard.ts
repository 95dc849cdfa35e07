import { queryOptions } from '@tanstack/react-query';
import { api } from '../client';
import { routes } from '../routes';
import { DashboardStats } from '../console-contracts';

/** The figures come from the gateway (GET /stats/dashboard), computed over the caller's projects only. */
export const dashboardQuery = (filter: { days: number }) =>
  queryOptions({
    queryKey: ['dashboard', filter],
    queryFn: ({ signal }) => api.json(DashboardStats, routes.dashboard, { signal, query: { days: filter.days } }),
    refetchInterval: 30_000,
  });
