import { useState } from 'react';
import { Navigate, useNavigate, useParams } from 'react-router';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { capabilitiesQuery } from '../api/queries/capabilities';
import { environmentQuery, prepareEnvironment } from '../api/queries/environment';
import { projectsQuery } from '../api/queries/projects';
import { canDo } from '../auth/access';
import { useAuth } from '../auth/AuthContext';
import { fromQuery, Query } from '../components/Query';
import { Empty } from '../components/States';
import { useEnvironmentLog } from '../environment/useEnvironmentLog';
import { prepareNotice } from '../environment/view-model';
import { EnvironmentPageView } from './EnvironmentPageView';

export const environmentPath = (projectId: string) => `/projects/${encodeURIComponent(projectId)}/environment`;

/** `/environment` (the navigation's link) opens the environment of the first project. */
export function EnvironmentIndexPage() {
  const projects = useQuery(projectsQuery());
  return (
    <Query state={fromQuery(projects)} what="the projects">
      {(list) => (list.length === 0 ? <Empty>No project yet. Create one with the CLI or the API first.</Empty> : <Navigate to={environmentPath(list[0]!.id)} replace />)}
    </Query>
  );
}

/** `/projects/:projectId/environment`. */
export function EnvironmentPage() {
  const { projectId = '' } = useParams();
  const navigate = useNavigate();
  const qc = useQueryClient();
  const { me } = useAuth();
  const projects = useQuery(projectsQuery());
  const capabilities = useQuery(capabilitiesQuery());
  // Offered unless the gateway's OpenAPI document says it has no environments; if that document
  // cannot be read, the page asks and a failure explains itself.
  const offered = capabilities.data?.offers('get', '/api/v1/projects/{projectId}/environment') ?? !capabilities.isSuccess;
  const status = useQuery({ ...environmentQuery(projectId), enabled: offered && projectId !== '' });
  const log = useEnvironmentLog(projectId, offered ? (status.data?.job?.jobId ?? null) : null);
  // What pressing Prepare did, shown while the state it speaks of lasts.
  const [notice, setNotice] = useState<{ text: string; state: string } | null>(null);

  const prepare = useMutation({
    mutationFn: (force: boolean) => prepareEnvironment(projectId, force),
    onSuccess: (s) => {
      qc.setQueryData(environmentQuery(projectId).queryKey, s);
      setNotice({ text: prepareNotice(s), state: s.state });
    },
  });

  return (
    <EnvironmentPageView
      projects={projects.data ?? []}
      projectId={projectId}
      onProjectChange={(id) => {
        setNotice(null);
        prepare.reset();
        void navigate(environmentPath(id));
      }}
      status={fromQuery(status)}
      log={log}
      canPrepare={canDo(me.user.role, 'prepareEnvironment')}
      onPrepare={(force) => {
        setNotice(null);
        prepare.mutate(force);
      }}
      requesting={prepare.isPending}
      prepareError={prepare.error}
      notice={notice && notice.state === status.data?.state ? notice.text : null}
      now={Date.now()}
      unavailable={!offered}
    />
  );
}
