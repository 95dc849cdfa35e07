import { queryOptions } from '@tanstack/react-query';
import { type PublishPolicyRequest, type RollbackPolicyRequest, GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';
import { type DryRunRequest } from '../console-contracts';

export const policyVersionsQuery = (projectId: string) =>
  queryOptions({
    queryKey: ['projects', projectId, 'policy', 'versions'],
    queryFn: ({ signal }) => api.call(R.policyVersions, { params: { projectId }, signal }),
  });

export const policyVersionQuery = (projectId: string, version: number) =>
  queryOptions({
    queryKey: ['projects', projectId, 'policy', 'versions', version],
    queryFn: ({ signal }) => api.call(R.policyVersion, { params: { projectId, version }, signal }),
    staleTime: Infinity, // a published version never changes
  });

export const policyDiffQuery = (projectId: string, from: number, to: number) =>
  queryOptions({
    queryKey: ['projects', projectId, 'policy', 'diff', from, to],
    queryFn: ({ signal }) => api.call(R.policyDiff, { params: { projectId }, signal, query: { from, to } }),
    staleTime: Infinity,
  });

export const publishPolicy = (projectId: string, body: PublishPolicyRequest) => api.call(R.publishPolicy, { params: { projectId }, body });

export const rollbackPolicy = (projectId: string, body: RollbackPolicyRequest) => api.call(R.policyRollback, { params: { projectId }, body });

export const dryRunPolicy = (projectId: string, body: DryRunRequest) => api.call(R.policyDryRun, { params: { projectId }, body });
