import { queryOptions } from '@tanstack/react-query';
import { type AnswerApprovalRequest, type ApprovalState, GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';

export const approvalsQuery = (filter: { state?: ApprovalState; sessionId?: string } = { state: 'pending' }) =>
  queryOptions({
    queryKey: ['approvals', filter],
    queryFn: ({ signal }) => api.call(R.listApprovals, { signal, query: filter }),
  });

export type ApprovalAnswer = 'approve' | 'reject';

/** What goes with a verdict: "do not ask again" for a command, the answer in words for a question. */
export interface AnswerOptions {
  rememberCommand: boolean;
  /** Only when answering (approving) a question; the gateway refuses it anywhere else. */
  response?: string;
  /** Why a request was rejected: told to the agent and recorded in the audit log. */
  reason?: string;
}

/**
 * Approves or rejects a request. A question is answered with `response` alone; a rejection never
 * carries text, since rejecting a question declines it and the gateway refuses an answer with that.
 */
export const answerApproval = (id: string, answer: ApprovalAnswer, { rememberCommand, response, reason }: AnswerOptions) => {
  const why = answer === 'reject' && reason !== undefined && reason.trim() !== '' ? { reason: reason.trim() } : {};
  const body: Partial<AnswerApprovalRequest> = answer === 'approve' && response !== undefined ? { response } : { rememberCommand: answer === 'approve' && rememberCommand, ...why };
  return api.call(answer === 'approve' ? R.approve : R.reject, { params: { id }, body });
};

/** Unchanged lines of a file around a change's hunks, read from the session's sandbox (old numbering). */
export const approvalContext = (id: string, path: string, from: number, to: number) => api.call(R.approvalContext, { params: { id }, query: { path, from, to } });
