import { useState } from 'react';
import type { ProjectView } from '@lemniscate/contracts';
import type { AuditEntry, AuditQuery, AuditVerification } from '../api/console-contracts';
import { DataTable, When, type Column } from '../components/DataTable';
import { Query, type QueryState } from '../components/Query';
import { Empty, InlineError } from '../components/States';

interface AuditPageViewProps {
  projects: ProjectView[];
  filter: AuditQuery;
  onFilter: (filter: AuditQuery) => void;
  entries: QueryState<AuditEntry[]>;
  verification: QueryState<AuditVerification>;
  onVerify: () => void;
  onExport: (format: 'jsonl' | 'csv') => void;
  exporting: 'jsonl' | 'csv' | null;
  exportError: unknown;
  /** When the browser last received the verification. */
  verifiedAt: string | null;
  /** The kinds of entry the gateway records (GET /audit/kinds): the only values its filter accepts. */
  kinds: readonly string[];
}

const COLUMNS: Column<AuditEntry>[] = [
  { header: '#', num: true, cell: (e) => e.seq },
  { header: 'When', cell: (e) => <When at={e.at} /> },
  {
    header: 'Who',
    cell: (e) =>
      e.actorIdentity ? (
        <span title={e.actor}>
          {e.actorIdentity.displayName} <span className="muted">{e.actorIdentity.email}</span>
        </span>
      ) : (
        e.actor
      ),
  },
  { header: 'Kind', cell: (e) => <span className="badge">{e.kind}</span> },
  { header: 'Session', cell: (e) => (e.sessionId ? <code>{e.sessionId}</code> : '—') },
  { header: 'Details', className: 'truncate', cell: (e) => <code title={JSON.stringify(e.payload)}>{JSON.stringify(e.payload)}</code> },
];

/** `datetime-local` shows and returns local time without a zone; the filter travels as UTC. */
function toLocalInput(iso?: string): string {
  if (!iso) return '';
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

export function AuditPageView({ projects, filter, onFilter, entries, verification, onVerify, onExport, exporting, exportError, verifiedAt, kinds }: AuditPageViewProps) {
  const [draft, setDraft] = useState<AuditQuery>(filter);
  const set = (k: keyof AuditQuery, v: string) => setDraft({ ...draft, [k]: v || undefined });
  return (
    <div className="page">
      <div className="page-header">
        <h1>Audit log</h1>
        <div className="actions">
          <button type="button" onClick={() => onExport('jsonl')} disabled={exporting !== null}>
            {exporting === 'jsonl' ? 'Exporting…' : 'Export JSONL'}
          </button>
          <button type="button" onClick={() => onExport('csv')} disabled={exporting !== null}>
            {exporting === 'csv' ? 'Exporting…' : 'Export CSV'}
          </button>
        </div>
      </div>
      <InlineError error={exportError} />
      <VerificationBanner state={verification} onVerify={onVerify} verifiedAt={verifiedAt} />
      <form
        className="card filters"
        aria-label="Filters"
        onSubmit={(e) => {
          e.preventDefault();
          onFilter(draft);
        }}
      >
        <div className="field">
          <label htmlFor="af-project">Project</label>
          <select id="af-project" value={draft.projectId ?? ''} onChange={(e) => set('projectId', e.target.value)}>
            <option value="">All projects</option>
            {projects.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="af-actor">Actor</label>
          <input id="af-actor" placeholder="an email, or user:…" value={draft.actor ?? ''} onChange={(e) => set('actor', e.target.value.trim())} />
        </div>
        <div className="field">
          <label htmlFor="af-session">Session id</label>
          <input id="af-session" value={draft.sessionId ?? ''} onChange={(e) => set('sessionId', e.target.value.trim())} />
        </div>
        <div className="field">
          <label htmlFor="af-kind">Kind</label>
          <select id="af-kind" value={draft.kind ?? ''} onChange={(e) => set('kind', e.target.value)}>
            <option value="">Any kind</option>
            {kinds.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="af-from">From</label>
          <input id="af-from" type="datetime-local" value={toLocalInput(draft.from)} onChange={(e) => set('from', e.target.value ? new Date(e.target.value).toISOString() : '')} />
        </div>
        <div className="field">
          <label htmlFor="af-to">To</label>
          <input id="af-to" type="datetime-local" value={toLocalInput(draft.to)} onChange={(e) => set('to', e.target.value ? new Date(e.target.value).toISOString() : '')} />
        </div>
        <div className="filter-actions">
          <button type="submit" className="primary">
            Apply filters
          </button>
          <button
            type="button"
            className="ghost"
            onClick={() => {
              setDraft({});
              onFilter({});
            }}
          >
            Clear
          </button>
        </div>
      </form>
      <Query state={entries} what="the audit log">
        {(list) =>
          list.length === 0 ? (
            <Empty>No entry matches these filters.</Empty>
          ) : (
            <div className="card flush">
              <DataTable caption="Audit entries, newest first" className="audit" columns={COLUMNS} rows={list} rowKey={(e) => e.seq} />
            </div>
          )
        }
      </Query>
    </div>
  );
}

function VerificationBanner({ state, onVerify, verifiedAt }: { state: QueryState<AuditVerification>; onVerify: () => void; verifiedAt: string | null }) {
  if (state.status === 'loading')
    return (
      <div className="verify pending" role="status">
        Verifying the hash chain…
      </div>
    );
  if (state.status === 'error')
    return (
      <div className="verify bad" role="alert">
        <InlineError error={state.error} />
        <button type="button" onClick={() => onVerify()}>
          Verify again
        </button>
      </div>
    );
  const v = state.data;
  return (
    <div className={`verify ${v.ok ? 'good' : 'bad'}`} role={v.ok ? 'status' : 'alert'}>
      <span className="verify-icon" aria-hidden="true">
        {v.ok ? '✓' : '✗'}
      </span>
      <div>
        {v.ok ? (
          <strong>Chain verified: {v.checked} entries, none altered, removed or reordered.</strong>
        ) : (
          <strong>
            The chain is broken at entry #{v.seq} ({v.problem}): {v.message}
          </strong>
        )}
        {verifiedAt && <div className="muted small">Checked {new Date(verifiedAt).toLocaleString()}</div>}
      </div>
      <button type="button" className="ghost" onClick={() => onVerify()}>
        Verify again
      </button>
    </div>
  );
}
