import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { login, meQuery, oidcInfoQuery, oidcStartHref } from '../api/queries/auth';
import { SignInPageView } from './SignInPageView';

/** The sentence the gateway sent back after a single sign-on that did not sign the person in; taken off the address bar once read. */
function takeSsoError(): string | null {
  const url = new URL(window.location.href);
  const said = url.searchParams.get('sso_error');
  if (said === null) return null;
  url.searchParams.delete('sso_error');
  window.history.replaceState(null, '', `${url.pathname === '/sign-in' ? '/' : url.pathname}${url.search}${url.hash}`);
  return said.slice(0, 500);
}

export function SignInPage({ notice = null }: { notice?: string | null }) {
  const qc = useQueryClient();
  const [ssoError] = useState(takeSsoError);
  const oidc = useQuery(oidcInfoQuery());
  const m = useMutation({
    mutationFn: login,
    onSuccess: (res) => qc.setQueryData(meQuery().queryKey, { user: res.user, csrfToken: res.csrfToken, via: 'cookie' as const }),
  });
  const here = window.location.pathname === '/sign-in' ? '/' : `${window.location.pathname}${window.location.search}`;
  return (
    <SignInPageView
      onSubmit={(c) => m.mutate(c)}
      pending={m.isPending}
      error={m.error}
      notice={notice}
      sso={oidc.data?.enabled ? { label: oidc.data.label ?? 'Sign in with single sign-on', href: oidcStartHref(here) } : null}
      passwordSignIn={oidc.data?.localSignIn ?? true}
      ssoError={ssoError}
    />
  );
}
