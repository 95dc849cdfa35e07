import type { ApprovalView, SessionView, ToolCallView } from '@lemniscate/contracts';
import { ApprovalFlags, ApprovalPayload, PolicyDecision, StopReason } from '@lemniscate/contracts';
import type { ApprovalRow, SessionRow, ToolCallRow } from '../db/schema';
import { iso } from '../auth/views';

export function toSessionView(s: SessionRow): SessionView {
  const stop = StopReason.safeParse(s.stopReason);
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
    stopReason: stop.success ? stop.data : null,
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
  };
}

export function toToolCallView(t: ToolCallRow): ToolCallView {
  const decision = PolicyDecision.safeParse(t.decision);
  return {
    id: t.id,
    sessionId: t.sessionId,
    seq: t.seq,
    name: t.name,
    arguments: t.arguments,
    decision: decision.success ? decision.data : null,
    result: t.result ?? null,
    agent: t.agent,
    createdAt: t.createdAt.toISOString(),
  };
}

export function toApprovalView(a: ApprovalRow, projectId: string): ApprovalView {
  const flags = ApprovalFlags.safeParse(a.flags);
  return {
    id: a.id,
    sessionId: a.sessionId,
    projectId,
    toolCallId: a.toolCallId,
    kind: a.kind,
    payload: ApprovalPayload.parse(a.payload),
    flags: flags.success ? flags.data : { thirdParty: [] },
    agent: a.agent,
    state: a.state,
    decidedBy: a.decidedBy,
    decidedAt: iso(a.decidedAt),
    response: a.response,
    createdAt: a.createdAt.toISOString(),
  };
}
