import { SetMetadata, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuditService } from '../audit/audit.service';
import { isSafeMethod } from '../auth/auth.service';
import { AppError, ErrorCode } from '../common/errors';

const ALLOWED_UNRECORDED = 'lemniscate:allowed-when-unrecorded';

/**
 * A route that stays open while no audit sink can record, with the reason: signing out, and the
 * exec-hosts' heartbeats (refusing those would end every running session as lost).
 */
export const AllowedWhenUnrecorded = (why: string) => SetMetadata(ALLOWED_UNRECORDED, why);

/**
 * The refusal mode of the audit sinks (`onUnrecorded: refuse`): while no sink can record, every
 * request that would change something is refused before its handler runs, so nothing is done that
 * the SIEM cannot be told about. Reads stay open, so people can see why. Runs after AuthGuard.
 */
@Injectable()
export class AuditRecordingGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly audit: AuditService,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    if (context.getType() !== 'http') return true;
    const req = context.switchToHttp().getRequest<{ method: string }>();
    if (isSafeMethod(req.method)) return true;
    if (this.reflector.getAllAndOverride<string | undefined>(ALLOWED_UNRECORDED, [context.getHandler(), context.getClass()])) return true;
    const refusal = this.audit.refusal();
    if (refusal) throw new AppError(ErrorCode.AuditUnrecorded, refusal);
    return true;
  }
}
