import { useState } from 'react';
import { useMutation, useQuery } from '@tanstack/react-query';
import type { AuditQuery } from '../api/console-contracts';
import { saveBlob } from '../api/download';
import { projectsQuery } from '../api/queries/projects';
import { auditKindsQuery, auditQuery, auditVerificationQuery, exportAudit } from '../api/queries/audit';
import { fromQuery } from '../components/Query';
import { AuditPageView } from './AuditPageView';

export function AuditPage() {
  const [filter, setFilter] = useState<AuditQuery>({});
  const projects = useQuery(projectsQuery());
  const entries = useQuery(auditQuery({ ...filter, limit: 200 }));
  const verification = useQuery(auditVerificationQuery());
  const kinds = useQuery(auditKindsQuery());
  const exp = useMutation({
    mutationFn: (format: 'jsonl' | 'csv') => exportAudit(format, filter),
    onSuccess: ({ blob, filename }, format) => saveBlob(blob, filename ?? `lemniscate-audit.${format}`),
  });
  return (
    <AuditPageView
      projects={projects.data ?? []}
      filter={filter}
      onFilter={setFilter}
      entries={fromQuery(entries)}
      verification={verification.isFetching && !verification.data ? { status: 'loading' } : fromQuery(verification)}
      onVerify={() => void verification.refetch()}
      onExport={(f) => exp.mutate(f)}
      exporting={exp.isPending ? (exp.variables ?? null) : null}
      verifiedAt={verification.dataUpdatedAt ? new Date(verification.dataUpdatedAt).toISOString() : null}
      exportError={exp.error}
      kinds={kinds.data?.kinds ?? []}
    />
  );
}
