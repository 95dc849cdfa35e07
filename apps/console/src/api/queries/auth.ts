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

export async function login(body: LoginRequest): Promise<LoginResponse> {
  const res = await api.call(R.login, { body });
  api.setCsrfToken(res.csrfToken);
  return res;
}

export async function logout(): Promise<void> {
  await api.call(R.logout);
  api.setCsrfToken(null);
}
