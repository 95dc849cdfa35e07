import type { AppAbility, Role } from '@lemniscate/policy';

/** Who is calling, established once per request by the auth guard. */
export interface Principal {
  userId: string;
  email: string;
  role: Role;
  projectIds: string[];
  ability: AppAbility;
  via: 'cookie' | 'token';
  webSessionId: string | null;
  tokenId: string | null;
  csrfToken: string | null;
}

export function actorOf(p: Principal): string {
  return `user:${p.userId}`;
}
