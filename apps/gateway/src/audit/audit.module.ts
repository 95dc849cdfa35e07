import { Module } from '@nestjs/common';
import { AuditService } from './audit.service';

/** Needs DatabaseModule (global) for AuditLogRepository. */
@Module({
  providers: [AuditService],
  exports: [AuditService],
})
export class AuditModule {}
