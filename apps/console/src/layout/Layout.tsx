import type { ReactNode } from 'react';
import type { UserView } from '@lemniscate/contracts';
import { pagesFor, ROLE_LABELS, type PageKey } from '../auth/access';

interface LayoutProps {
  user: Pick<UserView, 'displayName' | 'email' | 'role'>;
  current: PageKey | null;
  onSignOut: () => void;
  /** Renders a navigation link; the app passes react-router's Link, the test harness a plain anchor. */
  renderLink: (to: string, label: string, current: boolean) => ReactNode;
  pendingApprovals?: number;
  children: ReactNode;
}

export function Layout({ user, current, onSignOut, renderLink, pendingApprovals, children }: LayoutProps) {
  return (
    <div className="app">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <div className="brand">
          <span className="logo" aria-hidden="true">
            ∞
          </span>
          <span>Lemniscate</span>
        </div>
        <nav aria-label="Main">
          <ul>
            {pagesFor(user.role).map((p) => (
              <li key={p.key}>
                {renderLink(p.path, p.label, p.key === current)}
                {p.key === 'approvals' && pendingApprovals ? (
                  <span className="count-badge" aria-label={`${pendingApprovals} pending`}>
                    {pendingApprovals}
                  </span>
                ) : null}
              </li>
            ))}
          </ul>
        </nav>
        <div className="whoami">
          <span className="who">
            <span className="who-name" title={user.email}>
              {user.displayName}
            </span>
            <span className="muted small email">{user.email}</span>
            <span className="muted small role-line" aria-hidden="true">
              {ROLE_LABELS[user.role]}
            </span>
          </span>
          <span className={`role-badge ${user.role}`} title="Your role">
            {ROLE_LABELS[user.role]}
          </span>
          <button type="button" className="ghost" onClick={onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}
