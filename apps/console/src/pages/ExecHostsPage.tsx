import { useEffect, useMemo, useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { drainExecHost, EXEC_HOSTS_REFRESH_SECONDS, execHostsQuery, undrainExecHost } from '../api/queries/exec-hosts';
import { usersQuery } from '../api/queries/users';
import { canDo, canOpen } from '../auth/access';
import { useAuth } from '../auth/AuthContext';
import { fromQuery } from '../components/Query';
import { actorName, drainConsequence } from '../exec-hosts/view-model';
import { ExecHostsPageView } from './ExecHostsPageView';

export function ExecHostsPage() {
  const { me } = useAuth();
  const qc = useQueryClient();
  const hosts = useQuery(execHostsQuery());
  // Who drained a host is a user id; an administrator can read the names.
  const users = useQuery({ ...usersQuery(), enabled: canOpen(me.user.role, 'users') });
  const [notice, setNotice] = useState<string | null>(null);
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const names = useMemo(() => new Map((users.data ?? []).map((u) => [u.id, u.displayName])), [users.data]);
  const refresh = () => qc.invalidateQueries({ queryKey: ['exec-hosts'] });

  const drain = useMutation({
    mutationFn: ({ hostId, reason }: { hostId: string; reason: string | undefined }) => drainExecHost(hostId, reason),
    onSuccess: async (h) => {
      setNotice(`Drained. ${drainConsequence(h)}`);
      await refresh();
    },
  });
  const undrain = useMutation({
    mutationFn: undrainExecHost,
    onSuccess: async (h) => {
      setNotice(h.state === 'lost' ? `${h.id} is no longer drained; it is lost, and sessions are placed on it once it heartbeats again.` : `Sessions may be placed on ${h.id} again.`);
      await refresh();
    },
  });
  const busyId = drain.isPending ? drain.variables.hostId : undrain.isPending ? undrain.variables : null;

  return (
    <ExecHostsPageView
      hosts={fromQuery(hosts)}
      canDrain={canDo(me.user.role, 'drainExecHost')}
      onDrain={(hostId, reason) => {
        setNotice(null);
        undrain.reset();
        drain.mutate({ hostId, reason });
      }}
      onUndrain={(hostId) => {
        setNotice(null);
        drain.reset();
        undrain.mutate(hostId);
      }}
      busyId={busyId}
      actionError={drain.error ?? undrain.error}
      notice={notice}
      nameOf={(actor) => actorName(actor, names, me.user.id)}
      now={now}
      refreshSeconds={EXEC_HOSTS_REFRESH_SECONDS}
    />
  );
}
