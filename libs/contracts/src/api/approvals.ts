import { z } from 'zod';
import { Id, IsoTimestamp } from './common';
import { IdPrefix } from './sessions';

export const ApprovalKind = z.enum(['command', 'write', 'changes', 'third_party', 'extension', 'question']);
export type ApprovalKind = z.infer<typeof ApprovalKind>;

export const ApprovalState = z.enum(['pending', 'approved', 'rejected', 'expired', 'refused_headless']);
export type ApprovalState = z.infer<typeof ApprovalState>;

/**
 * What the human sees (A1): the exact command, or the unified diff and the files it touches; an
 * extension of a limit; or the main agent's question with the options it suggests (AG5).
 */
export const ApprovalPayload = z.union([
  /** A command, and the directory it runs in (the working copy's root in the sandbox). */
  z.object({ command: z.string(), workingDirectory: z.string().optional() }),
  z.object({ diff: z.string(), files: z.array(z.string()).optional() }),
  z.object({ extension: z.enum(['actions', 'minutes']), amount: z.number().int().positive() }),
  z.object({ question: z.string(), options: z.array(z.string()) }),
]);
export type ApprovalPayload = z.infer<typeof ApprovalPayload>;

export const ApprovalFlags = z.object({
  thirdParty: z.array(z.object({ path: z.string(), class: z.string() })).default([]),
  /**
   * A command the person may approve together with its identical repeats in the session (P3:
   * `commands.reapproval: exempt`, and none of the classes the policy asks every time).
   */
  reapprovalExempt: z.boolean().optional(),
  /** Why the policy asks: the rule that matched and its sentence, shown beside the request. */
  policy: z.object({ rule: z.string(), reason: z.string() }).optional(),
  /**
   * Changed files the same command left that were not offered, because the policy forbids them:
   * already reverted in the sandbox, each with the policy's sentence.
   */
  reverted: z.array(z.object({ path: z.string(), reason: z.string() })).optional(),
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
  /** The instruction of the session that asks, so the person judges the request against its purpose. */
  instruction: z.string().default(''),
  state: ApprovalState,
  decidedBy: Id.nullable(),
  /** The email of the person who answered, for display; null when nobody did (or the account is gone). */
  decidedByEmail: z.string().nullable(),
  decidedAt: IsoTimestamp.nullable(),
  /** The developer's answer when a question was answered; null otherwise. */
  response: z.string().nullable(),
  /** Why it was rejected (the person's words, sent to the agent) or why it expired; null otherwise. */
  reason: z.string().nullable().default(null),
  createdAt: IsoTimestamp,
});
export type ApprovalView = z.infer<typeof ApprovalView>;

export const ApprovalListQuery = z
  .object({
    state: ApprovalState.optional(),
    sessionId: Id.optional(),
    projectId: Id.optional(),
    idPrefix: IdPrefix.optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  })
  .strict();
export type ApprovalListQuery = z.infer<typeof ApprovalListQuery>;

export const AnswerApprovalRequest = z
  .object({
    /**
     * "Approve, and identical commands without asking": only for a command whose request offered it
     * (`flags.reapprovalExempt`), while the policy in force still says `reapproval: exempt`.
     */
    rememberCommand: z.boolean().default(false),
    reason: z.string().max(1000).optional(),
    /**
     * The answer to a question (kind `question`): required to approve one, refused for any other
     * kind. Rejecting a question declines it; the agent then states its assumption and continues.
     */
    response: z.string().trim().min(1, 'An answer cannot be empty; reject the question to decline it.').max(4000).optional(),
  })
  .strict();
export type AnswerApprovalRequest = z.infer<typeof AnswerApprovalRequest>;
