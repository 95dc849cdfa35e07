import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { CreateProjectRequest, UpdateProjectRequest } from '@lemniscate/contracts';
import { policyVersionQuery, policyVersionsQuery, publishPolicy } from '../api/queries/policies';
import { addMember, createProject, membersQuery, projectsQuery, removeMember, updateProject } from '../api/queries/projects';
import { usersQuery } from '../api/queries/users';
import { fromQuery, ready, type QueryState } from '../components/Query';
import { runtimeOf, withRuntime, type SandboxRuntime } from '../policy/text';
import { ProjectsPageView } from './ProjectsPageView';

export function ProjectsPage() {
  const qc = useQueryClient();
  const projects = useQuery(projectsQuery());
  const users = useQuery(usersQuery());
  const [selected, setSelected] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const members = useQuery({ ...membersQuery(selected ?? ''), enabled: selected !== null });
  // The runtime is the policy's (sandbox.runtime): read from the version in force.
  const versions = useQuery({ ...policyVersionsQuery(selected ?? ''), enabled: selected !== null });
  const latest = versions.data?.length ? Math.max(...versions.data.map((v) => v.version)) : null;
  const inForce = useQuery({ ...policyVersionQuery(selected ?? '', latest ?? 0), enabled: selected !== null && latest !== null });
  const runtime: QueryState<{ runtime: string; version: number | null }> =
    versions.isError || inForce.isError
      ? { status: 'error', error: versions.error ?? inForce.error, retry: () => void (versions.isError ? versions.refetch() : inForce.refetch()) }
      : versions.isSuccess && latest === null
        ? ready({ runtime: 'runc', version: null })
        : inForce.data
          ? ready({ runtime: runtimeOf(inForce.data), version: inForce.data.version })
          : { status: 'loading' };
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
  const runtimeChange = useMutation({
    mutationFn: async ({ projectId, runtime: wanted }: { projectId: string; runtime: SandboxRuntime }) => {
      // Every other line of the policy in force is kept; only sandbox.runtime changes.
      const text = withRuntime(latest === null ? null : (inForce.data ?? null), wanted);
      if (text === null) return null;
      return publishPolicy(projectId, { sourceText: text, comment: `sandbox runtime set to ${wanted} (console, Projects page)` });
    },
    onSuccess: async (published, { projectId, runtime: wanted }) => {
      const name = projects.data?.find((p) => p.id === projectId)?.name ?? 'this project';
      setNotice(
        published
          ? `Published policy version ${published.version}: new sessions of ${name} run under ${wanted}; running ones keep the runtime they started with.`
          : `The policy in force already runs ${name}'s sessions under ${wanted}; nothing was published.`,
      );
      await qc.invalidateQueries({ queryKey: ['projects', projectId, 'policy'] });
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
      runtime={runtime}
      onRuntime={(projectId, wanted) => runtimeChange.mutate({ projectId, runtime: wanted })}
      busy={create.isPending || update.isPending || membership.isPending || runtimeChange.isPending}
      actionError={create.error ?? update.error ?? membership.error ?? runtimeChange.error ?? users.error}
      notice={notice}
    />
  );
}
