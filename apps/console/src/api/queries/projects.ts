import { queryOptions } from '@tanstack/react-query';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';

export const projectsQuery = () =>
  queryOptions({
    queryKey: ['projects'],
    queryFn: ({ signal }) => api.call(R.listProjects, { signal }),
    staleTime: 60_000,
  });

export const addMember = (projectId: string, userId: string) => api.call(R.addMember, { params: { projectId }, body: { userId } });
export const removeMember = (projectId: string, userId: string) => api.call(R.removeMember, { params: { projectId, userId } });
