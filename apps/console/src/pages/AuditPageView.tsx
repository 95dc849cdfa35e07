import { useState } from 'react';
import type { AuditSinksView, ProjectView } from '@lemniscate/contracts';
import type { AuditEntry, AuditQuery, AuditVerification } from '../api/console-contracts';
import { When } from '../components/DataTable';
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
  /** How many entries the filter matches (GET /audit/count); null while unknown. */
  total: number | null;
  /** Where this page is: its first entry's position (0 for the newest) and whether more lie either side. */
  paging: { offset: number; pageSize: number; newer: boolean; older: boolean };
  onOlder: () => void;
  onNewer: () => void;
  onNewest: () => void;
  /** Where the log is streamed (GET /audit/sinks); null while unknown. */
  sinks: AuditSinksView | null;
}

/** The payload's telling fields in one line; the whole payload is in the row's details. */
export function summarise(payload: unknown): string {
  if (payload === null || typeof payload !== 'object') return payload === undefined ? '' : JSON.stringify(payload);
  const p = payload as Record<string, unknown>;
  const first = ['command', 'path', 'text', 'tool', 'effect', 'rule', 'answer', 'reason', 'status', 'message'];
  const picked = first.filter((k) => p[k] !== undefined && p[k] !== null && typeof p[k] !== 'object').map((k) => `${k}: ${String(p[k])}`);
  const rest = Object.keys(p).filter((k) => !first.includes(k));
  return [...picked, ...rest.map((k) => `${k}: ${typeof p[k] === 'object' ? JSON.stringify(p[k]) : String(p[k])}`)].join(' · ');
}

function Who({ entry }: { entry: AuditEntry }) {
  return entry.actorIdentity ? (
    <>
      {entry.actorIdentity.displayName} <span className="muted">{entry.actorIdentity.email}</span>
    </>
  ) : (
    <>{entry.actor}</>
  );
}

function AuditRow({ entry, projects }: { entry: AuditEntry; projects: ProjectView[] }) {
  const [open, setOpen] = useState(false);
  const detailsId = `audit-entry-${entry.seq}`;
  const project = entry.projectId ? (projects.find((p) => p.id === entry.projectId)?.name ?? entry.projectId) : null;
  return (
    <>
      <tr className={open ? 'expanded' : undefined}>
        <td className="num">{entry.seq}</td>
        <td>
          <When at={entry.at} />
        </td>
        <td>
          <Who entry={entry} />
        </td>
        <td>
          <span className="badge">{entry.kind}</span>
        </td>
        <td>{entry.sessionId ? <code>{entry.sessionId}</code> : '—'}</td>
        <td className="truncate">
          <code>{summarise(entry.payload)}</code>
        </td>
        <td className="row-actions">
          <button type="button" className="ghost small" aria-expanded={open} aria-controls={detailsId} onClick={() => setOpen(!open)}>
            <span aria-hidden="true">{open ? '▾ ' : '▸ '}</span>
            Details<span className="visually-hidden"> of entry {entry.seq}</span>
          </button>
        </td>
      </tr>
      {open && (
        <tr className="audit-details" id={detailsId}>
          <td colSpan={7}>
            <dl className="facts">
              <dt>Actor</dt>
              <dd>
                <code>{entry.actor}</code>
                {entry.actorIdentity && (
                  <>
                    {' '}
                    — <Who entry={entry} />
                  </>
                )}
              </dd>
              <dt>Project</dt>
              <dd>{project ?? 'none (an entry about people or the platform)'}</dd>
              <dt>Session</dt>
              <dd>{entry.sessionId ? <code>{entry.sessionId}</code> : 'none'}</dd>
              <dt>Hash</dt>
              <dd>
                <code className="hash">{entry.hash}</code>
              </dd>
              <dt>Previous hash</dt>
              <dd>
                <code className="hash">{entry.prevHash}</code>
              </dd>
            </dl>
            <pre className="payload" aria-label={`Payload of entry ${entry.seq}`}>
              {JSON.stringify(entry.payload, null, 2)}
            </pre>
          </td>
        </tr>
      )}
    </>
  );
}

