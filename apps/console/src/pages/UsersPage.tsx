import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { CreateUserRequest } from '@lemniscate/contracts';
import { addMember, projectsQuery, removeMember } from '../api/queries/projects';
import { createToken, createUser, myTokensQuery, revokeToken, revokeUser, updateUser, userTokensQuery, usersQuery } from '../api/queries/users';
import { ROLE_LABELS } from '../auth/access';
import type { UserRole } from '@lemniscate/contracts';
import { useAuth } from '../auth/AuthContext';
import { fromQuery } from '../components/Query';
import { UsersPageView } from './UsersPageView';

export function UsersPage() {
  const qc = useQueryClient();
  const users = useQuery(usersQuery());
  const projects = useQuery(projectsQuery());
  const [selected, setSelected] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const { me } = useAuth();
  const mine = useQuery({ ...myTokensQuery(), enabled: selected === me.user.id });
  const theirs = useQuery({ ...userTokensQuery(selected ?? ''), enabled: selected !== null && selected !== me.user.id });
  const tokens = selected === me.user.id ? mine : theirs;
  const refresh = () => qc.invalidateQueries({ queryKey: ['users'] });

  const create = useMutation({
    mutationFn: (body: CreateUserRequest) => createUser(body),
    onSuccess: async (u) => {
      setNotice(`${u.displayName} can now sign in as ${u.email}.`);
      await refresh();
    },
  });
  const revoke = useMutation({
    mutationFn: revokeUser,
    onSuccess: async (r) => {
      setNotice(`Revoked: ${r.tokensRevoked} tokens, ${r.webSessionsRevoked} sign-ins and ${r.sessionsRevoked.length} running sessions.`);
      await refresh();
    },
  });
  const membership = useMutation({
    mutationFn: ({ userId, projectId, member }: { userId: string; projectId: string; member: boolean }) => (member ? addMember(projectId, userId) : removeMember(projectId, userId)),
    onSuccess: refresh,
  });
  const role = useMutation({
    mutationFn: ({ userId, role }: { userId: string; role: UserRole }) => updateUser(userId, { role }),
    onSuccess: async (u) => {
      const label = ROLE_LABELS[u.role].toLowerCase();
      setNotice(`${u.displayName} is now ${/^[aeiou]/.test(label) ? 'an' : 'a'} ${label}.`);
      await refresh();
    },
  });
  const token = useMutation({ mutationFn: revokeToken, onSuccess: () => qc.invalidateQueries({ queryKey: ['tokens'] }) });
  const newToken = useMutation({
    mutationFn: ({ name, expiresInDays }: { name: string; expiresInDays: number }) => createToken({ name, expiresInDays }),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['tokens'] }),
  });

  return (
    <UsersPageView
      users={fromQuery(users)}
      projects={projects.data ?? []}
      myUserId={me.user.id}
      selectedUserId={selected}
      onSelectUser={(id) => setSelected((cur) => (cur === id ? null : id))}
      tokens={fromQuery(tokens)}
      onChangeRole={(userId, r) => role.mutate({ userId, role: r })}
      onCreateUser={(b) => create.mutate(b)}
      creating={create.isPending}
      onRevokeUser={(id) => revoke.mutate(id)}
      onSetMembership={(userId, projectId, member) => membership.mutate({ userId, projectId, member })}
      onRevokeToken={(id) => token.mutate(id)}
      onCreateToken={(name, expiresInDays) => newToken.mutate({ name, expiresInDays })}
      createdToken={newToken.data?.token ?? null}
      actionError={create.error ?? role.error ?? revoke.error ?? membership.error ?? token.error ?? newToken.error ?? projects.error}
      notice={notice}
    />
  );
}
