import { Controller, Get } from '@nestjs/common';
import { GatewayRoutes as R } from '@lemniscate/contracts';
import { Can } from '../auth/permission.decorator';
import { Returns } from '../common/zod-validation';
import { AuditSinksService } from './audit-sinks.service';

/**
 * Where the audit log is streamed, and whether each sink keeps up. Sinks are the deployment's
 * infrastructure, like exec-hosts: administrators and security officers read them, developers do not.
 */
@Controller('audit/sinks')
export class AuditSinksController {
  constructor(private readonly sinks: AuditSinksService) {}

  @Get()
  @Can('read', 'ExecHost')
  @Returns(R.auditSinks.response, "The deployment's audit sinks: where each sends, how far behind it is, its last failure", R.auditSinks.status)
  view() {
    return this.sinks.view();
  }
}