/** `datetime-local` shows and returns local time without a zone; the filter travels as UTC. */
function toLocalInput(iso?: string): string {
  if (!iso) return '';
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

export function AuditPageView({
  projects,
  filter,
  onFilter,
  entries,
  verification,
  onVerify,
  onExport,
  exporting,
  exportError,
  verifiedAt,
  kinds,
  total,
  paging,
  onOlder,
  onNewer,
  onNewest,
  sinks,
}: AuditPageViewProps) {
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
      {sinks && <SinksPanel view={sinks} />}
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
          <label htmlFor="af-actor">Person or actor</label>
          <input id="af-actor" type="text" inputMode="email" placeholder="ana@example.org, policy, system…" value={draft.actor ?? ''} onChange={(e) => set('actor', e.target.value.trim())} />
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
            <Empty>{paging.offset > 0 ? 'No older entry matches these filters.' : 'No entry matches these filters.'}</Empty>
          ) : (
            <>
              <p className="muted audit-count" role="status">
                {pageLabel(paging.offset, list.length, total)}
              </p>
              <div className="card flush scroll-x">
                <table className="data audit">
                  <caption className="visually-hidden">Audit entries, newest first</caption>
                  <thead>
                    <tr>
                      <th scope="col" className="num">
                        #
                      </th>
                      <th scope="col">When</th>
                      <th scope="col">Who</th>
                      <th scope="col">Kind</th>
                      <th scope="col">Session</th>
                      <th scope="col">Details</th>
                      <th scope="col">
                        <span className="visually-hidden">Expand</span>
                      </th>
                    </tr>
                  </thead>
                  <tbody>
                    {list.map((e) => (
                      <AuditRow key={e.seq} entry={e} projects={projects} />
                    ))}
                  </tbody>
                </table>
              </div>
            </>
          )
        }
      </Query>
      <nav className="pager" aria-label="Audit pages">
        <button type="button" onClick={onNewest} disabled={!paging.newer}>
          Newest
        </button>
        <button type="button" onClick={onNewer} disabled={!paging.newer}>
          ← Newer
        </button>
        <button type="button" onClick={onOlder} disabled={!paging.older}>
          Older →
        </button>
      </nav>
    </div>
  );
}

/** "Entries 51–100 of 1,234", or without a total while it is counted. */
export function pageLabel(offset: number, shown: number, total: number | null): string {
  const range = `${(offset + 1).toLocaleString('en')}–${(offset + shown).toLocaleString('en')}`;
  if (total === 1 && shown === 1) return 'One entry matches';
  if (total === null || total < offset + shown) return `Entries ${range}`;
  return `Entries ${range} of ${total.toLocaleString('en')}`;
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

const SINK_STATE: Record<AuditSinksView['sinks'][number]['state'], string> = { up_to_date: 'up to date', behind: 'sending', failing: 'failing' };

function entries(n: number): string {
  return `${n.toLocaleString()} ${n === 1 ? 'entry' : 'entries'}`;
}

/** Where the log is streamed, and a warning while a sink cannot take entries (T2). */
export function SinksPanel({ view }: { view: AuditSinksView }) {
  if (!view.configured) return <p className="muted small sinks-none">The audit log is not streamed to any other system: this deployment names no audit sink (operator guide, “Audit sinks”).</p>;
  const failing = view.sinks.filter((s) => s.state === 'failing');
  return (
    <section className={`card sinks${failing.length > 0 ? ' failing' : ''}`} aria-labelledby="sinks-title">
      <h2 id="sinks-title">Audit sinks</h2>
      {failing.length > 0 && (
        <div className="notice warn" role="alert">
          {failing.map((s) => (
            <p key={s.name}>
              <strong>
                {s.name} cannot take entries{s.failingSince ? ` since ${new Date(s.failingSince).toLocaleString()}` : ''}
              </strong>
              : {entries(s.lag)} wait for it{s.lastError ? ` (${s.lastError})` : ''}. They are sent in order, none lost, as soon as it takes them again.
            </p>
          ))}
          {!view.recording && view.onUnrecorded === 'refuse' && (
            <p>No sink can record, and this deployment refuses new actions until one does: sign-ins, changes and tool calls are refused; reading is not.</p>
          )}
        </div>
      )}
      {/* Focusable: on a narrow screen the table scrolls sideways inside its card. */}
      <div className="table-scroll" tabIndex={0} role="group" aria-label="Each sink's state">
        <table className="data sinks-table">
          <thead>
            <tr>
              <th scope="col">Sink</th>
              <th scope="col">Sends to</th>
              <th scope="col">State</th>
              <th scope="col" className="num">
                Waiting
              </th>
              <th scope="col">Last sent</th>
            </tr>
          </thead>
          <tbody>
            {view.sinks.map((s) => (
              <tr key={s.name}>
                <td>
                  <strong>{s.name}</strong> <span className="muted small">{`${s.type}, ${s.format === 'ocsf' ? 'OCSF' : 'JSON'}`}</span>
                </td>
                <td className="wrap">
                  <code>{s.target}</code>
                </td>
                <td>
                  <span className={`badge sink-${s.state}`}>{SINK_STATE[s.state]}</span>
                </td>
                <td className="num">{s.lag.toLocaleString()}</td>
                <td>{s.deliveredAt ? <When at={s.deliveredAt} /> : 'nothing yet'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
