import { queryOptions } from '@tanstack/react-query';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';
import { routes } from '../routes';
import { type AuditQuery } from '../console-contracts';

export const auditQuery = (filter: AuditQuery & { after?: number }) =>
  queryOptions({
    queryKey: ['audit', 'list', filter],
    queryFn: ({ signal }) => api.call(R.listAudit, { signal, query: filter }),
  });

export const auditCountQuery = ({ limit: _limit, ...filter }: AuditQuery) =>
  queryOptions({
    queryKey: ['audit', 'count', filter],
    queryFn: ({ signal }) => api.call(R.auditCount, { signal, query: filter }),
  });

/** The server owns the list of kinds; it changes only with the gateway, so it is fetched once. */
export const auditKindsQuery = () =>
  queryOptions({
    queryKey: ['audit', 'kinds'],
    queryFn: ({ signal }) => api.call(R.auditKinds, { signal }),
    staleTime: Infinity,
  });

export const auditVerificationQuery = () =>
  queryOptions({
    queryKey: ['audit', 'verify'],
    queryFn: ({ signal }) => api.call(R.auditVerify, { signal }),
  });

/** Where the audit log is streamed; refreshed while the page is open, so a failing sink shows within seconds. */
export const auditSinksQuery = () =>
  queryOptions({
    queryKey: ['audit', 'sinks'],
    queryFn: ({ signal }) => api.call(R.auditSinks, { signal }),
    refetchInterval: 5_000,
  });

export const exportAudit = (format: 'jsonl' | 'csv', filter: AuditQuery) => api.blob(routes.auditExport, { query: { ...filter, format } });
