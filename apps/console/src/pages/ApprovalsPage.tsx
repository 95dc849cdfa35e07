import { useCallback, useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useLiveEvents } from '../api/events';
import { answerApproval, approvalContext, approvalsQuery, type AnswerOptions, type ApprovalAnswer } from '../api/queries/approvals';
import { useAuth } from '../auth/AuthContext';
import { fromQuery } from '../components/Query';
import { ApprovalsPageView } from './ApprovalsPageView';

export function ApprovalsPage() {
  const { me } = useAuth();
  const qc = useQueryClient();
  const query = approvalsQuery({ state: 'pending' });
  const approvals = useQuery(query);
  const [selectedId, setSelectedId] = useState<string | null>(null);

  const answer = useMutation({
    mutationFn: ({ id, verdict, ...opts }: { id: string; verdict: ApprovalAnswer } & AnswerOptions) => answerApproval(id, verdict, opts),
    onSuccess: (_res, { id }) => {
      // Move on to the next request, as a reviewer working through the inbox expects.
      const list = approvals.data?.filter((a) => a.state === 'pending') ?? [];
      const i = list.findIndex((a) => a.id === id);
      setSelectedId(list[i + 1]?.id ?? list[i - 1]?.id ?? null);
      return qc.invalidateQueries({ queryKey: ['approvals'] });
    },
  });

  const onEvent = useCallback(
    (e: { type: string }) => {
      if (e.type === 'approval_requested' || e.type === 'approval_answered' || e.type.startsWith('session_')) void qc.invalidateQueries({ queryKey: ['approvals'] });
    },
    [qc],
  );
  const refetch = useCallback(() => void qc.invalidateQueries({ queryKey: ['approvals'] }), [qc]);
  const live = useLiveEvents(
    me.user.projectIds.map((projectId) => ({ projectId })),
    onEvent,
    { onSubscribed: refetch },
  );

  // A refusal belongs to the request it answered, not to the next one opened.
  const { reset, isPending } = answer;
  const onSelect = useCallback(
    (id: string) => {
      setSelectedId(id);
      if (!isPending) reset();
    },
    [reset, isPending],
  );
  const onAnswer = useCallback((id: string, verdict: ApprovalAnswer, opts: AnswerOptions) => answer.mutate({ id, verdict, ...opts }), [answer]);

  return (
    <ApprovalsPageView
      approvals={fromQuery(approvals)}
      selectedId={selectedId}
      onSelect={onSelect}
      onAnswer={onAnswer}
      busyId={answer.isPending ? (answer.variables?.id ?? null) : null}
      answerError={answer.error}
      answerErrorId={answer.variables?.id ?? null}
      live={live.connected}
      loadContext={approvalContext}
    />
  );
}
