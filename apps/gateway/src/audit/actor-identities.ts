import type { UsersRepository } from '../db/repositories/users.repository';
import type { ActorIdentity } from './audit-export';

const USER_ACTOR = /^user:([^:]+)$/;

/**
 * Who the `user:<id>` actors among `actors` are (email and display name), looked up once each; other
 * actors (`system`, `agent:…`, `anonymous`) and people no longer known are left out. Not part of the
 * hashed entry: exports, sinks and archives add it beside it.
 */
export async function actorIdentities(users: Pick<UsersRepository, 'findById'>, actors: Iterable<string>): Promise<Map<string, ActorIdentity>> {
  const out = new Map<string, ActorIdentity>();
  for (const actor of new Set(actors)) {
    const id = USER_ACTOR.exec(actor)?.[1];
    if (!id) continue;
    const user = await users.findById(id);
    if (user) out.set(actor, { email: user.email, displayName: user.displayName });
  }
  return out;
}
