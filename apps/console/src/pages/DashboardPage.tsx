import { useState } from 'react';
import { useQuery } from '@tanstack/react-query';
import { dashboardQuery } from '../api/queries/dashboard';
import { canOpen } from '../auth/access';
import { useAuth } from '../auth/AuthContext';
import { fromQuery } from '../components/Query';
import { DashboardPageView } from './DashboardPageView';

export function DashboardPage() {
  const { me } = useAuth();
  const [days, setDays] = useState(14);
  const stats = useQuery(dashboardQuery({ days }));
  return <DashboardPageView stats={fromQuery(stats)} days={days} onDaysChange={setDays} approvalsHref={canOpen(me.user.role, 'approvals') ? '/approvals' : undefined} />;
}
