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

/** Lines of a changed file read around its hunks, as a review expands context. */
export const CONTEXT_MAX_LINES = 500;

export const ApprovalContextQuery = z
  .object({
    /** A file the change modifies (its path in the diff). */
    path: z.string().min(1).max(4096),
    /** First line wanted, 1-based, numbered as in the file before the change. */
    from: z.coerce.number().int().min(1),
    /** Last line wanted, inclusive; at most CONTEXT_MAX_LINES lines in one request. */
    to: z.coerce.number().int().min(1),
  })
  .strict()
  .refine((q) => q.to >= q.from, { message: 'to: the last line comes at or after the first (from).', path: ['to'] })
  .refine((q) => q.to - q.from < CONTEXT_MAX_LINES, { message: `to: at most ${CONTEXT_MAX_LINES} lines are read at once.`, path: ['to'] });
export type ApprovalContextQuery = z.infer<typeof ApprovalContextQuery>;

export const ApprovalContextView = z.object({
  path: z.string(),
  /** The first line returned (the `from` asked for), numbered as in the file before the change. */
  from: z.int().min(1),
  /** The lines from `from`, without their line ends; fewer than asked for at the file's end. */
  lines: z.array(z.string()),
  /** How many lines the file had before the change: expanding stops there. */
  totalLines: z.int().nonnegative(),
});
export type ApprovalContextView = z.infer<typeof ApprovalContextView>;

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
