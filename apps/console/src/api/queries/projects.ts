import { queryOptions } from '@tanstack/react-query';
import { z } from 'zod';
import { OkResponse, ProjectView, UserView } from '@lemniscate/contracts';
import { api } from '../client';
import { routes } from '../routes';

export const projectsQuery = () =>
  queryOptions({
    queryKey: ['projects'],
    queryFn: ({ signal }) => api.json(z.array(ProjectView), routes.projects, { signal }),
    staleTime: 60_000,
  });

export const membersQuery = (projectId: string) =>
  queryOptions({
    queryKey: ['projects', projectId, 'members'],
    queryFn: ({ signal }) => api.json(z.array(UserView), routes.members(projectId), { signal }),
  });

export const addMember = (projectId: string, userId: string) => api.json(OkResponse, routes.members(projectId), { method: 'POST', body: { userId } });
export const removeMember = (projectId: string, userId: string) => api.json(OkResponse, routes.member(projectId, userId), { method: 'DELETE' });
