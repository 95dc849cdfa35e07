import { Injectable } from '@nestjs/common';
import type { AppAction, AppSubject, AppSubjectName, SubjectFields } from '@lemniscate/policy';
import { subject } from '@lemniscate/policy';
import { AuditService } from '../audit/audit.service';
import { AppError, ErrorCode } from '../common/errors';
import { MetricsService } from '../metrics/metrics.service';
import { actorOf, type Principal } from './principal';

const NOUNS: Record<AppSubjectName, string> = {
  Project: 'projects',
  Policy: 'policies',
  Session: 'sessions',
  Approval: 'approvals',
  Audit: 'the audit log',
  User: 'users',
  Token: 'API tokens',
  ExecHost: 'exec-hosts',
};

const SINGULAR: Record<AppSubjectName, string> = {
  Project: 'project',
  Policy: 'policy',
  Session: 'session',
  Approval: 'approval',
  Audit: 'audit entry',
  User: 'user',
  Token: 'API token',
  ExecHost: 'exec-host',
};

const ROLE_LABEL = { admin: 'an administrator', developer: 'a developer', security_officer: 'a security officer' } as const;

/**
 * Authorisation with CASL abilities from libs/policy (STYLE.md §5): the guard asks per route, the
 * services ask again per record. Every refusal is audited and explained.
 */
@Injectable()
export class AccessService {
  constructor(
    private readonly audit: AuditService,
    private readonly metrics: MetricsService,
  ) {}

  /** Route level: may this role ever do `action` on this kind of thing? */
  async requireRoute(principal: Principal, action: AppAction, subjectName: AppSubjectName, route: string): Promise<void> {
    if (principal.ability.can(action, subjectName)) return;
    await this.deny(principal, action, subjectName, { route }, `As ${ROLE_LABEL[principal.role]} you may not ${action} ${NOUNS[subjectName]}.`);
  }

  /** Record level: may this person do `action` on this particular record? */
  async require<T extends AppSubjectName>(principal: Principal, action: AppAction, type: T, fields: SubjectFields[T]): Promise<void> {
    if (principal.ability.can(action, subjectOf(type, fields))) return;
    await this.deny(principal, action, type, fields, `As ${ROLE_LABEL[principal.role]} you may not ${action} this ${SINGULAR[type]}: it is outside what your role and project memberships allow.`);
  }

  can<T extends AppSubjectName>(principal: Principal, action: AppAction, type: T, fields: SubjectFields[T]): boolean {
    return principal.ability.can(action, subjectOf(type, fields));
  }

  private async deny(principal: Principal, action: AppAction, subjectName: AppSubjectName, context: Record<string, unknown>, sentence: string): Promise<never> {
    this.metrics.deniedRequests.inc({ code: ErrorCode.Forbidden });
    const projectId = typeof context.projectId === 'string' ? context.projectId : null;
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'authz.denied',
      projectId,
      payload: { action, subject: subjectName, role: principal.role, via: principal.via, context },
    });
    throw new AppError(ErrorCode.Forbidden, sentence);
  }
}

/** The generic `T` defeats TypeScript's union narrowing; the value is a tagged subject of type T. */
function subjectOf<T extends AppSubjectName>(type: T, fields: SubjectFields[T]): AppSubject {
  return subject(type, fields) as unknown as AppSubject;
}
