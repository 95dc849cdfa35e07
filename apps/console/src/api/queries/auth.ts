import { queryOptions } from '@tanstack/react-query';
import { LoginResponse, MeResponse, OkResponse, type LoginRequest } from '@lemniscate/contracts';
import { api } from '../client';
import { routes } from '../routes';

export const meQuery = () =>
  queryOptions({
    queryKey: ['me'],
    queryFn: async ({ signal }) => {
      const me = await api.json(MeResponse, routes.me, { signal });
      api.setCsrfToken(me.csrfToken);
      return me;
    },
    staleTime: 60_000,
    retry: false,
  });

export async function login(body: LoginRequest): Promise<LoginResponse> {
  const res = await api.json(LoginResponse, routes.login, { method: 'POST', body });
  api.setCsrfToken(res.csrfToken);
  return res;
}

export async function logout(): Promise<void> {
  await api.json(OkResponse, routes.logout, { method: 'POST' });
  api.setCsrfToken(null);
}
