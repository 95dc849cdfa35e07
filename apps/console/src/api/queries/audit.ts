import { queryOptions } from '@tanstack/react-query';
import { AuditKindsView } from '@lemniscate/contracts';
import { z } from 'zod';
import { api } from '../client';
import { routes } from '../routes';
import { AuditEntry, AuditVerification, type AuditQuery } from '../console-contracts';

export const auditQuery = (filter: AuditQuery) =>
  queryOptions({
    queryKey: ['audit', filter],
    queryFn: ({ signal }) => api.json(z.array(AuditEntry), routes.audit, { signal, query: filter }),
  });

/** The server owns the list of kinds; it changes only with the gateway, so it is fetched once. */
export const auditKindsQuery = () =>
  queryOptions({
    queryKey: ['audit', 'kinds'],
    queryFn: ({ signal }) => api.json(AuditKindsView, routes.auditKinds, { signal }),
    staleTime: Infinity,
  });

export const auditVerificationQuery = () =>
  queryOptions({
    queryKey: ['audit', 'verify'],
    queryFn: ({ signal }) => api.json(AuditVerification, routes.auditVerify, { signal }),
  });

export const exportAudit = (format: 'jsonl' | 'csv', filter: AuditQuery) => api.blob(routes.auditExport, { query: { ...filter, format } });
