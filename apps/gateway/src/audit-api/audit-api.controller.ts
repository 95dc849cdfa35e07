import { Controller, Get } from '@nestjs/common';
import { AuditEntryView, AuditExportQuery, AuditKindsView, AuditListQuery, AuditVerificationView, AuditVerifyQuery } from '@lemniscate/contracts';
import { z } from 'zod';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZQuery } from '../common/zod-validation';
import { AuditApiService } from './audit-api.service';

@Controller('audit')
export class AuditApiController {
  constructor(private readonly audit: AuditApiService) {}

  @Get()
  @Can('read', 'Audit')
  @Returns(z.array(AuditEntryView), 'Audit entries, filtered by project, actor, session, kind and time')
  list(@CurrentPrincipal() principal: Principal, @ZQuery(AuditListQuery) query: AuditListQuery) {
    return this.audit.list(principal, query);
  }

  @Get('kinds')
  @Can('read', 'Audit')
  @Returns(AuditKindsView, 'The kinds of entry the gateway records: the only values the kind filter accepts')
  kinds() {
    return this.audit.kinds();
  }

  @Get('verify')
  @Can('verify', 'Audit')
  @Returns(AuditVerificationView, 'Walk the hash chain and name the first altered, removed or reordered entry')
  verify(@CurrentPrincipal() principal: Principal, @ZQuery(AuditVerifyQuery) query: AuditVerifyQuery) {
    return this.audit.verify(principal, query);
  }

  @Get('export')
  @Can('export', 'Audit')
  @Returns(null, 'Stream the matching entries as JSONL or CSV')
  export(@CurrentPrincipal() principal: Principal, @ZQuery(AuditExportQuery) query: AuditExportQuery) {
    return this.audit.export(principal, query);
  }
}
