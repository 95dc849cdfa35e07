import { useState } from 'react';
import { CreateUserRequest, type ProjectView, type TokenView, type UserRole, type UserView } from '@lemniscate/contracts';
import { ROLE_LABELS } from '../auth/access';
import { DataTable, type Column } from '../components/DataTable';
import { Query, type QueryState } from '../components/Query';
import { InlineError, Notice } from '../components/States';

interface UsersPageViewProps {
  users: QueryState<UserView[]>;
  projects: ProjectView[];
  /** The signed-in administrator: they create tokens only for themselves, and never change their own role. */
  myUserId: string;
  selectedUserId: string | null;
  onSelectUser: (id: string | null) => void;
  /** The selected person's API tokens (an administrator reads anyone's, never the secrets). */
  tokens: QueryState<TokenView[]>;
  onChangeRole: (userId: string, role: UserRole) => void;
  onCreateUser: (body: CreateUserRequest) => void;
  creating: boolean;
  onRevokeUser: (id: string) => void;
  onSetMembership: (userId: string, projectId: string, member: boolean) => void;
  onRevokeToken: (id: string) => void;
  onCreateToken: (name: string, expiresInDays: number) => void;
  /** The secret of the token just created: shown once, never again. */
  createdToken: string | null;
  actionError: unknown;
  notice: string | null;
}

function userState(u: UserView): { label: string; tone: string } {
  if (u.revokedAt) return { label: 'revoked', tone: 'bad' };
  if (u.disabledAt) return { label: 'disabled', tone: 'muted' };
  return { label: 'active', tone: 'good' };
}

function userColumns(p: UsersPageViewProps): Column<UserView>[] {
  return [
    {
      header: 'Name',
      cell: (u) => (
        <>
          <button type="button" className="link" onClick={() => p.onSelectUser(u.id)} aria-pressed={u.id === p.selectedUserId}>
            {u.displayName}
          </button>
          <div className="muted small">{u.email}</div>
        </>
      ),
    },
    { header: 'Role', cell: (u) => <span className={`role-badge ${u.role}`}>{ROLE_LABELS[u.role]}</span> },
    { header: 'Projects', cell: (u) => u.projectIds.map((id) => p.projects.find((pr) => pr.id === id)?.name ?? id).join(', ') || <span className="muted">none</span> },
    {
      header: 'State',
      cell: (u) => {
        const st = userState(u);
        return <span className={`badge ${st.tone}`}>{st.label}</span>;
      },
    },
  ];
}

export function UsersPageView(p: UsersPageViewProps) {
  return (
    <div className="page">
      <div className="page-header">
        <h1>Users</h1>
        {p.selectedUserId && (
          <button type="button" onClick={() => p.onSelectUser(null)}>
            Add a person
          </button>
        )}
      </div>
      <InlineError error={p.actionError} />
      <Notice text={p.notice} />
      <Query state={p.users} what="the users">
        {(users) => {
          const selected = users.find((u) => u.id === p.selectedUserId) ?? null;
          return (
            <div className="grid users">
              <section className="card flush span-2" aria-labelledby="users-title">
                <h2 id="users-title" className="pad">
                  People
                </h2>
                <DataTable caption="Users" columns={userColumns(p)} rows={users} rowKey={(u) => u.id} rowClassName={(u) => (u.id === p.selectedUserId ? 'selected' : undefined)} />
              </section>
              {/* A new notice means the person was added: the form starts empty again. */}
              {selected ? <UserDetail user={selected} {...p} /> : <NewUser key={p.notice ?? ''} {...p} />}
            </div>
          );
        }}
      </Query>
    </div>
  );
}

