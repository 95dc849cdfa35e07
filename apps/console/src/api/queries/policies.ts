import { queryOptions } from '@tanstack/react-query';
import { z } from 'zod';
import { PolicyDiffResponse, PolicyVersionSummary, PolicyVersionView, type PublishPolicyRequest, type RollbackPolicyRequest } from '@lemniscate/contracts';
import { api } from '../client';
import { routes } from '../routes';
import { DryRunResponse, type DryRunRequest } from '../console-contracts';

export const policyVersionsQuery = (projectId: string) =>
  queryOptions({
    queryKey: ['projects', projectId, 'policy', 'versions'],
    queryFn: ({ signal }) => api.json(z.array(PolicyVersionSummary), routes.policyVersions(projectId), { signal }),
  });

export const policyVersionQuery = (projectId: string, version: number) =>
  queryOptions({
    queryKey: ['projects', projectId, 'policy', 'versions', version],
    queryFn: ({ signal }) => api.json(PolicyVersionView, routes.policyVersion(projectId, version), { signal }),
    staleTime: Infinity, // a published version never changes
  });

export const policyDiffQuery = (projectId: string, from: number, to: number) =>
  queryOptions({
    queryKey: ['projects', projectId, 'policy', 'diff', from, to],
    queryFn: ({ signal }) => api.json(PolicyDiffResponse, routes.policyDiff(projectId), { signal, query: { from, to } }),
    staleTime: Infinity,
  });

export const publishPolicy = (projectId: string, body: PublishPolicyRequest) =>
  api.json(PolicyVersionView, routes.policyPublish(projectId), { method: 'POST', body });

export const rollbackPolicy = (projectId: string, body: RollbackPolicyRequest) =>
  api.json(PolicyVersionView, routes.policyRollback(projectId), { method: 'POST', body });

export const dryRunPolicy = (projectId: string, body: DryRunRequest) =>
  api.json(DryRunResponse, routes.policyDryRun(projectId), { method: 'POST', body });
