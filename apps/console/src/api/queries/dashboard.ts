import { queryOptions } from '@tanstack/react-query';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';

/** The figures come from the gateway (GET /stats/dashboard), computed over the caller's projects only. */
export const dashboardQuery = (filter: { days: number }) =>
  queryOptions({
    queryKey: ['dashboard', filter],
    queryFn: ({ signal }) => api.call(R.dashboard, { signal, query: { days: filter.days } }),
    refetchInterval: 30_000,
  });
