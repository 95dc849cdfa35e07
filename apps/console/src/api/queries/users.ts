import { queryOptions } from '@tanstack/react-query';
import { type CreateTokenRequest, type CreateUserRequest, GatewayRoutes as R, type UpdateUserRequest } from '@lemniscate/contracts';
import { api } from '../client';

export const usersQuery = () =>
  queryOptions({
    queryKey: ['users'],
    queryFn: ({ signal }) => api.call(R.listUsers, { signal }),
  });

/** The signed-in person's own tokens. */
export const myTokensQuery = () =>
  queryOptions({
    queryKey: ['tokens'],
    queryFn: ({ signal }) => api.call(R.listTokens, { signal }),
  });

/** Anyone's tokens, for an administrator (GET /users/:id/tokens). */
export const userTokensQuery = (userId: string) =>
  queryOptions({
    queryKey: ['tokens', userId],
    queryFn: ({ signal }) => api.call(R.listUserTokens, { params: { id: userId }, signal }),
  });

export const updateUser = (id: string, body: UpdateUserRequest) => api.call(R.updateUser, { params: { id }, body });
export const createUser = (body: CreateUserRequest) => api.call(R.createUser, { body });
export const revokeUser = (id: string) => api.call(R.revokeUser, { params: { id } });
export const createToken = (body: CreateTokenRequest) => api.call(R.createToken, { body });
export const revokeToken = (id: string) => api.call(R.revokeToken, { params: { id } });
