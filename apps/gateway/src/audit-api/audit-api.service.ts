import { Injectable, StreamableFile } from '@nestjs/common';
import type { AuditEntryView, AuditExportQuery, AuditFilterQuery, AuditListQuery, AuditVerificationView, AuditVerifyQuery } from '@lemniscate/contracts';
import { AuditService, type AuditFilter } from '../audit/audit.service';
import { AccessService } from '../auth/access.service';
import { actorOf, type Principal } from '../auth/principal';

/**
 * The audit log over HTTP (T3). Reading is for administrators and security officers; with a project
 * filter it is checked against their memberships. Without one they read the whole log, because
 * platform events (sign-ins, refusals, user revocations) belong to no project.
 */
@Injectable()
export class AuditApiService {
  constructor(
    private readonly audit: AuditService,
    private readonly access: AccessService,
  ) {}

  async list(principal: Principal, query: AuditListQuery): Promise<AuditEntryView[]> {
    const filter = await this.filter(principal, 'read', query);
    return this.audit.list(filter, { order: query.order, after: query.after, limit: query.limit });
  }

  async verify(principal: Principal, query: AuditVerifyQuery): Promise<AuditVerificationView> {
    const anchor = query.anchorSeq !== undefined && query.anchorHash !== undefined ? { seq: query.anchorSeq, hash: query.anchorHash } : undefined;
    const result = await this.audit.verify(anchor);
    await this.audit.append({ actor: actorOf(principal), kind: 'audit.verify', payload: { ok: result.ok, checked: result.checked, ...(result.ok ? {} : { seq: result.seq, problem: result.problem }) } });
    return result;
  }

  async export(principal: Principal, query: AuditExportQuery): Promise<StreamableFile> {
    const filter = await this.filter(principal, 'export', query);
    await this.audit.append({ actor: actorOf(principal), kind: 'audit.export', projectId: query.projectId ?? null, payload: { format: query.format, filter: query } });
    const csv = query.format === 'csv';
    return new StreamableFile(this.audit.exportStream(filter, query.format), {
      type: csv ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
      disposition: `attachment; filename="lemniscate-audit.${query.format}"`,
    });
  }

  private async filter(principal: Principal, action: 'read' | 'export', query: AuditFilterQuery): Promise<AuditFilter> {
    if (query.projectId) await this.access.require(principal, action, 'Audit', { projectId: query.projectId });
    return {
      projectId: query.projectId,
      actor: query.actor,
      sessionId: query.sessionId,
      kinds: query.kind?.split(','),
      from: query.from ? new Date(query.from) : undefined,
      to: query.to ? new Date(query.to) : undefined,
    };
  }
}
