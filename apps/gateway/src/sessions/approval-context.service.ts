import { Inject, Injectable } from '@nestjs/common';
import type { ApprovalContextQuery, ApprovalContextView, ApprovalPayload } from '@lemniscate/contracts';
import type { Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { EXEC_HOST, ExecHostCallError, type ExecHostPort } from '../exec-host/exec-host.port';
import { changeOf, filePatchOf, linesOf, oldSideOf } from './approval-context';
import { ApprovalsService } from './approvals.service';

/**
 * The lines around a change's hunks, as a pull request's review expands them. Only the files the
 * change itself names are read, from the session's sandbox, by whoever may read the approval; the
 * file is checked against the change before any line leaves, so a file that moved on since is said
 * to have moved on rather than shown out of step.
 */
@Injectable()
export class ApprovalContextService {
  constructor(
    private readonly approvals: ApprovalsService,
    @Inject(EXEC_HOST) private readonly execHost: ExecHostPort,
  ) {}

  async context(principal: Principal, approvalId: string, query: ApprovalContextQuery): Promise<ApprovalContextView> {
    const { approval, session } = await this.approvals.readable(principal, approvalId);

    const payload = approval.payload as ApprovalPayload;
    if (!('diff' in payload)) {
      throw new AppError(ErrorCode.ValidationFailed, `Approval ${approval.id} is a ${approval.kind === 'command' ? 'command' : approval.kind}, not a change to files: it has no lines around it.`);
    }
    const patch = filePatchOf(payload.diff, query.path);
    if (!patch) throw new AppError(ErrorCode.NotFound, `The change of approval ${approval.id} does not touch ${query.path}; only the files it changes can be read here.`);
    const change = changeOf(patch);
    if (change !== 'modified') {
      throw new AppError(ErrorCode.ValidationFailed, `${query.path} is ${change === 'added' ? 'created' : 'deleted'} whole by this change: every line of it is already in the diff.`);
    }
    if (session.status !== 'running' || session.sandboxId === null) {
      throw new AppError(
        ErrorCode.Conflict,
        `Session ${session.id} has ended (${session.status}) and its sandbox is gone, so the lines around the change cannot be read any more; the diff itself is all that was kept.`,
      );
    }

    let read;
    try {
      read = await this.execHost.read(session.sandboxId, { path: query.path });
    } catch (err) {
      if (err instanceof ExecHostCallError) {
        if (err.code === 'file_not_found') throw moved(query.path);
        if (err.code === 'file_too_large') throw new AppError(ErrorCode.ValidationFailed, `${query.path} is too large to read around its change here; the diff shows what changed.`);
        if (err.code === 'sandbox_not_found' || err.code === 'sandbox_lost')
          throw new AppError(ErrorCode.Conflict, `The sandbox of session ${session.id} is gone, so the lines around the change cannot be read.`);
        if (err.code === 'binary_file') throw new AppError(ErrorCode.ValidationFailed, `${query.path} is a binary file: it has no lines to show.`);
        if (err.code === 'engine_unavailable')
          throw new AppError(ErrorCode.ExecHostUnavailable, `The exec-host of session ${session.id} cannot be reached, so the lines around the change cannot be read now; try again shortly.`);
      }
      throw err;
    }
    if (read.truncated) {
      throw new AppError(ErrorCode.ValidationFailed, `${query.path} is too large (${read.size.toLocaleString('en')} bytes) to read around its change here; the diff shows what changed.`);
    }
    // A write waits with the old text in place; a command has already changed the working copy.
    const old = oldSideOf(patch, read.content, approval.kind === 'write' ? 'old' : 'new');
    if (old === null) throw moved(query.path);
    const lines = linesOf(old);
    return { path: query.path, from: query.from, lines: lines.slice(query.from - 1, query.to), totalLines: lines.length };
  }
}

function moved(path: string): AppError {
  return new AppError(ErrorCode.Conflict, `${path} has changed in the sandbox since this change was proposed, so the lines around it cannot be shown as they were.`);
}
