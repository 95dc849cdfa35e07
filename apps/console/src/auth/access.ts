import type { UserRole } from '@lemniscate/contracts';

/**
 * The pages each role is offered. The gateway enforces the real rule on every call (CASL, per
 * project); this table only keeps the console from offering what would be refused. access.spec.ts
 * checks it against the gateway's abilities from libs/policy, so the two cannot drift apart.
 */
export type PageKey = 'dashboard' | 'approvals' | 'sessions' | 'policies' | 'environment' | 'projects' | 'users' | 'audit' | 'execHosts';

interface PageInfo {
  key: PageKey;
  path: string;
  label: string;
  roles: readonly UserRole[];
  /** Other paths that belong to the page: a per-project page lives under `/projects/:projectId/`. */
  also?: RegExp;
}

export const PAGES: readonly PageInfo[] = [
  { key: 'dashboard', path: '/', label: 'Dashboard', roles: ['admin', 'developer', 'security_officer'] },
  { key: 'approvals', path: '/approvals', label: 'Approvals', roles: ['admin', 'developer'] },
  { key: 'sessions', path: '/sessions', label: 'Sessions', roles: ['admin', 'developer', 'security_officer'] },
  { key: 'policies', path: '/policies', label: 'Policies', roles: ['admin', 'developer', 'security_officer'] },
  { key: 'environment', path: '/environment', label: 'Environment', roles: ['admin', 'developer', 'security_officer'], also: /^\/projects\/[^/]+\/environment\/?$/ },
  { key: 'projects', path: '/projects', label: 'Projects', roles: ['admin'] },
  { key: 'users', path: '/users', label: 'Users', roles: ['admin'] },
  { key: 'audit', path: '/audit', label: 'Audit', roles: ['admin', 'security_officer'] },
  { key: 'execHosts', path: '/admin/exec-hosts', label: 'Exec-hosts', roles: ['admin', 'security_officer'] },
];

export function canOpen(role: UserRole, page: PageKey): boolean {
  return PAGES.some((p) => p.key === page && p.roles.includes(role));
}

export function pagesFor(role: UserRole): PageInfo[] {
  return PAGES.filter((p) => p.roles.includes(role));
}

/** Buttons inside a page follow the same rule as the server: only these roles may press them. */
export const ACTIONS = {
  stopSession: ['admin', 'developer'],
  revokeSession: ['admin'],
  answerApproval: ['admin', 'developer'],
  publishPolicy: ['admin'],
  /** Members only: the gateway refuses a project the person is not a member of, whatever the role. */
  prepareEnvironment: ['admin', 'developer'],
  exportAudit: ['admin', 'security_officer'],
  drainExecHost: ['admin'],
} as const satisfies Record<string, readonly UserRole[]>;

export function canDo(role: UserRole, action: keyof typeof ACTIONS): boolean {
  return (ACTIONS[action] as readonly UserRole[]).includes(role);
}

export const ROLE_LABELS: Record<UserRole, string> = {
  admin: 'Administrator',
  developer: 'Developer',
  security_officer: 'Security officer',
};
