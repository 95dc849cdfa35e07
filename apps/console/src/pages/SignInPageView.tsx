import { useState, type FormEvent } from 'react';
import { LoginRequest } from '@lemniscate/contracts';
import { InlineError } from '../components/States';

interface SignInPageViewProps {
  onSubmit: (credentials: LoginRequest) => void;
  pending: boolean;
  error: unknown;
  /** Why the person is on this page when the gateway said (an account revoked, a console session ended). */
  notice?: string | null;
  /** Single sign-on, when the gateway offers it: the button's words and where it leads. */
  sso?: { label: string; href: string } | null;
  /** false: the deployment accepts single sign-on only, so no password form is shown. */
  passwordSignIn?: boolean;
  /** Why the last single sign-on did not sign the person in, as the gateway said. */
  ssoError?: string | null;
}

/**
 * The gateway's sentence for a 401, when it says more than "sign in": a first visit is asked nothing
 * special, a person signed out by an administrator is told so.
 */
export function signedOutNotice(error: { message: string } | null | undefined): string | null {
  const message = error?.message ?? '';
  if (!message || /^You need to sign in/.test(message)) return null;
  return message;
}

export function SignInPageView({ onSubmit, pending, error, notice = null, sso = null, passwordSignIn = true, ssoError = null }: SignInPageViewProps) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [problems, setProblems] = useState<Partial<Record<'email' | 'password', string>>>({});

  const submit = (e: FormEvent) => {
    e.preventDefault();
    // The same schema the gateway validates with, so a typo is caught before the round trip.
    const parsed = LoginRequest.safeParse({ email, password });
    if (!parsed.success) {
      const next: typeof problems = {};
      for (const issue of parsed.error.issues) {
        const field = issue.path[0] as 'email' | 'password';
        next[field] ??= field === 'email' ? 'Enter your e-mail address, like name@example.org.' : 'Enter your password.';
      }
      setProblems(next);
      return;
    }
    setProblems({});
    onSubmit(parsed.data);
  };

  return (
    <main className="signin" id="main">
      <form className="card signin-card" onSubmit={submit} noValidate aria-labelledby="signin-title">
        <div className="brand large">
          <span className="logo" aria-hidden="true">
            ∞
          </span>
          <span>Lemniscate</span>
        </div>
        <h1 id="signin-title">Sign in</h1>
        <p className="muted">Agents run in sandboxes; nothing is kept without a person saying yes.</p>
        {notice && !error && (
          <div className="signed-out-notice" role="alert">
            <strong>You were signed out.</strong> {notice}
          </div>
        )}
        {ssoError && (
          <div className="signed-out-notice" role="alert">
            <strong>Single sign-on did not sign you in.</strong> {ssoError}
          </div>
        )}
        {sso && (
          <a className={`button wide${passwordSignIn ? '' : ' primary'}`} href={sso.href}>
            {sso.label}
          </a>
        )}
        {sso && passwordSignIn && <p className="signin-or muted">or with your e-mail and password</p>}
        {!passwordSignIn && <p className="muted small">This deployment signs people in through single sign-on only.</p>}
        {passwordSignIn && (
          <>
            <div className="field">
              <label htmlFor="email">E-mail</label>
              <input
                id="email"
                type="email"
                autoComplete="username"
                value={email}
                onChange={(e) => setEmail(e.target.value)}
                aria-invalid={!!problems.email}
                aria-describedby={problems.email ? 'email-error' : undefined}
                autoFocus
              />
              {problems.email && (
                <p id="email-error" className="field-error">
                  {problems.email}
                </p>
              )}
            </div>
            <div className="field">
              <label htmlFor="password">Password</label>
              <input
                id="password"
                type="password"
                autoComplete="current-password"
                value={password}
                onChange={(e) => setPassword(e.target.value)}
                aria-invalid={!!problems.password}
                aria-describedby={problems.password ? 'password-error' : undefined}
              />
              {problems.password && (
                <p id="password-error" className="field-error">
                  {problems.password}
                </p>
              )}
            </div>
            <InlineError error={error} />
            <button type="submit" className="primary wide" disabled={pending}>
              {pending ? 'Signing in…' : 'Sign in'}
            </button>
          </>
        )}
      </form>
    </main>
  );
}
