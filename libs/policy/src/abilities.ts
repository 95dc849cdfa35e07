import type { ForcedSubject, MongoAbility } from '@casl/ability/dist/types';
import { AbilityBuilder, createMongoAbility, caslSubject } from './casl';

/**
 * Who may do what, per project (SPEC C1). The gateway asks these abilities on every route; the
 * console only hides what the server would refuse anyway.
 */
export type Role = 'admin' | 'developer' | 'security_officer';
export const ROLES: readonly Role[] = ['admin', 'developer', 'security_officer'];

export interface AbilityUser {
  id: string;
  role: Role;
}

export interface ProjectMembership {
  projectId: string;
}

export type AppAction = 'manage' | 'read' | 'create' | 'update' | 'delete' | 'publish' | 'answer' | 'stop' | 'revoke' | 'export' | 'verify';

export const APP_ACTIONS: readonly AppAction[] = ['manage', 'read', 'create', 'update', 'delete', 'publish', 'answer', 'stop', 'revoke', 'export', 'verify'];

/** The fields each subject must carry for the conditions below to be evaluated. */
export interface SubjectFields {
  Project: { id: string };
  Policy: { projectId: string };
  Session: { projectId: string; userId: string };
  Approval: { projectId: string; sessionUserId: string };
  Audit: { projectId: string };
  User: { id: string };
  Token: { userId: string };
  /** An exec-host of the pool (the platform's infrastructure, not a project's). */
  ExecHost: { id: string };
}

export type AppSubjectName = keyof SubjectFields;

type TaggedSubject = { [K in AppSubjectName]: SubjectFields[K] & ForcedSubject<K> }[AppSubjectName];
export type AppSubject = AppSubjectName | TaggedSubject | 'all';
export type AppAbility = MongoAbility<[AppAction, AppSubject]>;

/**
 * Tags plain data (a database row, a request body) with its subject type so conditions apply.
 * The fields are copied: CASL marks the object it is given, and rows may be frozen or shared.
 */
export function subject<T extends AppSubjectName>(type: T, fields: SubjectFields[T]): SubjectFields[T] & ForcedSubject<T> {
  return caslSubject(type, { ...fields }) as SubjectFields[T] & ForcedSubject<T>;
}

export function defineAbilitiesFor(user: AbilityUser, memberships: ProjectMembership[]): AppAbility {
  const { can, build } = new AbilityBuilder<AppAbility>(createMongoAbility);
  const projectIds = [...new Set(memberships.map((m) => m.projectId))];
  const inProjects = { $in: projectIds };

  // A personal API token is the person's own credential, not project data: every role may see,
  // create and revoke its own, and nobody else's unless they administer users.
  can(['read', 'create', 'revoke', 'delete'], 'Token', { userId: user.id });
  can('read', 'User', { id: user.id });

  switch (user.role) {
    case 'admin':
      // Creating a project is how an administrator becomes a member of it.
      can('create', 'Project');
      can('manage', 'Project', { id: inProjects });
      can('manage', 'Policy', { projectId: inProjects });
      can('manage', 'Session', { projectId: inProjects });
      can('manage', 'Approval', { projectId: inProjects });
      can('manage', 'Audit', { projectId: inProjects });
      can('manage', 'User');
      can('manage', 'Token');
      can('manage', 'ExecHost');
      break;
    case 'developer':
      can('read', 'Project', { id: inProjects });
      can('read', 'Policy', { projectId: inProjects });
      can('create', 'Session', { projectId: inProjects, userId: user.id });
      can(['read', 'stop'], 'Session', { projectId: inProjects, userId: user.id });
      can(['read', 'answer'], 'Approval', { projectId: inProjects, sessionUserId: user.id });
      break;
    case 'security_officer':
      can('read', 'Project', { id: inProjects });
      can('read', 'Policy', { projectId: inProjects });
      can('read', 'Session', { projectId: inProjects });
      can('read', 'Approval', { projectId: inProjects });
      can(['read', 'export', 'verify'], 'Audit', { projectId: inProjects });
      // Where sessions run is part of what an officer reviews; changing it is not theirs.
      can('read', 'ExecHost');
      break;
    default: {
      // A role this code does not know gets nothing beyond its own token and profile.
      const unknownRole: never = user.role;
      void unknownRole;
    }
  }
  return build();
}
