import { defineAbilitiesFor, subject, type AppAction, type AppSubject, type AppSubjectName } from '@lemniscate/policy';
import type { UserRole } from '@lemniscate/contracts';
import { ACTIONS, PAGES, canOpen, pagesFor, type PageKey } from '../../../src/auth/access';

// What the gateway checks for each page and button, expressed with libs/policy's abilities.
const PROJECT = 'p1';
const ME = 'u1';
const pageNeeds: Record<PageKey, [AppAction, AppSubjectName, Record<string, string>]> = {
  dashboard: ['read', 'Project', { id: PROJECT }],
  approvals: ['answer', 'Approval', { projectId: PROJECT, sessionUserId: ME }],
  sessions: ['read', 'Session', { projectId: PROJECT, userId: ME }],
  policies: ['read', 'Policy', { projectId: PROJECT }],
  environment: ['read', 'Project', { id: PROJECT }],
  projects: ['create', 'Project', {}],
  users: ['manage', 'User', { id: 'someone-else' }],
  audit: ['read', 'Audit', { projectId: PROJECT }],
  execHosts: ['read', 'ExecHost', { id: 'exec-host-1' }],
};
const actionNeeds: Record<keyof typeof ACTIONS, [AppAction, AppSubjectName, Record<string, string>]> = {
  stopSession: ['stop', 'Session', { projectId: PROJECT, userId: ME }],
  revokeSession: ['revoke', 'Session', { projectId: PROJECT, userId: 'someone-else' }],
  answerApproval: ['answer', 'Approval', { projectId: PROJECT, sessionUserId: ME }],
  publishPolicy: ['publish', 'Policy', { projectId: PROJECT }],
  // libs/policy has no subject of its own for an environment: preparing one is what starting a
  // session in the project needs first, and the same members (administrators, developers) may do it.
  prepareEnvironment: ['create', 'Session', { projectId: PROJECT, userId: ME }],
  exportAudit: ['export', 'Audit', { projectId: PROJECT }],
  drainExecHost: ['update', 'ExecHost', { id: 'exec-host-1' }],
};

const roles: UserRole[] = ['admin', 'developer', 'security_officer'];

function serverAllows(role: UserRole, [action, type, fields]: [AppAction, AppSubjectName, Record<string, string>]): boolean {
  const ability = defineAbilitiesFor({ id: ME, role }, [{ projectId: PROJECT }]);
  // The field sets above match SubjectFields[type]; the cast only widens the key type.
  return ability.can(action, subject(type, fields as never) as AppSubject);
}

describe('console navigation matches the gateway abilities', () => {
  for (const role of roles) {
    for (const page of PAGES) {
      it(`${role} ${canOpen(role, page.key) ? 'is' : 'is not'} offered ${page.label}`, () => {
        expect(canOpen(role, page.key)).toBe(serverAllows(role, pageNeeds[page.key]));
      });
    }
    for (const [action, needs] of Object.entries(actionNeeds)) {
      it(`${role}: the ${action} button follows the server`, () => {
        expect((ACTIONS[action as keyof typeof ACTIONS] as readonly string[]).includes(role)).toBe(serverAllows(role, needs));
      });
    }
  }

  it('a developer reads policies but is not offered publishing nor the user list', () => {
    expect(pagesFor('developer').map((p) => p.key)).toEqual(['dashboard', 'approvals', 'sessions', 'policies', 'environment']);
    expect(ACTIONS.publishPolicy).toEqual(['admin']);
  });

  it('everyone follows a project environment; administrators and developers prepare it, security officers only read', () => {
    expect(pagesFor('security_officer').some((p) => p.key === 'environment')).toBe(true);
    expect(ACTIONS.prepareEnvironment).toEqual(['admin', 'developer']);
  });

  it('a security officer opens policies, as the role table says (reads projects, policies, sessions, approvals)', () => {
    expect(pagesFor('security_officer').map((p) => p.key)).toEqual(['dashboard', 'sessions', 'policies', 'environment', 'audit', 'execHosts']);
  });
});
