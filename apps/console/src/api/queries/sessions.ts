import { queryOptions } from '@tanstack/react-query';
import { z } from 'zod';
import { SessionView, StopSessionResponse, ToolCallView, type SessionStatus } from '@lemniscate/contracts';
import { api } from '../client';
import { routes } from '../routes';

export const sessionsQuery = (filter: { projectId?: string; status?: SessionStatus } = {}) =>
  queryOptions({
    queryKey: ['sessions', filter],
    queryFn: ({ signal }) => api.json(z.array(SessionView), routes.sessions, { signal, query: filter }),
  });

export const sessionQuery = (id: string) =>
  queryOptions({
    queryKey: ['sessions', id],
    queryFn: ({ signal }) => api.json(SessionView, routes.session(id), { signal }),
  });

export const toolCallsQuery = (id: string) =>
  queryOptions({
    queryKey: ['sessions', id, 'tool-calls'],
    queryFn: ({ signal }) => api.json(z.array(ToolCallView), routes.sessionToolCalls(id), { signal }),
  });

export const stopSession = (id: string, reason?: string) => api.json(StopSessionResponse, routes.stopSession(id), { method: 'POST', body: reason ? { reason } : {} });
export const revokeSession = (id: string, reason?: string) => api.json(StopSessionResponse, routes.revokeSession(id), { method: 'POST', body: reason ? { reason } : {} });
