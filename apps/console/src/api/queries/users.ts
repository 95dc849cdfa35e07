import { queryOptions } from '@tanstack/react-query';
import { type CreateTokenRequest, type CreateUserRequest, GatewayRoutes as R } from '@lemniscate/contracts';
import { api } from '../client';

export const usersQuery = () =>
  queryOptions({
    queryKey: ['users'],
    queryFn: ({ signal }) => api.call(R.listUsers, { signal }),
  });

/** The signed-in person's own tokens: the gateway lists no one else's (revoking a user revokes theirs). */
export const myTokensQuery = () =>
  queryOptions({
    queryKey: ['tokens'],
    queryFn: ({ signal }) => api.call(R.listTokens, { signal }),
  });

export const createUser = (body: CreateUserRequest) => api.call(R.createUser, { body });
export const revokeUser = (id: string) => api.call(R.revokeUser, { params: { id } });
export const createToken = (body: CreateTokenRequest) => api.call(R.createToken, { body });
export const revokeToken = (id: string) => api.call(R.revokeToken, { params: { id } });
