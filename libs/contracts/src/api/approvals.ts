import { z } from 'zod';
import { Id, IsoTimestamp } from './common';

export const ApprovalKind = z.enum(['command', 'write', 'changes', 'third_party', 'extension']);
export type ApprovalKind = z.infer<typeof ApprovalKind>;

export const ApprovalState = z.enum(['pending', 'approved', 'rejected', 'expired', 'refused_headless']);
export type ApprovalState = z.infer<typeof ApprovalState>;

/** What the human sees (A1): the exact command, or the unified diff and the files it touches. */
export const ApprovalPayload = z.union([
  z.object({ command: z.string() }),
  z.object({ diff: z.string(), files: z.array(z.string()).optional() }),
  z.object({ extension: z.enum(['actions', 'minutes']), amount: z.number().int().positive() }),
]);
export type ApprovalPayload = z.infer<typeof ApprovalPayload>;

export const ApprovalFlags = z.object({
  thirdParty: z.array(z.object({ path: z.string(), class: z.string() })).default([]),
});
export type ApprovalFlags = z.infer<typeof ApprovalFlags>;

export const ApprovalView = z.object({
  id: Id,
  sessionId: Id,
  projectId: Id,
  toolCallId: Id.nullable(),
  kind: ApprovalKind,
  payload: ApprovalPayload,
  flags: ApprovalFlags,
  agent: z.string(),
  state: ApprovalState,
  decidedBy: Id.nullable(),
  decidedAt: IsoTimestamp.nullable(),
  createdAt: IsoTimestamp,
});
export type ApprovalView = z.infer<typeof ApprovalView>;

export const ApprovalListQuery = z
  .object({
    state: ApprovalState.optional(),
    sessionId: Id.optional(),
    projectId: Id.optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  })
  .strict();
export type ApprovalListQuery = z.infer<typeof ApprovalListQuery>;

export const AnswerApprovalRequest = z
  .object({
    /** Only for commands, and only when the policy's `reapproval: exempt` allows it. */
    rememberCommand: z.boolean().default(false),
    reason: z.string().max(1000).optional(),
  })
  .strict();
export type AnswerApprovalRequest = z.infer<typeof AnswerApprovalRequest>;
