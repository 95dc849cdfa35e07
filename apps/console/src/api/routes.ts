/**
 * Every gateway path the console calls, relative to /api/v1, in one place so a route renamed on
 * the server is one edit here. Paths take ids already validated by the contracts' `Id` shape.
 */
const e = encodeURIComponent;

export const routes = {
  login: '/auth/login',
  logout: '/auth/logout',
  me: '/auth/me',

  projects: '/projects',
  members: (projectId: string) => `/projects/${e(projectId)}/members`,
  member: (projectId: string, userId: string) => `/projects/${e(projectId)}/members/${e(userId)}`,

  policyVersions: (projectId: string) => `/projects/${e(projectId)}/policy/versions`,
  policyVersion: (projectId: string, version: number) => `/projects/${e(projectId)}/policy/versions/${version}`,
  policyDiff: (projectId: string) => `/projects/${e(projectId)}/policy/diff`,
  policyPublish: (projectId: string) => `/projects/${e(projectId)}/policy`,
  policyRollback: (projectId: string) => `/projects/${e(projectId)}/policy/rollback`,
  policyDryRun: (projectId: string) => `/projects/${e(projectId)}/policy/dry-run`,

  approvals: '/approvals',
  approve: (id: string) => `/approvals/${e(id)}/approve`,
  reject: (id: string) => `/approvals/${e(id)}/reject`,

  sessions: '/sessions',
  session: (id: string) => `/sessions/${e(id)}`,
  sessionToolCalls: (id: string) => `/sessions/${e(id)}/tool-calls`,
  stopSession: (id: string) => `/sessions/${e(id)}/stop`,
  revokeSession: (id: string) => `/sessions/${e(id)}/revoke`,

  users: '/users',
  revokeUser: (id: string) => `/users/${e(id)}/revoke`,
  tokens: '/auth/tokens',
  token: (id: string) => `/auth/tokens/${e(id)}`,

  audit: '/audit',
  auditVerify: '/audit/verify',
  auditKinds: '/audit/kinds',
  auditExport: '/audit/export',

  dashboard: '/stats/dashboard',

  events: '/api/v1/events',
} as const;
