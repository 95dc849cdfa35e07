import { queryOptions } from '@tanstack/react-query';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';

/** How often the Exec-hosts page reads the list again: heartbeats come every few seconds. */
export const EXEC_HOSTS_REFRESH_SECONDS = 5;

export const execHostsQuery = () =>
  queryOptions({
    queryKey: ['exec-hosts'],
    queryFn: ({ signal }) => api.call(R.listExecHosts, { signal }),
    refetchInterval: EXEC_HOSTS_REFRESH_SECONDS * 1000,
  });

export const drainExecHost = (hostId: string, reason: string | undefined) => api.call(R.drainExecHost, { params: { hostId }, body: reason === undefined ? {} : { reason } });
export const undrainExecHost = (hostId: string) => api.call(R.undrainExecHost, { params: { hostId } });
