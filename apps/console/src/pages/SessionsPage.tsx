import { useCallback } from 'react';
import { Link, useSearchParams } from 'react-router';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useLiveEvents } from '../api/events';
import { projectsQuery } from '../api/queries/projects';
import { sessionsQuery } from '../api/queries/sessions';
import { useAuth } from '../auth/AuthContext';
import { fromQuery } from '../components/Query';
import { filterFromSearch, searchFromFilter, SessionsPageView } from './SessionsPageView';

export function SessionsPage() {
  const { me } = useAuth();
  const qc = useQueryClient();
  const [search, setSearch] = useSearchParams();
  const filter = filterFromSearch(search);
  const sessions = useQuery(sessionsQuery(filter));
  const projects = useQuery(projectsQuery());
  const onEvent = useCallback(
    (e: { type: string }) => {
      // A new approval or an answer changes the "waiting for a person" column too.
      if (e.type.startsWith('session_') || e.type.startsWith('approval_')) void qc.invalidateQueries({ queryKey: ['sessions'] });
    },
    [qc],
  );
  const refetch = useCallback(() => void qc.invalidateQueries({ queryKey: ['sessions'] }), [qc]);
  const live = useLiveEvents(
    me.user.projectIds.map((projectId) => ({ projectId })),
    onEvent,
    { onSubscribed: refetch },
  );
  return (
    <SessionsPageView
      sessions={fromQuery(sessions)}
      filter={filter}
      onFilter={(next) => setSearch(searchFromFilter(next))}
      projects={projects.data ?? []}
      me={{ id: me.user.id, email: me.user.email }}
      seesOthers={me.user.role !== 'developer'}
      live={live.connected}
      renderSessionLink={(id, children) => <Link to={`/sessions/${encodeURIComponent(id)}`}>{children}</Link>}
    />
  );
}
