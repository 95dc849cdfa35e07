import { queryOptions } from '@tanstack/react-query';
import { LoginResponse, type LoginRequest, GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';

export const meQuery = () =>
  queryOptions({
    queryKey: ['me'],
    queryFn: async ({ signal }) => {
      const me = await api.call(R.me, { signal });
      api.setCsrfToken(me.csrfToken);
      return me;
    },
    staleTime: 60_000,
    retry: false,
  });

/** Whether the gateway offers single sign-on (asked before anyone is signed in). */
export const oidcInfoQuery = () =>
  queryOptions({
    queryKey: ['auth', 'oidc'],
    queryFn: ({ signal }) => api.call(R.oidcInfo, { signal }),
    staleTime: Infinity,
    retry: false,
  });

/** Where the browser goes to sign in with single sign-on, back to `returnTo` afterwards. */
export function oidcStartHref(returnTo: string): string {
  return `${R.oidcStart.path}?returnTo=${encodeURIComponent(returnTo)}`;
}

export async function login(body: LoginRequest): Promise<LoginResponse> {
  const res = await api.call(R.login, { body });
  api.setCsrfToken(res.csrfToken);
  return res;
}

export async function logout(): Promise<void> {
  await api.call(R.logout);
  api.setCsrfToken(null);
}
