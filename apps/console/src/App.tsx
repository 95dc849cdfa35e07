import { lazy, Suspense, useEffect, useRef, type ReactNode } from 'react';
import { Link, Navigate, Route, Routes, useLocation } from 'react-router';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { isApiError } from './api/client';
import { logout, meQuery } from './api/queries/auth';
import { approvalsQuery } from './api/queries/approvals';
import { canOpen, PAGES, type PageKey } from './auth/access';
import { AuthProvider, useAuth } from './auth/AuthContext';
import { ErrorPanel, Loading } from './components/States';
import { Layout } from './layout/Layout';
import { DashboardPage } from './pages/DashboardPage';
import { SignInPage } from './pages/SignInPage';
import { signedOutNotice } from './pages/SignInPageView';

// Pages load on first visit: the policy editor (CodeMirror, the schema validator) and the diff
// viewer (highlight.js) stay out of the first download.
const ApprovalsPage = lazy(() => import('./pages/ApprovalsPage').then((m) => ({ default: m.ApprovalsPage })));
const AuditPage = lazy(() => import('./pages/AuditPage').then((m) => ({ default: m.AuditPage })));
const ExecHostsPage = lazy(() => import('./pages/ExecHostsPage').then((m) => ({ default: m.ExecHostsPage })));
const EnvironmentPage = lazy(() => import('./pages/EnvironmentPage').then((m) => ({ default: m.EnvironmentPage })));
const EnvironmentIndexPage = lazy(() => import('./pages/EnvironmentPage').then((m) => ({ default: m.EnvironmentIndexPage })));
const PoliciesPage = lazy(() => import('./pages/PoliciesPage').then((m) => ({ default: m.PoliciesPage })));
const SessionPage = lazy(() => import('./pages/SessionPage').then((m) => ({ default: m.SessionPage })));
const SessionsPage = lazy(() => import('./pages/SessionsPage').then((m) => ({ default: m.SessionsPage })));
const ProjectsPage = lazy(() => import('./pages/ProjectsPage').then((m) => ({ default: m.ProjectsPage })));
const UsersPage = lazy(() => import('./pages/UsersPage').then((m) => ({ default: m.UsersPage })));

export function App() {
  const qc = useQueryClient();
  const me = useQuery(meQuery());
  if (me.isPending) return <Loading what="your session" />;
  if (me.isError) {
    if (isApiError(me.error) && me.error.status === 401) return <SignInPage notice={signedOutNotice(me.error)} />;
    return (
      <main id="main" className="page">
        <ErrorPanel title="The console cannot reach the gateway" error={me.error} onRetry={() => void me.refetch()} />
      </main>
    );
  }
  const signOut = () => {
    // A full reload after signing out: nothing of the previous person's data stays in memory, and the
    // sign-in page comes from the server's answer (401), not from client state.
    void logout().finally(() => {
      qc.clear();
      window.location.assign('/');
    });
  };
  return (
    <AuthProvider value={{ me: me.data, signOut }}>
      <Shell />
    </AuthProvider>
  );
}

function currentPage(pathname: string): PageKey | null {
  const match = [...PAGES].sort((a, b) => b.path.length - a.path.length).find((p) => (p.path === '/' ? pathname === '/' : pathname.startsWith(p.path) || p.also?.test(pathname)));
  return match?.key ?? null;
}

function Shell() {
  const { me, signOut } = useAuth();
  const location = useLocation();
  const pending = useQuery({ ...approvalsQuery({ state: 'pending' }), enabled: canOpen(me.user.role, 'approvals'), refetchInterval: 30_000 });
  // After a client-side navigation, focus goes to the new page as it would on a page load, so a
  // screen reader announces it and the next Tab starts from its top.
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    document.getElementById('main')?.focus({ preventScroll: false });
  }, [location.pathname]);
  return (
    <Layout
      user={me.user}
      current={currentPage(location.pathname)}
      onSignOut={signOut}
      pendingApprovals={pending.data?.length}
      renderLink={(to, label, current) => (
        <Link to={to} aria-current={current ? 'page' : undefined}>
          {label}
        </Link>
      )}
    >
      <Routes>
        <Route path="/" element={<DashboardPage />} />
        <Route path="/approvals" element={<Guard page="approvals">{<ApprovalsPage />}</Guard>} />
        <Route path="/sessions" element={<Guard page="sessions">{<SessionsPage />}</Guard>} />
        <Route path="/sessions/:id" element={<Guard page="sessions">{<SessionPage />}</Guard>} />
        <Route path="/policies" element={<Guard page="policies">{<PoliciesPage />}</Guard>} />
        <Route path="/environment" element={<Guard page="environment">{<EnvironmentIndexPage />}</Guard>} />
        <Route path="/projects/:projectId/environment" element={<Guard page="environment">{<EnvironmentPage />}</Guard>} />
        <Route path="/projects" element={<Guard page="projects">{<ProjectsPage />}</Guard>} />
        <Route path="/users" element={<Guard page="users">{<UsersPage />}</Guard>} />
        <Route path="/audit" element={<Guard page="audit">{<AuditPage />}</Guard>} />
        <Route path="/admin/exec-hosts" element={<Guard page="execHosts">{<ExecHostsPage />}</Guard>} />
        <Route path="*" element={<Navigate to="/" replace />} />
      </Routes>
    </Layout>
  );
}

/** A page the role cannot use says so instead of rendering; the gateway would refuse its calls anyway. */
function Guard({ page, children }: { page: PageKey; children: ReactNode }) {
  const { me } = useAuth();
  if (canOpen(me.user.role, page)) return <Suspense fallback={<Loading what="the page" />}>{children}</Suspense>;
  const label = PAGES.find((p) => p.key === page)?.label ?? page;
  return (
    <div className="page">
      <div className="state error" role="alert">
        <h1>Not available to your role</h1>
        <p>The {label} page is for other roles. Ask an administrator if you need access.</p>
      </div>
    </div>
  );
}
