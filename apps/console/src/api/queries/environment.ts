import { queryOptions } from '@tanstack/react-query';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';

/** While a preparation runs, its status is read again this often. */
export const STATUS_POLL_MS = 2_000;
/** While a preparation's log can still grow, its tail is read again this often. */
export const LOG_POLL_MS = 1_000;

export const environmentQuery = (projectId: string) =>
  queryOptions({
    queryKey: ['projects', projectId, 'environment'],
    queryFn: ({ signal }) => api.call(R.environmentStatus, { params: { projectId }, signal }),
    refetchInterval: (query) => (query.state.data?.state === 'preparing' ? STATUS_POLL_MS : false),
  });

/** `force` prepares again inputs that are already prepared (or whose preparation failed). */
export const prepareEnvironment = (projectId: string, force: boolean) => api.call(R.prepareEnvironment, { params: { projectId }, body: { force } });

/** The log of one preparation from `offset` (bytes), as far as it goes now. */
export const environmentLogFrom = (projectId: string, jobId: string, offset: number, signal?: AbortSignal) => api.call(R.environmentLog, { params: { projectId, jobId }, query: { offset }, signal });
