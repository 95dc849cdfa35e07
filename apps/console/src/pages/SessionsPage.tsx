import { useCallback, useState } from 'react';
import { Link } from 'react-router';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import type { SessionStatus } from '@lemniscate/contracts';
import { useLiveEvents } from '../api/events';
import { sessionsQuery } from '../api/queries/sessions';
import { useAuth } from '../auth/AuthContext';
import { fromQuery } from '../components/Query';
import { SessionsPageView } from './SessionsPageView';

export function SessionsPage() {
  const { me } = useAuth();
  const qc = useQueryClient();
  const [status, setStatus] = useState<SessionStatus | ''>('');
  const sessions = useQuery(sessionsQuery(status ? { status } : {}));
  const onEvent = useCallback(
    (e: { type: string }) => {
      if (e.type.startsWith('session_')) void qc.invalidateQueries({ queryKey: ['sessions'] });
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
      status={status}
      onStatusChange={setStatus}
      live={live.connected}
      renderSessionLink={(id, children) => <Link to={`/sessions/${encodeURIComponent(id)}`}>{children}</Link>}
    />
  );
}
