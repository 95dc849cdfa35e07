import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { CreateProjectRequest, UpdateProjectRequest } from '@lemniscate/contracts';
import { addMember, createProject, membersQuery, projectsQuery, removeMember, updateProject } from '../api/queries/projects';
import { usersQuery } from '../api/queries/users';
import { fromQuery } from '../components/Query';
import { ProjectsPageView } from './ProjectsPageView';

export function ProjectsPage() {
  const qc = useQueryClient();
  const projects = useQuery(projectsQuery());
  const users = useQuery(usersQuery());
  const [selected, setSelected] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const members = useQuery({ ...membersQuery(selected ?? ''), enabled: selected !== null });
  const refresh = () => Promise.all([qc.invalidateQueries({ queryKey: ['projects'] }), qc.invalidateQueries({ queryKey: ['users'] })]);

  const create = useMutation({
    mutationFn: async ({ body, memberIds }: { body: CreateProjectRequest; memberIds: string[] }) => {
      const project = await createProject(body);
      for (const userId of memberIds) await addMember(project.id, userId);
      return { project, added: memberIds.length };
    },
    onSuccess: async ({ project, added }) => {
      setNotice(
        `Project ${project.name} was created${added ? ` with ${added === 1 ? 'one member' : `${added} members`}` : ''}; sessions start from ${project.repositorySource} at ${project.defaultRef}.`,
      );
      await refresh();
      setSelected(project.id);
    },
  });
  const update = useMutation({
    mutationFn: ({ projectId, body }: { projectId: string; body: UpdateProjectRequest }) => updateProject(projectId, body),
    onSuccess: async (project) => {
      setNotice(`Saved: ${project.name} starts sessions from ${project.repositorySource} at ${project.defaultRef}.`);
      await refresh();
    },
  });
  const membership = useMutation({
    mutationFn: ({ projectId, userId, add }: { projectId: string; userId: string; add: boolean }) => (add ? addMember(projectId, userId) : removeMember(projectId, userId)),
    onSuccess: async () => {
      setNotice(null);
      await Promise.all([qc.invalidateQueries({ queryKey: ['projects', 'members'] }), refresh()]);
    },
  });
  return (
    <ProjectsPageView
      projects={fromQuery(projects)}
      selectedId={selected}
      onSelect={(id) => {
        setSelected(id);
        setNotice(null);
      }}
      members={fromQuery(members)}
      users={users.data ?? []}
      onCreate={(body, memberIds) => create.mutate({ body, memberIds })}
      onUpdate={(projectId, body) => update.mutate({ projectId, body })}
      onAddMember={(projectId, userId) => membership.mutate({ projectId, userId, add: true })}
      onRemoveMember={(projectId, userId) => membership.mutate({ projectId, userId, add: false })}
      policyHref={(projectId) => `/policies?project=${encodeURIComponent(projectId)}`}
      busy={create.isPending || update.isPending || membership.isPending}
      actionError={create.error ?? update.error ?? membership.error ?? users.error}
      notice={notice}
    />
  );
}
