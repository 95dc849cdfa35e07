import { useState, type MouseEvent } from 'react';
import { useNavigate } from 'react-router';
import { useQuery } from '@tanstack/react-query';
import { dashboardQuery } from '../api/queries/dashboard';
import { canOpen } from '../auth/access';
import { useAuth } from '../auth/AuthContext';
import { fromQuery } from '../components/Query';
import { DashboardPageView } from './DashboardPageView';
import { searchFromFilter } from './SessionsPageView';

export function DashboardPage() {
  const { me } = useAuth();
  const navigate = useNavigate();
  const [days, setDays] = useState(14);
  const stats = useQuery(dashboardQuery({ days }));
  // The figures' links (SVG ones included) move within the console instead of reloading it.
  const followInside = (e: MouseEvent) => {
    const link = (e.target as Element).closest('a');
    const href = link?.getAttribute('href');
    if (!href?.startsWith('/') || e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    void navigate(href);
  };
  return (
    <div onClick={followInside}>
      <DashboardPageView
        stats={fromQuery(stats)}
        days={days}
        onDaysChange={setDays}
        approvalsHref={canOpen(me.user.role, 'approvals') ? '/approvals' : undefined}
        sessionsHref={(filter) => `/sessions?${searchFromFilter(filter).toString()}`}
      />
    </div>
  );
}
