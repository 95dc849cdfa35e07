import { queryOptions } from '@tanstack/react-query';
import { z } from 'zod';
import { CreatedToken, RevokeUserResponse, TokenView, UserView, type CreateTokenRequest, type CreateUserRequest } from '@lemniscate/contracts';
import { api } from '../client';
import { routes } from '../routes';

export const usersQuery = () =>
  queryOptions({
    queryKey: ['users'],
    queryFn: ({ signal }) => api.json(z.array(UserView), routes.users, { signal }),
  });

/** The signed-in person's own tokens: the gateway lists no one else's (revoking a user revokes theirs). */
export const myTokensQuery = () =>
  queryOptions({
    queryKey: ['tokens'],
    queryFn: ({ signal }) => api.json(z.array(TokenView), routes.tokens, { signal }),
  });

export const createUser = (body: CreateUserRequest) => api.json(UserView, routes.users, { method: 'POST', body });
export const revokeUser = (id: string) => api.json(RevokeUserResponse, routes.revokeUser(id), { method: 'POST', body: {} });
export const createToken = (body: CreateTokenRequest) => api.json(CreatedToken, routes.tokens, { method: 'POST', body });
export const revokeToken = (id: string) => api.json(TokenView, routes.token(id), { method: 'DELETE' });
