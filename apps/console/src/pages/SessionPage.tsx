import { useCallback, useState } from 'react';
import { useParams } from 'react-router';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { TERMINAL_EVENT_TYPES, type GatewayEvent } from '@lemniscate/contracts';
import { saveBlob } from '../api/download';
import { useLiveEvents } from '../api/events';
import { revokeSession, sessionQuery, stopSession } from '../api/queries/sessions';
import { canDo } from '../auth/access';
import { useAuth } from '../auth/AuthContext';
import { fromQuery } from '../components/Query';
import { SessionPageView } from './SessionPageView';

export function SessionPage() {
  const { id = '' } = useParams();
  const { me } = useAuth();
  const qc = useQueryClient();
  const session = useQuery(sessionQuery(id));
  const [events, setEvents] = useState<GatewayEvent[]>([]);
  const [notice, setNotice] = useState<string | null>(null);

  const onEvent = useCallback(
    (e: GatewayEvent) => {
      setEvents((prev) => (prev.some((p) => p.seq === e.seq) ? prev : [...prev, e].sort((a, b) => a.seq - b.seq)));
      if ((TERMINAL_EVENT_TYPES as readonly string[]).includes(e.type)) void qc.invalidateQueries({ queryKey: ['sessions', id] });
    },
    [qc, id],
  );
  const live = useLiveEvents(id ? [{ sessionId: id }] : [], onEvent, { replay: true });

  const act = useMutation({
    mutationFn: ({ kind, reason }: { kind: 'stop' | 'revoke'; reason?: string }) => (kind === 'stop' ? stopSession(id, reason) : revokeSession(id, reason || undefined)),
    onSuccess: (res, { kind }) => {
      qc.setQueryData(sessionQuery(id).queryKey, res.session);
      const rejected = res.approvalsRejected ? ` ${res.approvalsRejected} pending approvals were rejected.` : '';
      setNotice(`${kind === 'stop' ? 'Stopped' : 'Revoked'}.${rejected}${res.sandboxNote ? ` ${res.sandboxNote}` : ''}`);
    },
  });

  const s = session.data;
  const mine = s?.userId === me.user.id;
  return (
    <SessionPageView
      session={fromQuery(session)}
      events={events}
      live={live.connected}
      canStop={canDo(me.user.role, 'stopSession') && (mine || me.user.role === 'admin')}
      canRevoke={canDo(me.user.role, 'revokeSession')}
      onStop={() => act.mutate({ kind: 'stop' })}
      onRevoke={(reason) => act.mutate({ kind: 'revoke', reason })}
      // The approved patch is part of the session record: saved as it is, for `git apply`.
      onDownloadPatch={() => s?.finalPatch && saveBlob(new Blob([s.finalPatch], { type: 'text/x-diff' }), `lemniscate-${id}.patch`)}
      busy={act.isPending ? (act.variables?.kind ?? null) : null}
      actionError={act.error}
      notice={notice}
    />
  );
}
