import { Controller, Get } from '@nestjs/common';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { Can } from '../auth/permission.decorator';
import { Returns } from '../common/zod-validation';
import { AuditSinksService } from './audit-sinks.service';

/**
 * Where the audit log is streamed, and whether each sink keeps up. Sinks are the deployment's
 * infrastructure and their counts move with every project's activity, so only administrators (who
 * manage the deployment's exec-hosts) read them; a security officer sees the sinks in the SIEM itself.
 */
@Controller('audit/sinks')
export class AuditSinksController {
  constructor(private readonly sinks: AuditSinksService) {}

  @Get()
  @Can('update', 'ExecHost')
  @Returns(R.auditSinks.response, "The deployment's audit sinks: where each sends, how far behind it is, its last failure", R.auditSinks.status)
  view() {
    return this.sinks.view();
  }
}
