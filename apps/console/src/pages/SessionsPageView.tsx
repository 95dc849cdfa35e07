import type { ReactNode } from 'react';
import { SESSION_MODE_LABELS, type SessionStatus, type SessionView } from '@lemniscate/contracts';
import { Query, type QueryState } from '../components/Query';
import { Empty } from '../components/States';

export interface SessionsPageViewProps {
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

export function SessionsPageView({ sessions, status, onStatusChange, live, renderSessionLink }: SessionsPageViewProps) {
  return (
    <div className="page">
      <div className="page-header">
        <h1>Sessions</h1>
        <p className="muted small stream-status">
          <span className={`live-dot${live ? ' on' : ''}`} aria-hidden="true" /> {live ? 'Live' : 'Not live'}
        </p>
        <div className="field inline">
          <label htmlFor="status-filter">Status</label>
          <select id="status-filter" value={status} onChange={(e) => onStatusChange(e.target.value as SessionStatus | '')}>
            <option value="">All</option>
            <option value="running">Running</option>
            <option value="completed">Completed</option>
            <option value="stopped">Stopped</option>
            <option value="failed">Failed</option>
          </select>
        </div>
      </div>
      <Query state={sessions} what="the sessions">
        {(list) =>
          list.length === 0 ? (
            <Empty>No session matches. Start one with <code>lemni -p "…"</code>.</Empty>
          ) : (
            <div className="card flush">
              <table className="data">
                <caption className="visually-hidden">Sessions</caption>
                <thead>
                  <tr>
                    <th scope="col">Instruction</th>
                    <th scope="col">Status</th>
                    <th scope="col">Mode</th>
                    <th scope="col">Agent</th>
                    <th scope="col" className="num">
                      Actions
                    </th>
                    <th scope="col">Started</th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((s) => (
                    <tr key={s.id}>
                      <td className="truncate">{renderSessionLink(s.id, s.instruction)}</td>
                      <td>
                        <StatusBadge status={s.status} stopReason={s.stopReason} />
                      </td>
                      <td>{SESSION_MODE_LABELS[s.mode]}</td>
                      <td>{s.agent}</td>
                      <td className="num">{s.actionsUsed}</td>
                      <td>
                        <time dateTime={s.startedAt}>{new Date(s.startedAt).toLocaleString()}</time>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Query>
    </div>
  );
}
