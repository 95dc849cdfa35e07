import { useState } from 'react';
import { SESSION_MODE_LABELS, type GatewayEvent, type SessionView } from '@lemniscate/contracts';
import { DiffViewer } from '../components/diff/DiffViewer';
import { EventStream } from '../components/EventStream';
import { Query, type QueryState } from '../components/Query';
import { InlineError, Notice } from '../components/States';
import { StatusBadge } from './SessionsPageView';

/** X3: where the kept tree stood at the end, in words when it says nothing new. */
function treeAtEnd(s: SessionView) {
  if (s.status === 'running') return '— (still running)';
  if (s.fingerprintEnd === null) return 'unknown (the sandbox could not be read at the end)';
  if (s.fingerprintEnd === s.fingerprintStart) return 'unchanged: nothing was kept';
  return <code>{s.fingerprintEnd}</code>;
}

interface SessionPageViewProps {
  session: QueryState<SessionView>;
  events: GatewayEvent[];
  live: boolean;
  canStop: boolean;
  canRevoke: boolean;
  onStop: () => void;
  onRevoke: (reason: string) => void;
  onDownloadPatch: () => void;
  busy: 'stop' | 'revoke' | null;
  actionError: unknown;
  /** A sentence after stop/revoke, e.g. the sandbox note from the gateway. */
  notice: string | null;
}

export function SessionPageView(props: SessionPageViewProps) {
  return (
    <div className="page">
      <Query state={props.session} what="the session">
        {(s) => <SessionDetail {...props} s={s} />}
      </Query>
    </div>
  );
}

function SessionDetail({ s, events, live, canStop, canRevoke, onStop, onRevoke, onDownloadPatch, busy, actionError, notice }: SessionPageViewProps & { s: SessionView }) {
  const [confirmRevoke, setConfirmRevoke] = useState(false);
  const [reason, setReason] = useState('');
  const running = s.status === 'running';
  return (
    <>
      <div className="page-header">
        <div>
          <p className="muted small">
            Session <code>{s.id}</code>
          </p>
          <h1 className="instruction">{s.instruction}</h1>
        </div>
        <StatusBadge status={s.status} stopReason={s.stopReason} />
      </div>
      <div className="grid session">
        <section className="card" aria-labelledby="facts-title">
          <h2 id="facts-title">Facts</h2>
          <dl className="facts">
            <dt>Agent</dt>
            <dd>{s.agent}</dd>
            <dt>Actions used</dt>
            <dd>{s.actionsUsed}</dd>
            <dt>Extensions</dt>
            <dd>{s.extensionsUsed}</dd>
            <dt>Started</dt>
            <dd>{new Date(s.startedAt).toLocaleString()}</dd>
            <dt>Ended</dt>
            <dd>{s.endedAt ? new Date(s.endedAt).toLocaleString() : '—'}</dd>
            <dt>Base commit</dt>
            <dd>
              <code>{s.baseCommit?.slice(0, 12) ?? '—'}</code>
              {s.branch ? ` on ${s.branch}` : ''}
              {s.includedUncommitted ? ', with uncommitted changes' : ''}
            </dd>
            <dt>Mode</dt>
            <dd>{SESSION_MODE_LABELS[s.mode]}</dd>
            <dt>Tree at the start</dt>
            <dd>
              <code>{s.fingerprintStart ?? '—'}</code>
            </dd>
            <dt>Tree at the end</dt>
            <dd>{treeAtEnd(s)}</dd>
          </dl>
          {running && (canStop || canRevoke) && (
            <div className="actions column">
              {canStop && (
                <button type="button" className="danger" onClick={() => onStop()} disabled={busy !== null}>
                  {busy === 'stop' ? 'Stopping…' : 'Stop the session'}
                </button>
              )}
              {canRevoke && !confirmRevoke && (
                <button type="button" className="danger outline" onClick={() => setConfirmRevoke(true)} disabled={busy !== null}>
                  Revoke…
                </button>
              )}
              {canRevoke && confirmRevoke && (
                <form
                  className="revoke-form"
                  onSubmit={(e) => {
                    e.preventDefault();
                    onRevoke(reason);
                  }}
                >
                  <label htmlFor="revoke-reason">Reason (recorded in the audit log)</label>
                  <input id="revoke-reason" value={reason} onChange={(e) => setReason(e.target.value)} maxLength={1000} />
                  <div className="actions">
                    <button type="button" className="ghost" onClick={() => setConfirmRevoke(false)}>
                      Cancel
                    </button>
                    <button type="submit" className="danger" disabled={busy !== null}>
                      {busy === 'revoke' ? 'Revoking…' : 'Revoke now'}
                    </button>
                  </div>
                </form>
              )}
              <p className="muted small">Stopping destroys the sandbox and rejects every change not yet approved.</p>
            </div>
          )}
          <InlineError error={actionError} />
          <Notice text={notice} />
        </section>
        <section className="card span-2" aria-labelledby="events-title">
          <h2 id="events-title">Events</h2>
          <EventStream events={events} live={live && running} />
        </section>
      </div>
      {s.summary && (
        <section className="card" aria-labelledby="summary-title">
          <h2 id="summary-title">Summary</h2>
          <p className="prewrap">{s.summary}</p>
        </section>
      )}
      <section className="card" aria-labelledby="patch-title">
        <div className="card-header">
          <h2 id="patch-title">Approved changes</h2>
          {s.finalPatch && (
            <button type="button" onClick={() => onDownloadPatch()}>
              Download patch
            </button>
          )}
        </div>
        {s.finalPatch ? (
          <DiffViewer patch={s.finalPatch} label="Approved changes of this session" />
        ) : (
          <p className="muted">{running ? 'The patch is available when the session ends.' : 'No change was approved in this session.'}</p>
        )}
      </section>
    </>
  );
}
