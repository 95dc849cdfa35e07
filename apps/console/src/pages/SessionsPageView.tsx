import { useEffect, useState, type ReactNode } from 'react';
import { SESSION_MODE_LABELS, type ProjectView, type SessionListItem, type SessionStatus, type SessionView } from '@lemniscate/contracts';
import { Query, type QueryState } from '../components/Query';
import { DataTable, When, type Column } from '../components/DataTable';
import { InlineSelect, LiveStatus } from '../components/PageHeader';
import { Empty } from '../components/States';

/** The list's filters, as the page's address carries them (the dashboard links to them). */
export interface SessionsFilter {
  projectId?: string;
  status?: SessionStatus;
  userId?: string;
  waiting?: boolean;
  /** Started at or after / before these instants (ISO). */
  from?: string;
  to?: string;
}

interface SessionsPageViewProps {
  sessions: QueryState<SessionListItem[]>;
  filter: SessionsFilter;
  onFilter: (filter: SessionsFilter) => void;
  projects: readonly ProjectView[];
  /** The signed-in person: "Mine" filters on them. */
  me: { id: string; email: string };
  /** False for developers, who only ever see their own sessions. */
  seesOthers: boolean;
  live: boolean;
  renderSessionLink: (id: string, children: ReactNode) => ReactNode;
  /** The current time, for the duration of running sessions. */
  now?: number;
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

/** "45 s", "12 min", "2 h 5 min", "3 d 4 h": the two largest units that matter. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

function Duration({ session, now }: { session: SessionView; now: number }) {
  const end = session.endedAt ? Date.parse(session.endedAt) : now;
  const text = formatDuration(end - Date.parse(session.startedAt));
  return session.endedAt ? <>{text}</> : <span title="Still running">{text} so far</span>;
}

function describeFilter(filter: SessionsFilter, projects: readonly ProjectView[], ownerEmail: string | undefined): string | null {
  const parts: string[] = [];
  if (filter.from || filter.to) {
    const day = (iso: string) => new Date(iso).toLocaleDateString();
    if (filter.from && filter.to && Date.parse(filter.to) - Date.parse(filter.from) === 86_400_000) parts.push(`started on ${day(filter.from)}`);
    else {
      if (filter.from) parts.push(`started from ${new Date(filter.from).toLocaleString()}`);
      if (filter.to) parts.push(`started before ${new Date(filter.to).toLocaleString()}`);
    }
  }
  if (filter.userId) parts.push(`by ${ownerEmail ?? 'one person'}`);
  if (filter.projectId) parts.push(`in ${projects.find((p) => p.id === filter.projectId)?.name ?? 'one project'}`);
  return parts.length ? `Showing sessions ${parts.join(', ')}.` : null;
}

export function SessionsPageView({ sessions, filter, onFilter, projects, me, seesOthers, live, renderSessionLink, now = Date.now() }: SessionsPageViewProps) {
  const ownerEmail = filter.userId === me.id ? me.email : sessions.status === 'ready' ? (sessions.data.find((s) => s.userId === filter.userId)?.ownerEmail ?? undefined) : undefined;
  const ownerOptions: [string, string][] = [
    ['', 'Anyone'],
    [me.id, 'Me'],
  ];
  if (filter.userId && filter.userId !== me.id) ownerOptions.push([filter.userId, ownerEmail ?? 'The chosen person']);
  const columns: Column<SessionListItem>[] = [
    { header: 'Instruction', className: 'truncate', cell: (s) => renderSessionLink(s.id, s.instruction) },
    { header: 'Project', cell: (s) => projects.find((p) => p.id === s.projectId)?.name ?? <code>{s.projectId}</code> },
    ...(seesOthers ? [{ header: 'Owner', className: 'truncate', cell: (s: SessionListItem) => s.ownerEmail ?? <span className="muted">a removed account</span> }] : []),
    {
      header: 'Status',
      cell: (s) => (
        <span className="status-cell">
          <StatusBadge status={s.status} stopReason={s.stopReason} />
          {s.pendingApprovals > 0 && <span className="badge waiting">{s.pendingApprovals === 1 ? 'waiting for a person' : `${s.pendingApprovals} answers awaited`}</span>}
        </span>
      ),
    },
    { header: 'Mode', cell: (s) => SESSION_MODE_LABELS[s.mode] },
    { header: 'Actions', num: true, cell: (s) => s.actionsUsed },
    { header: 'Started', cell: (s) => <When at={s.startedAt} /> },
    { header: 'Duration', cell: (s) => <Duration session={s} now={now} /> },
  ];
  // The box shows a click at once: the address changes in a transition, and until it commits a box
  // bound to the address alone would show its old state (and a click could look lost).
  const [waiting, setWaiting] = useState(filter.waiting === true);
  useEffect(() => setWaiting(filter.waiting === true), [filter.waiting]);
  const described = describeFilter(filter, projects, ownerEmail);
  const filtered = Object.values(filter).some((v) => v !== undefined && v !== false);
  return (
    <div className="page full-width">
      <div className="page-header">
        <h1>Sessions</h1>
        <LiveStatus live={live} on="Live" off="Not live" />
      </div>
      <div className="card filter-bar" role="group" aria-label="Filters">
        <InlineSelect id="status-filter" label="Status" value={filter.status ?? ''} options={STATUS_OPTIONS} onChange={(status) => onFilter({ ...filter, status: status || undefined })} />
        <InlineSelect
          id="project-filter"
          label="Project"
          value={filter.projectId ?? ''}
          options={[['', 'All projects'], ...projects.map((p): [string, string] => [p.id, p.name])]}
          onChange={(projectId) => onFilter({ ...filter, projectId: projectId || undefined })}
        />
        {seesOthers && <InlineSelect id="owner-filter" label="Owner" value={filter.userId ?? ''} options={ownerOptions} onChange={(userId) => onFilter({ ...filter, userId: userId || undefined })} />}
        <div className="field inline checkbox">
          <input
            id="waiting-filter"
            type="checkbox"
            checked={waiting}
            onChange={(e) => {
              setWaiting(e.target.checked);
              onFilter({ ...filter, waiting: e.target.checked || undefined });
            }}
          />
          <label htmlFor="waiting-filter">Waiting for a person</label>
        </div>
        {filtered && (
          <button type="button" className="ghost" onClick={() => onFilter({})}>
            Clear filters
          </button>
        )}
      </div>
      {described && (
        <p className="muted" role="status">
          {described}
        </p>
      )}
      <Query state={sessions} what="the sessions">
        {(list) =>
          list.length === 0 ? (
            filtered ? (
              <Empty>No session matches these filters.</Empty>
            ) : (
              <Empty>
                No session yet. Start one with <code>lemni -p "…"</code>.
              </Empty>
            )
          ) : (
            <div className="card flush scroll-x">
              <DataTable caption="Sessions" columns={columns} rows={list} rowKey={(s) => s.id} rowClassName={(s) => (s.pendingApprovals > 0 ? 'waiting' : undefined)} />
            </div>
          )
        }
      </Query>
    </div>
  );
}

/** The filter as the page's address writes it, and back: `?projectId=…&status=…&userId=…&waiting=1&from=…&to=…`. */
export function filterFromSearch(search: URLSearchParams): SessionsFilter {
  const status = search.get('status');
  const pick = (k: string) => search.get(k) || undefined;
  // A hand-edited address with a date that does not parse drops that bound rather than failing the list.
  const instant = (k: string) => {
    const v = search.get(k);
    return v && !Number.isNaN(Date.parse(v)) ? new Date(v).toISOString() : undefined;
  };
  return {
    projectId: pick('projectId'),
    status: STATUS_OPTIONS.some(([v]) => v && v === status) ? (status as SessionStatus) : undefined,
    userId: pick('userId'),
    waiting: search.get('waiting') === '1' || undefined,
    from: instant('from'),
    to: instant('to'),
  };
}

export function searchFromFilter(filter: SessionsFilter): URLSearchParams {
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(filter)) if (v !== undefined && v !== false) out.set(k, v === true ? '1' : String(v));
  return out;
}
