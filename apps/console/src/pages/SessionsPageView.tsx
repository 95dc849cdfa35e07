import type { ReactNode } from 'react';
import { SESSION_MODE_LABELS, type SessionStatus, type SessionView } from '@lemniscate/contracts';
import { Query, type QueryState } from '../components/Query';
import { DataTable, When, type Column } from '../components/DataTable';
import { InlineSelect, LiveStatus } from '../components/PageHeader';
import { Empty } from '../components/States';

interface SessionsPageViewProps {
  sessions: QueryState<SessionView[]>;
  status: SessionStatus | '';
  onStatusChange: (status: SessionStatus | '') => void;
  live: boolean;
  renderSessionLink: (id: string, children: ReactNode) => ReactNode;
}

export function StatusBadge({ status, stopReason }: Pick<SessionView, 'status' | 'stopReason'>) {
  return (
    <span className={`badge status-${status}`}>
      {status}
      {stopReason ? `: ${stopReason.replace(/_/g, ' ')}` : ''}
    </span>
  );
}

const STATUS_OPTIONS: [SessionStatus | '', string][] = [
  ['', 'All'],
  ['running', 'Running'],
  ['completed', 'Completed'],
  ['stopped', 'Stopped'],
  ['failed', 'Failed'],
];

const columns = (renderSessionLink: SessionsPageViewProps['renderSessionLink']): Column<SessionView>[] => [
  { header: 'Instruction', className: 'truncate', cell: (s) => renderSessionLink(s.id, s.instruction) },
  { header: 'Status', cell: (s) => <StatusBadge status={s.status} stopReason={s.stopReason} /> },
  { header: 'Mode', cell: (s) => SESSION_MODE_LABELS[s.mode] },
  { header: 'Agent', cell: (s) => s.agent },
  { header: 'Actions', num: true, cell: (s) => s.actionsUsed },
  { header: 'Started', cell: (s) => <When at={s.startedAt} /> },
];

export function SessionsPageView({ sessions, status, onStatusChange, live, renderSessionLink }: SessionsPageViewProps) {
  return (
    <div className="page">
      <div className="page-header">
        <h1>Sessions</h1>
        <LiveStatus live={live} on="Live" off="Not live" />
        <InlineSelect id="status-filter" label="Status" value={status} options={STATUS_OPTIONS} onChange={onStatusChange} />
      </div>
      <Query state={sessions} what="the sessions">
        {(list) =>
          list.length === 0 ? (
            <Empty>
              No session matches. Start one with <code>lemni -p "…"</code>.
            </Empty>
          ) : (
            <div className="card flush">
              <DataTable caption="Sessions" columns={columns(renderSessionLink)} rows={list} rowKey={(s) => s.id} />
            </div>
          )
        }
      </Query>
    </div>
  );
}
