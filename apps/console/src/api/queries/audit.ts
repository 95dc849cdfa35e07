import { queryOptions } from '@tanstack/react-query';
import { z } from 'zod';
import { api } from '../client';
import { routes } from '../routes';
import { AuditEntry, AuditVerification, type AuditQuery } from '../console-contracts';

export const auditQuery = (filter: AuditQuery) =>
  queryOptions({
    queryKey: ['audit', filter],
    queryFn: ({ signal }) => api.json(z.array(AuditEntry), routes.audit, { signal, query: filter }),
  });

export const auditVerificationQuery = () =>
  queryOptions({
    queryKey: ['audit', 'verify'],
    queryFn: ({ signal }) => api.json(AuditVerification, routes.auditVerify, { signal }),
  });

export const exportAudit = (format: 'jsonl' | 'csv', filter: AuditQuery) => api.blob(routes.auditExport, { query: { ...filter, format } });
