import type { ApprovalView, SessionView, ToolCallView } from '@lemniscate/contracts';
import { ApprovalFlags, ApprovalPayload, PolicyDecision, StopReason } from '@lemniscate/contracts';
import type { z } from 'zod';
import type { ApprovalRow, SessionRow, ToolCallRow } from '../db/schema';
import { iso } from '../auth/views';

/** A JSON or free-text column read through its contract schema; a value written before the schema existed reads as `fallback`. */
function parsedOr<T, F>(schema: z.ZodType<T>, value: unknown, fallback: F): T | F {
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : fallback;
}

export function toSessionView(s: SessionRow): SessionView {
  return {
    id: s.id,
    projectId: s.projectId,
    userId: s.userId,
    parentSessionId: s.parentSessionId,
    depth: s.depth,
    agent: s.agent,
    instruction: s.instruction,
    policyVersionId: s.policyVersionId,
    status: s.status,
    stopReason: parsedOr(StopReason, s.stopReason, null),
    mode: s.mode,
    headless: s.headless,
    actionsUsed: s.actionsUsed,
    extensionsUsed: s.extensionsUsed,
    startedAt: s.startedAt.toISOString(),
    endedAt: iso(s.endedAt),
    baseCommit: s.baseCommit,
    branch: s.branch,
    includedUncommitted: s.includedUncommitted,
    fingerprintStart: s.fingerprintStart,
    fingerprintEnd: s.fingerprintEnd,
    finalPatch: s.finalPatch,
    summary: s.summary,
    execHost: s.execHost,
  };
}

export function toToolCallView(t: ToolCallRow): ToolCallView {
  return {
    id: t.id,
    sessionId: t.sessionId,
    seq: t.seq,
    name: t.name,
    arguments: t.arguments,
    decision: parsedOr(PolicyDecision, t.decision, null),
    result: t.result ?? null,
    agent: t.agent,
    createdAt: t.createdAt.toISOString(),
  };
}

/** `decidedByEmail`: the email of `a.decidedBy`, looked up by the caller (null when nobody answered). */
export function toApprovalView(a: ApprovalRow, session: Pick<SessionRow, 'projectId' | 'instruction'>, decidedByEmail: string | null = null): ApprovalView {
  return {
    id: a.id,
    sessionId: a.sessionId,
    projectId: session.projectId,
    instruction: session.instruction,
    toolCallId: a.toolCallId,
    kind: a.kind,
    payload: ApprovalPayload.parse(a.payload),
    flags: parsedOr(ApprovalFlags, a.flags, { thirdParty: [] }),
    agent: a.agent,
    state: a.state,
    decidedBy: a.decidedBy,
    decidedByEmail: a.decidedBy === null ? null : decidedByEmail,
    decidedAt: iso(a.decidedAt),
    response: a.response,
    reason: a.state === 'approved' ? null : a.reason,
    createdAt: a.createdAt.toISOString(),
  };
}
