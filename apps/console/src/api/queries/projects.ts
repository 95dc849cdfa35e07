import { queryOptions } from '@tanstack/react-query';
import { type CreateProjectRequest, GatewayRoutes as R, type UpdateProjectRequest } from '@lemniscate/contracts';
import { api } from '../client';

export const projectsQuery = () =>
  queryOptions({
    queryKey: ['projects'],
    queryFn: ({ signal }) => api.call(R.listProjects, { signal }),
    staleTime: 60_000,
  });

export const membersQuery = (projectId: string) =>
  queryOptions({
    queryKey: ['projects', 'members', projectId],
    queryFn: ({ signal }) => api.call(R.listMembers, { params: { projectId }, signal }),
  });

/** The project's MCP servers, their last listing and each tool's pin status (AG7). */
export const projectMcpQuery = (projectId: string) =>
  queryOptions({
    queryKey: ['projects', projectId, 'mcp'],
    queryFn: ({ signal }) => api.call(R.projectMcp, { params: { projectId }, signal }),
  });

export const createProject = (body: CreateProjectRequest) => api.call(R.createProject, { body });
export const updateProject = (projectId: string, body: UpdateProjectRequest) => api.call(R.updateProject, { params: { projectId }, body });
export const addMember = (projectId: string, userId: string) => api.call(R.addMember, { params: { projectId }, body: { userId } });
export const removeMember = (projectId: string, userId: string) => api.call(R.removeMember, { params: { projectId, userId } });
