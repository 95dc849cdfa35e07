import { queryOptions } from '@tanstack/react-query';
import { type SessionStatus, GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';

export const sessionsQuery = (filter: { projectId?: string; status?: SessionStatus } = {}) =>
  queryOptions({
    queryKey: ['sessions', filter],
    queryFn: ({ signal }) => api.call(R.listSessions, { signal, query: filter }),
  });

export const sessionQuery = (id: string) =>
  queryOptions({
    queryKey: ['sessions', id],
    queryFn: ({ signal }) => api.call(R.getSession, { params: { id }, signal }),
  });

export const stopSession = (id: string, reason?: string) => api.call(R.stopSession, { params: { id }, body: reason ? { reason } : {} });
export const revokeSession = (id: string, reason?: string) => api.call(R.revokeSession, { params: { id }, body: reason ? { reason } : {} });
