import { useState } from 'react';
import type { ExecHostView } from '@lemniscate/contracts';
import { DataTable, type Column } from '../components/DataTable';
import { Query, type QueryState } from '../components/Query';
import { Empty, InlineError, Notice } from '../components/States';
import { ago, drainConsequence, hostState } from '../exec-hosts/view-model';

export interface ExecHostsPageViewProps {
  hosts: QueryState<ExecHostView[]>;
  /** Administrators drain and undrain; security officers read. */
  canDrain: boolean;
  onDrain: (hostId: string, reason: string | undefined) => void;
  onUndrain: (hostId: string) => void;
  /** The host a drain or undrain is being sent for. */
  busyId: string | null;
  actionError: unknown;
  notice: string | null;
  /** Names `user:ID` actors (who drained a host). */
  nameOf: (actor: string) => string;
  /** The clock the relative times are read against (ticks every second). */
  now: number;
  /** How often the list is read again, in seconds. */
  refreshSeconds: number;
}

function columns(p: ExecHostsPageViewProps, onAskDrain: (id: string) => void): Column<ExecHostView>[] {
  const cols: Column<ExecHostView>[] = [
    {
      header: 'Exec-host',
      className: 'nowrap',
      cell: (h) => (
        <>
          <strong>{h.id}</strong>
          <div className="muted small">
            {h.kind === 'fixed' ? 'fixed (configured)' : 'registered'}
            {h.version && ` · version ${h.version}`}
          </div>
        </>
      ),
    },
    {
      header: 'State',
      cell: (h) => {
        const s = hostState(h, p.now);
        return (
          <div className="host-state">
            <span className={`badge host-${s.tone}`}>{s.label}</span>
            <div className="muted small">{s.detail}</div>
          </div>
        );
      },
    },
    { header: 'Address', className: 'host-address', cell: (h) => <Address value={h.address} /> },
    { header: 'Runtimes', className: 'nowrap', cell: (h) => (h.runtimes.length > 0 ? h.runtimes.join(', ') : <span className="muted">—</span>) },
    {
      header: (
        <abbr title="Live sessions placed on the host, as the platform counts them, over its capacity" className="plain-abbr">
          Sessions / capacity
        </abbr>
      ),
      num: true,
      cell: (h) => (h.kind === 'fixed' ? h.liveSessions : `${h.liveSessions} / ${h.capacity}`),
    },
    {
      header: (
        <abbr title="The sandboxes the host reported at its last heartbeat" className="plain-abbr">
          Load
        </abbr>
      ),
      num: true,
      cell: (h) => (h.kind === 'fixed' ? <span className="muted">—</span> : h.load),
    },
    {
      header: (
        <abbr title="Sandboxes made ahead of their sessions, ready now, over how many the host wants (its warm pool)" className="plain-abbr">
          Warm
        </abbr>
      ),
      num: true,
      cell: (h) => (h.warm ? `${h.warm.ready} / ${h.warm.target}` : <span className="muted">{h.kind === 'fixed' ? '—' : 'off'}</span>),
    },
    {
      header: 'Last heartbeat',
      cell: (h) =>
        h.lastHeartbeatAt ? (
          <time dateTime={h.lastHeartbeatAt} title={new Date(h.lastHeartbeatAt).toLocaleString()}>
            {ago(h.lastHeartbeatAt, p.now)}
          </time>
        ) : (
          <span className="muted">—</span>
        ),
    },
    {
      header: 'Drained by',
      className: 'drained-by',
      cell: (h) =>
        h.drainedBy ? (
          <>
            <span title={h.drainedBy}>{p.nameOf(h.drainedBy)}</span>
            {h.drainReason && <div className="small drain-reason">“{h.drainReason}”</div>}
          </>
        ) : (
          <span className="muted">—</span>
        ),
    },
  ];
  if (p.canDrain) {
    cols.push({
      header: <span className="visually-hidden">Actions</span>,
      className: 'row-actions',
      cell: (h) => {
        if (h.kind === 'fixed') return <span className="muted small">cannot be drained</span>;
        const busy = p.busyId === h.id;
        return h.drainedBy ? (
          <button type="button" className="small" disabled={busy} onClick={() => p.onUndrain(h.id)}>
            {busy ? 'Undraining…' : 'Undrain'} <span className="visually-hidden">{h.id}</span>
          </button>
        ) : (
          <button type="button" className="small danger outline" disabled={busy} onClick={() => onAskDrain(h.id)}>
            Drain… <span className="visually-hidden">{h.id}</span>
          </button>
        );
      },
    });
  }
  return cols;
}