function RoleForm({ user, self, onChangeRole }: { user: UserView; self: boolean; onChangeRole: UsersPageViewProps['onChangeRole'] }) {
  const [role, setRole] = useState<UserRole>(user.role);
  if (self) return <p className="muted small">You cannot change your own role; another administrator can.</p>;
  if (user.revokedAt) return <p className="muted small">A revoked account keeps the role it had: {ROLE_LABELS[user.role]}.</p>;
  return (
    <form
      className="role-form"
      onSubmit={(e) => {
        e.preventDefault();
        if (role !== user.role) onChangeRole(user.id, role);
      }}
    >
      <div className="field inline">
        <label htmlFor={`role-${user.id}`}>Role</label>
        <select id={`role-${user.id}`} value={role} onChange={(e) => setRole(e.target.value as UserRole)}>
          {(Object.keys(ROLE_LABELS) as UserRole[]).map((r) => (
            <option key={r} value={r}>
              {ROLE_LABELS[r]}
            </option>
          ))}
        </select>
        <button type="submit" disabled={role === user.role}>
          Change role
        </button>
      </div>
      <p className="help">Takes effect at {user.displayName}'s next request, in the console and the CLI alike; recorded in the audit log.</p>
    </form>
  );
}

function UserDetail({ user, projects, myUserId, tokens, onRevokeUser, onSetMembership, onRevokeToken, onCreateToken, createdToken, onChangeRole }: UsersPageViewProps & { user: UserView }) {
  const self = user.id === myUserId;
  const [confirm, setConfirm] = useState(false);
  return (
    <section className="card" aria-labelledby="user-title">
      <h2 id="user-title">{user.displayName}</h2>
      <p className="muted small">{user.email}</p>
      <RoleForm key={`${user.id}-${user.role}`} user={user} self={self} onChangeRole={onChangeRole} />
      <fieldset className="field">
        <legend>Project memberships</legend>
        <div className="checks">
          {projects.map((pr) => (
            <label key={pr.id} className="checkbox">
              <input type="checkbox" checked={user.projectIds.includes(pr.id)} disabled={!!user.revokedAt} onChange={(e) => onSetMembership(user.id, pr.id, e.target.checked)} />
              {pr.name}
            </label>
          ))}
        </div>
      </fieldset>
      <h3>API tokens</h3>
      {!self && <p className="muted small">Only their owner creates tokens and sees their secrets. Revoking this user revokes every one of them.</p>}
      {
        <Query state={tokens} what={self ? 'your tokens' : `the tokens of ${user.displayName}`}>
          {(list) =>
            list.length === 0 ? (
              <p className="muted">No token.</p>
            ) : (
              <ul className="tokens">
                {list.map((t) => (
                  <li key={t.id}>
                    <span>
                      <strong>{t.name}</strong> <code>{t.prefix}…</code>
                      <span className="muted small">
                        {' '}
                        {t.lastUsedAt ? `last used ${new Date(t.lastUsedAt).toLocaleString()}` : 'never used'} · expires {new Date(t.expiresAt).toLocaleDateString()}
                      </span>
                    </span>
                    {t.revokedAt ? (
                      <span className="badge bad">revoked</span>
                    ) : (
                      <button type="button" className="danger outline small" onClick={() => onRevokeToken(t.id)}>
                        Revoke token <span className="visually-hidden">{t.name}</span>
                      </button>
                    )}
                  </li>
                ))}
              </ul>
            )
          }
        </Query>
      }
      {self && <NewToken onCreate={onCreateToken} created={createdToken} />}
      <h3>Revoke access</h3>
      {self ? (
        <p className="muted small">You cannot revoke your own account; another administrator can.</p>
      ) : user.revokedAt ? (
        <p className="muted">Revoked on {new Date(user.revokedAt).toLocaleString()}.</p>
      ) : confirm ? (
        <div className="confirm" role="group" aria-label="Confirm revocation">
          <p>This signs {user.displayName} out everywhere, revokes every token and stops every running session within a second. It is recorded in the audit log.</p>
          <div className="actions">
            <button type="button" className="ghost" onClick={() => setConfirm(false)}>
              Cancel
            </button>
            <button type="button" className="danger" onClick={() => onRevokeUser(user.id)}>
              Revoke {user.displayName}
            </button>
          </div>
        </div>
      ) : (
        <button type="button" className="danger outline" onClick={() => setConfirm(true)}>
          Revoke this user…
        </button>
      )}
    </section>
  );
}

