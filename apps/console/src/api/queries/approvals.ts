import { queryOptions } from '@tanstack/react-query';
import { z } from 'zod';
import { ApprovalView, type AnswerApprovalRequest, type ApprovalState } from '@lemniscate/contracts';
import { api } from '../client';
import { routes } from '../routes';

export const approvalsQuery = (filter: { state?: ApprovalState; sessionId?: string } = { state: 'pending' }) =>
  queryOptions({
    queryKey: ['approvals', filter],
    queryFn: ({ signal }) => api.json(z.array(ApprovalView), routes.approvals, { signal, query: filter }),
  });

export type ApprovalAnswer = 'approve' | 'reject';

export const answerApproval = (id: string, answer: ApprovalAnswer, body: Partial<AnswerApprovalRequest> = {}) =>
  api.json(ApprovalView, answer === 'approve' ? routes.approve(id) : routes.reject(id), { method: 'POST', body });
