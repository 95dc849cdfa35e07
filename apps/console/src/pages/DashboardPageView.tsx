import type { DashboardStats } from '../api/console-contracts';
import { ColumnChart, EffectDonut, RankedBars } from '../components/Charts';
import { InlineSelect } from '../components/PageHeader';
import { Query, type QueryState } from '../components/Query';
import type { SessionsFilter } from './SessionsPageView';

interface DashboardPageViewProps {
  stats: QueryState<DashboardStats>;
  days: number;
  onDaysChange: (days: number) => void;
  /** Link to the approvals inbox; absent for roles that cannot answer approvals. */
  approvalsHref?: string;
  /** The address of the sessions list with these filters: every figure drills down to its sessions. */
  sessionsHref: (filter: SessionsFilter) => string;
}

/** A UTC calendar day (as the figures count them) as the instants that bound it. */
function dayFilter(day: string): SessionsFilter {
  const from = Date.parse(`${day}T00:00:00Z`);
  return { from: new Date(from).toISOString(), to: new Date(from + 86_400_000).toISOString() };
}

const PERIODS: [number, string][] = [
  [7, 'Last 7 days'],
  [14, 'Last 14 days'],
  [30, 'Last 30 days'],
];

export function DashboardPageView({ stats, days, onDaysChange, approvalsHref, sessionsHref }: DashboardPageViewProps) {
  const since = (d: number) => {
    const today = new Date();
    return new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate()) - (d - 1) * 86_400_000).toISOString();
  };
  return (
    <div className="page">
      <div className="page-header">
        <h1>Dashboard</h1>
        <InlineSelect id="days" label="Period" value={days} options={PERIODS} onChange={onDaysChange} />
      </div>
      <Query state={stats} what="the dashboard">
        {(s) => (
          <div className="grid dashboard">
            <section className="card stat" aria-labelledby="pending-title">
              <h2 id="pending-title">Pending approvals</h2>
              <p className={`big-number${s.pendingApprovals ? ' warn' : ''}`}>{s.pendingApprovals}</p>
              <p className="muted small">{s.pendingApprovals ? 'Sessions are waiting for a person.' : 'Nothing is waiting.'}</p>
              {s.pendingApprovals > 0 && (
                <div className="actions">
                  {approvalsHref && (
                    <a className="button primary" href={approvalsHref}>
                      Open the inbox
                    </a>
                  )}
                  <a className="button" href={sessionsHref({ waiting: true })}>
                    Sessions waiting
                  </a>
                </div>
              )}
            </section>
            <section className="card span-2" aria-labelledby="spd-title">
              <h2 id="spd-title">Sessions per day</h2>
              <ColumnChart title="Sessions per day" data={s.sessionsPerDay.map((d) => ({ label: d.day, value: d.count, href: sessionsHref(dayFilter(d.day)) }))} valueLabel="Sessions" />
            </section>
            <section className="card" aria-labelledby="effect-title">
              <h2 id="effect-title">Decisions by effect</h2>
              <EffectDonut title="Policy decisions by effect" counts={s.decisionsByEffect} />
            </section>
            <section className="card" aria-labelledby="by-project-title">
              <h2 id="by-project-title">Sessions by project</h2>
              <RankedBars
                title="Sessions by project"
                data={s.sessionsByProject.map((p) => ({ label: p.label, value: p.count, href: sessionsHref({ projectId: p.id, from: since(days) }) }))}
                emptyText="No session was started in this period."
              />
            </section>
            <section className="card" aria-labelledby="by-user-title">
              <h2 id="by-user-title">Sessions by person</h2>
              <RankedBars
                title="Sessions by person"
                data={s.sessionsByUser.map((u) => ({ label: u.label, value: u.count, href: sessionsHref({ userId: u.id, from: since(days) }) }))}
                emptyText="No session was started in this period."
              />
            </section>
            <section className="card" aria-labelledby="denied-title">
              <h2 id="denied-title">Most denied commands</h2>
              <RankedBars title="Most denied commands" tone="deny" data={s.mostDenied.map((c) => ({ label: c.command, value: c.count }))} emptyText="No command was denied in this period." />
            </section>
            <section className="card" aria-labelledby="asked-title">
              <h2 id="asked-title">Most asked commands</h2>
              <RankedBars title="Most asked commands" tone="ask" data={s.mostAsked.map((c) => ({ label: c.command, value: c.count }))} emptyText="No command needed an approval in this period." />
            </section>
          </div>
        )}
      </Query>
    </div>
  );
}
