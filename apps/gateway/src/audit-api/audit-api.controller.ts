import { Controller, Get } from '@nestjs/common';
import { AuditExportQuery, AuditFilterQuery, AuditListQuery, AuditVerifyQuery, GatewayRoutes as R } from '@lemniscate/contracts';
import { Can, CurrentPrincipal } from '../auth/permission.decorator';
import type { Principal } from '../auth/principal';
import { Returns, ZQuery } from '../common/zod-validation';
import { AuditApiService } from './audit-api.service';

@Controller('audit')
export class AuditApiController {
  constructor(private readonly audit: AuditApiService) {}

  @Get()
  @Can('read', 'Audit')
  @Returns(R.listAudit.response, 'Audit entries, filtered by project, actor, session, kind and time', R.listAudit.status)
  list(@CurrentPrincipal() principal: Principal, @ZQuery(R.listAudit.query) query: AuditListQuery) {
    return this.audit.list(principal, query);
  }

  @Get('kinds')
  @Can('read', 'Audit')
  @Returns(R.auditKinds.response, 'The kinds of entry the gateway records: the only values the kind filter accepts', R.auditKinds.status)
  kinds() {
    return this.audit.kinds();
  }

  @Get('count')
  @Can('read', 'Audit')
  @Returns(R.auditCount.response, 'How many entries match a filter, within the projects the reader may read', R.auditCount.status)
  count(@CurrentPrincipal() principal: Principal, @ZQuery(R.auditCount.query) query: AuditFilterQuery) {
    return this.audit.count(principal, query);
  }

  @Get('verify')
  @Can('verify', 'Audit')
  @Returns(R.auditVerify.response, 'Walk the hash chain and name the first altered, removed or reordered entry', R.auditVerify.status)
  verify(@CurrentPrincipal() principal: Principal, @ZQuery(R.auditVerify.query) query: AuditVerifyQuery) {
    return this.audit.verify(principal, query);
  }

  @Get('export')
  @Can('export', 'Audit')
  @Returns(null, 'Stream the matching entries as JSONL or CSV', R.auditExport.status)
  export(@CurrentPrincipal() principal: Principal, @ZQuery(R.auditExport.query) query: AuditExportQuery) {
    return this.audit.export(principal, query);
  }
}
