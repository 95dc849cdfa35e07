import { defineAbilitiesFor, subject, APP_ACTIONS, type AbilityUser, type AppAction, type AppSubjectName, type SubjectFields } from '../../src/abilities';

const MEMBER = 'p-member';
const OTHER = 'p-other';
const memberships = [{ projectId: MEMBER }];

const admin: AbilityUser = { id: 'u-admin', role: 'admin' };
const dev: AbilityUser = { id: 'u-dev', role: 'developer' };
const officer: AbilityUser = { id: 'u-sec', role: 'security_officer' };

/** One instance of every subject, in the member project or another, owned by `owner`. */
function samples(projectId: string, owner: string): { [K in AppSubjectName]: SubjectFields[K] } {
  return {
    Project: { id: projectId },
    Policy: { projectId },
    Session: { projectId, userId: owner },
    Approval: { projectId, sessionUserId: owner },
    Audit: { projectId },
    User: { id: owner },
    Token: { userId: owner },
    ExecHost: { id: 'exec-host-1' },
  };
}

function can(user: AbilityUser, action: AppAction, type: AppSubjectName, fields: object, ms = memberships): boolean {
  return defineAbilitiesFor(user, ms).can(action, subject(type, fields as never) as never);
}

/** Every (action, subject) the role may perform on its own things in its member project. */
const expected: Record<AbilityUser['role'], string[]> = {
  admin: APP_ACTIONS.flatMap((a) => ['Project', 'Policy', 'Session', 'Approval', 'Audit', 'User', 'Token', 'ExecHost'].map((s) => `${a} ${s}`)),
  developer: [
    'read Project',
    'read Policy',
    'create Session',
    'read Session',
    'stop Session',
    'read Approval',
    'answer Approval',
    'read User',
    'read Token',
    'create Token',
    'revoke Token',
    'delete Token',
  ],
  security_officer: [
    'read Project',
    'read Policy',
    'read Session',
    'read Approval',
    'read Audit',
    'export Audit',
    'verify Audit',
    'read User',
    'read ExecHost',
    'read Token',
    'create Token',
    'revoke Token',
    'delete Token',
  ],
};

describe('defineAbilitiesFor', () => {
  describe.each([admin, dev, officer])('$role in a member project, on its own things', (user) => {
    const subjects = samples(MEMBER, user.id);
    const cases = APP_ACTIONS.filter((a) => a !== 'manage').flatMap((action) => (Object.keys(subjects) as AppSubjectName[]).map((type) => ({ action, type })));
    it.each(cases)('$action $type', ({ action, type }) => {
      const allowed = expected[user.role].includes(`${action} ${type}`);
      expect(can(user, action, type, subjects[type])).toBe(allowed);
    });
  });

  describe.each([admin, dev, officer])('$role outside its projects', (user) => {
    const subjects = samples(OTHER, user.id);
    it.each(APP_ACTIONS.filter((a) => a !== 'manage'))('may not %s any project data of a project it is not a member of', (action) => {
      for (const type of ['Project', 'Policy', 'Session', 'Approval', 'Audit'] as const) {
        // Creating a new project is the one thing an administrator does outside its projects.
        if (user.role === 'admin' && action === 'create' && type === 'Project') continue;
        expect(can(user, action, type, subjects[type])).toBe(false);
      }
    });
  });

  it('a user with no membership reaches no project data', () => {
    for (const user of [admin, dev, officer]) {
      expect(can(user, 'read', 'Policy', { projectId: MEMBER }, [])).toBe(false);
      expect(can(user, 'read', 'Session', { projectId: MEMBER, userId: user.id }, [])).toBe(false);
    }
  });

  it("a developer can neither read, stop nor answer a colleague's session in the same project", () => {
    const colleague = samples(MEMBER, 'u-colleague');
    expect(can(dev, 'read', 'Session', colleague.Session)).toBe(false);
    expect(can(dev, 'stop', 'Session', colleague.Session)).toBe(false);
    expect(can(dev, 'answer', 'Approval', colleague.Approval)).toBe(false);
    expect(can(dev, 'create', 'Session', colleague.Session)).toBe(false);
  });

  it("a developer cannot touch another person's token or profile", () => {
    expect(can(dev, 'revoke', 'Token', { userId: 'u-colleague' })).toBe(false);
    expect(can(dev, 'read', 'User', { id: 'u-colleague' })).toBe(false);
  });

  it("a security officer reads everyone's sessions in its projects but changes nothing", () => {
    const colleague = samples(MEMBER, 'u-colleague');
    expect(can(officer, 'read', 'Session', colleague.Session)).toBe(true);
    for (const action of ['create', 'update', 'delete', 'stop', 'publish', 'answer', 'revoke'] as const) {
      expect(can(officer, action, 'Session', colleague.Session)).toBe(false);
      expect(can(officer, action, 'Policy', colleague.Policy)).toBe(false);
      expect(can(officer, action, 'Approval', colleague.Approval)).toBe(false);
    }
  });

  it('an administrator manages every user and token, and creates projects', () => {
    expect(can(admin, 'update', 'User', { id: 'u-anyone' })).toBe(true);
    expect(can(admin, 'revoke', 'Token', { userId: 'u-anyone' })).toBe(true);
    expect(defineAbilitiesFor(admin, []).can('create', 'Project')).toBe(true);
    expect(defineAbilitiesFor(dev, memberships).can('create', 'Project')).toBe(false);
  });

  it('an administrator publishes policy and stops sessions only in its projects', () => {
    expect(can(admin, 'publish', 'Policy', { projectId: MEMBER })).toBe(true);
    expect(can(admin, 'publish', 'Policy', { projectId: OTHER })).toBe(false);
    expect(can(admin, 'stop', 'Session', { projectId: OTHER, userId: 'u-x' })).toBe(false);
  });

  it('a role it does not know gets no project access', () => {
    const stranger = { id: 'u-x', role: 'root' } as unknown as AbilityUser;
    expect(can(stranger, 'read', 'Policy', { projectId: MEMBER })).toBe(false);
  });

  it("subject() leaves the caller's object untouched", () => {
    const row = Object.freeze({ projectId: MEMBER });
    expect(() => subject('Policy', row)).not.toThrow();
    expect(Object.keys(row)).toEqual(['projectId']);
  });
});
