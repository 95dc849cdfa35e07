import { queryOptions } from '@tanstack/react-query';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';
import type { SessionsFilter } from '../../pages/SessionsPageView';

export const sessionsQuery = ({ waiting, ...filter }: SessionsFilter = {}) =>
  queryOptions({
    queryKey: ['sessions', 'list', filter, waiting === true],
    queryFn: ({ signal }) => api.call(R.listSessions, { signal, query: waiting ? { ...filter, waiting: 'true' } : filter }),
  });

export const sessionQuery = (id: string) =>
  queryOptions({
    queryKey: ['sessions', id],
    queryFn: ({ signal }) => api.call(R.getSession, { params: { id }, signal }),
  });

export const stopSession = (id: string, reason?: string) => api.call(R.stopSession, { params: { id }, body: reason ? { reason } : {} });
export const revokeSession = (id: string, reason?: string) => api.call(R.revokeSession, { params: { id }, body: reason ? { reason } : {} });
