import type { TokenView, UserView } from '@lemniscate/contracts';
import type { ApiTokenRow, UserRow } from '../db/schema';

export const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);

export function toUserView(user: UserRow, projectIds: string[]): UserView {
  return {
    id: user.id,
    email: user.email,
    displayName: user.displayName,
    role: user.role,
    projectIds,
    disabledAt: iso(user.disabledAt),
    revokedAt: iso(user.revokedAt),
    createdAt: user.createdAt.toISOString(),
  };
}

export function toTokenView(token: ApiTokenRow): TokenView {
  return {
    id: token.id,
    name: token.name,
    prefix: token.prefix,
    // Tokens are always created with an expiry; an old row without one reads as already expired.
    expiresAt: (token.expiresAt ?? new Date(0)).toISOString(),
    revokedAt: iso(token.revokedAt),
    lastUsedAt: iso(token.lastUsedAt),
    createdAt: token.createdAt.toISOString(),
  };
}