/** An address that may break after its scheme and before its port, never inside a host name. */
function Address({ value }: { value: string }) {
  const parts = value.split(/(?<=:\/\/)|(?=:\d+\/?$)/);
  return (
    <code>
      {parts.map((part, i) => (
        <span key={i}>
          {i > 0 && <wbr />}
          {part}
        </span>
      ))}
    </code>
  );
}

export function ExecHostsPageView(p: ExecHostsPageViewProps) {
  const [asking, setAsking] = useState<string | null>(null);
  return (
    <div className="page">
      <div className="page-header">
        <h1>Exec-hosts</h1>
        <p className="muted small">Where sessions run. Read again every {p.refreshSeconds} seconds.</p>
      </div>
      <InlineError error={p.actionError} />
      <Notice text={p.notice} />
      <Query state={p.hosts} what="the exec-hosts">
        {(hosts) => {
          const fixed = hosts.some((h) => h.kind === 'fixed');
          const draining = hosts.find((h) => h.id === asking && !h.drainedBy && h.kind !== 'fixed') ?? null;
          if (hosts.length === 0) {
            return (
              <Empty>
                <p>No exec-host has registered yet.</p>
                <p className="small">
                  An exec-host joins the pool with its first heartbeat: start it with <code>LEMNISCATE_GATEWAY_URL</code> set to this gateway&apos;s URL and the same{' '}
                  <code>LEMNISCATE_EXEC_HOST_TOKEN</code> as the gateway. Until one has, no session can start.
                </p>
              </Empty>
            );
          }
          return (
            <div className="stack">
              {fixed && (
                <p className="host-note" role="note">
                  This gateway has one configured exec-host (<code>LEMNISCATE_EXEC_HOST_URL</code>), not a pool, so it cannot be drained: there is no other exec-host to place sessions on. Start the
                  gateways with <code>LEMNISCATE_EXEC_HOST_POOL=true</code> to run a pool.
                </p>
              )}
              <div className="card flush table-scroll">
                <DataTable caption="Exec-hosts" className="exec-hosts" columns={columns(p, setAsking)} rows={hosts} rowKey={(h) => h.id} />
              </div>
              {p.canDrain && draining && (
                <DrainForm
                  key={draining.id}
                  host={draining}
                  onCancel={() => setAsking(null)}
                  onConfirm={(reason) => {
                    p.onDrain(draining.id, reason);
                    setAsking(null);
                  }}
                />
              )}
            </div>
          );
        }}
      </Query>
    </div>
  );
}

function DrainForm({ host, onCancel, onConfirm }: { host: ExecHostView; onCancel: () => void; onConfirm: (reason: string | undefined) => void }) {
  const [reason, setReason] = useState('');
  return (
    <section className="card" aria-labelledby="drain-title">
      <h2 id="drain-title">Drain {host.id}</h2>
      <form
        className="confirm"
        onSubmit={(e) => {
          e.preventDefault();
          onConfirm(reason.trim() === '' ? undefined : reason.trim());
        }}
      >
        <p>{drainConsequence(host)} Undrain it to place sessions on it again. Both are recorded in the audit log.</p>
        <div className="field">
          <label htmlFor="drain-reason">Reason (optional, shown on the host and in the audit log)</label>
          <input id="drain-reason" value={reason} maxLength={500} onChange={(e) => setReason(e.target.value)} placeholder="kernel upgrade" autoFocus />
        </div>
        <div className="actions">
          <button type="button" className="ghost" onClick={onCancel}>
            Cancel
          </button>
          <button type="submit" className="danger">
            Drain {host.id}
          </button>
        </div>
      </form>
    </section>
  );
}
