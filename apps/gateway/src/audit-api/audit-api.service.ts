import { Injectable, StreamableFile } from '@nestjs/common';
import { AUDIT_KINDS, type AuditCountView, type AuditKindsView } from '@lemniscate/contracts';
import type { AuditEntryView, AuditExportQuery, AuditFilterQuery, AuditListQuery, AuditVerificationView, AuditVerifyQuery } from '@lemniscate/contracts';
import { actorIdentities } from '../audit/actor-identities';
import { AuditService, type AuditEntry, type AuditFilter } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { UsersRepository } from '../db/repositories/users.repository';
import { MetricsService } from '../metrics/metrics.service';

const USER_ACTOR = /^user:([^:]+)$/;
const KNOWN_KINDS: ReadonlySet<string> = new Set(AUDIT_KINDS);

/**
 * The audit log over HTTP (T3). Reading is for administrators and security officers, and every read
 * is scoped to the projects the reader is a member of, with or without a filter (C1): a project
 * filter outside those memberships is refused, and no filter means "my projects", never "all".
 * Entries that belong to no project (sign-ins, failed sign-ins, user creation and revocation) are
 * about people, which administrators manage organisation-wide: administrators read them, security
 * officers do not. There is no organisation-wide auditor by default.
 */
@Injectable()
export class AuditApiService {
  constructor(
    private readonly audit: AuditService,
    private readonly access: AccessService,
    private readonly users: UsersRepository,
    private readonly metrics: MetricsService,
  ) {}

  async list(principal: Principal, query: AuditListQuery): Promise<AuditEntryView[]> {
    const filter = await this.filter(principal, 'read', query);
    const entries = await this.audit.list(filter, { order: query.order, after: query.after, limit: query.limit });
    return this.withIdentities(entries);
  }

  async count(principal: Principal, query: AuditFilterQuery): Promise<AuditCountView> {
    return { count: await this.audit.count(await this.filter(principal, 'read', query)) };
  }

  kinds(): AuditKindsView {
    return { kinds: [...AUDIT_KINDS] };
  }

  async verify(principal: Principal, query: AuditVerifyQuery): Promise<AuditVerificationView> {
    const anchor = query.anchorSeq !== undefined && query.anchorHash !== undefined ? { seq: query.anchorSeq, hash: query.anchorHash } : undefined;
    const result = await this.audit.verify(anchor);
    if (!result.ok) this.metrics.auditVerifyFailures.inc();
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'audit.verify',
      payload: { ok: result.ok, checked: result.checked, ...(result.ok ? {} : { seq: result.seq, problem: result.problem }) },
    });
    return result;
  }

  async export(principal: Principal, query: AuditExportQuery): Promise<StreamableFile> {
    const filter = await this.filter(principal, 'export', query);
    await this.audit.record({ actor: actorOf(principal), kind: 'audit.export', projectId: query.projectId ?? null, payload: { format: query.format, filter: query } });
    const csv = query.format === 'csv';
    return new StreamableFile(
      this.audit.exportStream(filter, query.format, (actors) => actorIdentities(this.users, actors), query.afterSeq),
      {
        type: csv ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
        disposition: `attachment; filename="lemniscate-audit.${query.format}"`,
      },
    );
  }

  /** Resolves `user:<id>` actors to the person's email and display name (one lookup per person). */
  private async withIdentities(entries: AuditEntry[]): Promise<AuditEntryView[]> {
    const people = new Map<string, AuditEntryView['actorIdentity']>();
    for (const e of entries) {
      const id = USER_ACTOR.exec(e.actor)?.[1];
      if (!id || people.has(id)) continue;
      const user = await this.users.findById(id);
      people.set(id, user ? { userId: user.id, email: user.email, displayName: user.displayName } : null);
    }
    return entries.map((e) => ({ ...e, actorIdentity: people.get(USER_ACTOR.exec(e.actor)?.[1] ?? '') ?? null }));
  }

  /** An actor filter may name a person by email (`ana@example.com` or `user:ana@example.com`). */
  private async actorOf(actor: string | undefined): Promise<string | undefined> {
    if (actor === undefined) return undefined;
    const email = /^(?:user:)?([^:\s]+@[^:\s]+)$/.exec(actor)?.[1];
    if (!email) return actor;
    const user = await this.users.findByEmail(email);
    // An email nobody has matches no entry; saying so would let a reader probe for accounts.
    return user ? `user:${user.id}` : `user:unknown:${email}`;
  }

  private async filter(principal: Principal, action: 'read' | 'export', query: AuditFilterQuery): Promise<AuditFilter> {
    const kinds = query.kind?.split(',');
    const unknown = kinds?.filter((k) => !KNOWN_KINDS.has(k)) ?? [];
    if (unknown.length > 0) {
      throw new AppError(
        ErrorCode.ValidationFailed,
        `The gateway records no audit entries of kind ${unknown.map((k) => `"${k}"`).join(', ')}; the kinds it records are listed by GET /api/v1/audit/kinds (for example "session.instruction" or "auth.login_failed").`,
        { field: 'query.kind' },
      );
    }
    if (query.projectId) await this.access.require(principal, action, 'Audit', { projectId: query.projectId });
    const readable = principal.projectIds.filter((projectId) => this.access.can(principal, action, 'Audit', { projectId }));
    return {
      projectId: query.projectId,
      projectIds: readable,
      orUnscoped: query.projectId === undefined && this.access.can(principal, 'manage', 'User', { id: '' }),
      actor: await this.actorOf(query.actor),
      sessionId: query.sessionId,
      kinds,
      from: query.from ? new Date(query.from) : undefined,
      to: query.to ? new Date(query.to) : undefined,
    };
  }
}
