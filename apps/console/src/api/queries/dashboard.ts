import { queryOptions } from '@tanstack/react-query';
import { api } from '../client';
import { routes } from '../routes';
import { DashboardStats } from '../console-contracts';

export const dashboardQuery = (filter: { projectId?: string; days?: number } = {}) =>
  queryOptions({
    queryKey: ['dashboard', filter],
    queryFn: ({ signal }) => api.json(DashboardStats, routes.dashboard, { signal, query: filter }),
    refetchInterval: 30_000,
  });
