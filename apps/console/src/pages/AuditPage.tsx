import { useState } from 'react';
import { useMutation, useQuery } from '@tanstack/react-query';
import type { AuditQuery } from '../api/console-contracts';
import { saveBlob } from '../api/download';
import { projectsQuery } from '../api/queries/projects';
import { auditCountQuery, auditKindsQuery, auditQuery, auditSinksQuery, auditVerificationQuery, exportAudit } from '../api/queries/audit';
import { useAuth } from '../auth/AuthContext';
import { fromQuery, type QueryState } from '../components/Query';
import { AuditPageView } from './AuditPageView';
import type { AuditEntry } from '../api/console-contracts';

const PAGE_SIZE = 50;

export function AuditPage() {
  const [filter, setFilter] = useState<AuditQuery>({});
  // Keyset paging: the seq each page starts after, newest page first (undefined: the newest entries).
  const [cursors, setCursors] = useState<(number | undefined)[]>([undefined]);
  const after = cursors[cursors.length - 1];
  const projects = useQuery(projectsQuery());
  // One entry more than shown says whether an older page exists.
  const entries = useQuery(auditQuery({ ...filter, limit: PAGE_SIZE + 1, after }));
  const count = useQuery(auditCountQuery(filter));
  const verification = useQuery(auditVerificationQuery());
  const kinds = useQuery(auditKindsQuery());
  const { me } = useAuth();
  // Deployment-wide (every project's activity moves its counts): administrators only.
  const sinks = useQuery({ ...auditSinksQuery(), enabled: me?.user.role === 'admin' });
  const exp = useMutation({
    mutationFn: (format: 'jsonl' | 'csv') => exportAudit(format, filter),
    onSuccess: ({ blob, filename }, format) => saveBlob(blob, filename ?? `lemniscate-audit.${format}`),
  });
  const page: QueryState<AuditEntry[]> = entries.data ? { status: 'ready', data: entries.data.slice(0, PAGE_SIZE) } : fromQuery(entries);
  const shown = entries.data?.slice(0, PAGE_SIZE) ?? [];
  return (
    <AuditPageView
      projects={projects.data ?? []}
      filter={filter}
      onFilter={(next) => {
        setFilter(next);
        setCursors([undefined]);
      }}
      entries={page}
      total={count.data?.count ?? null}
      paging={{ offset: (cursors.length - 1) * PAGE_SIZE, pageSize: PAGE_SIZE, newer: cursors.length > 1, older: (entries.data?.length ?? 0) > PAGE_SIZE }}
      onOlder={() => {
        const last = shown[shown.length - 1];
        if (last) setCursors([...cursors, last.seq]);
      }}
      onNewer={() => setCursors(cursors.slice(0, -1))}
      onNewest={() => setCursors([undefined])}
      verification={verification.isFetching && !verification.data ? { status: 'loading' } : fromQuery(verification)}
      onVerify={() => void verification.refetch()}
      onExport={(f) => exp.mutate(f)}
      exporting={exp.isPending ? (exp.variables ?? null) : null}
      verifiedAt={verification.dataUpdatedAt ? new Date(verification.dataUpdatedAt).toISOString() : null}
      exportError={exp.error}
      kinds={kinds.data?.kinds ?? []}
      sinks={sinks.data ?? null}
    />
  );
}