function NewUser({ projects, onCreateUser, creating }: UsersPageViewProps) {
  const [form, setForm] = useState({ email: '', displayName: '', role: 'developer' as UserRole, password: '', projectIds: [] as string[] });
  const [problems, setProblems] = useState<Record<string, string>>({});
  const field = (name: 'email' | 'displayName' | 'password', label: string, type = 'text', autoComplete = 'off') => (
    <div className="field">
      <label htmlFor={`nu-${name}`}>{label}</label>
      <input
        id={`nu-${name}`}
        type={type}
        autoComplete={autoComplete}
        value={form[name]}
        onChange={(e) => setForm({ ...form, [name]: e.target.value })}
        aria-invalid={!!problems[name]}
        aria-describedby={problems[name] ? `nu-${name}-err` : undefined}
      />
      {problems[name] && (
        <p className="field-error" id={`nu-${name}-err`}>
          {problems[name]}
        </p>
      )}
    </div>
  );
  return (
    <section className="card" aria-labelledby="new-user-title">
      <h2 id="new-user-title">Add a person</h2>
      <form
        className="form"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const parsed = CreateUserRequest.safeParse(form);
          if (!parsed.success) {
            const next: Record<string, string> = {};
            for (const i of parsed.error.issues)
              next[String(i.path[0])] ??= i.message.startsWith('must') ? `This ${String(i.path[0]) === 'displayName' ? 'name' : String(i.path[0])} ${i.message}.` : i.message;
            setProblems(next);
            return;
          }
          setProblems({});
          onCreateUser(parsed.data);
        }}
      >
        {field('displayName', 'Name')}
        {field('email', 'E-mail', 'email')}
        <div className="field">
          <label htmlFor="nu-role">Role</label>
          <select id="nu-role" value={form.role} onChange={(e) => setForm({ ...form, role: e.target.value as UserRole })}>
            {(Object.keys(ROLE_LABELS) as UserRole[]).map((r) => (
              <option key={r} value={r}>
                {ROLE_LABELS[r]}
              </option>
            ))}
          </select>
        </div>
        {field('password', 'Initial password (12 characters or more)', 'password', 'new-password')}
        <fieldset className="field">
          <legend>Projects</legend>
          <div className="checks">
            {projects.map((pr) => (
              <label key={pr.id} className="checkbox">
                <input
                  type="checkbox"
                  checked={form.projectIds.includes(pr.id)}
                  onChange={(e) => setForm({ ...form, projectIds: e.target.checked ? [...form.projectIds, pr.id] : form.projectIds.filter((x) => x !== pr.id) })}
                />
                {pr.name}
              </label>
            ))}
          </div>
        </fieldset>
        <button type="submit" className="primary" disabled={creating}>
          {creating ? 'Adding…' : 'Add person'}
        </button>
      </form>
    </section>
  );
}

function NewToken({ onCreate, created }: { onCreate: (name: string, days: number) => void; created: string | null }) {
  const [name, setName] = useState('');
  const [days, setDays] = useState(90);
  return (
    <form
      className="new-token"
      onSubmit={(e) => {
        e.preventDefault();
        if (name.trim()) onCreate(name.trim(), days);
      }}
    >
      <div className="field grow">
        <label htmlFor="token-name">New token name</label>
        <input id="token-name" value={name} onChange={(e) => setName(e.target.value)} maxLength={100} placeholder="CI pipeline" />
      </div>
      <div className="field">
        <label htmlFor="token-days">Valid for (days)</label>
        <input id="token-days" type="number" min={1} max={366} value={days} onChange={(e) => setDays(Math.max(1, Math.min(366, Number(e.target.value) || 1)))} />
      </div>
      <button type="submit" disabled={!name.trim()}>
        Create token
      </button>
      {created && (
        <p className="notice token-secret" role="status">
          Copy this token now; it is not shown again: <code>{created}</code>
        </p>
      )}
    </form>
  );
}
