import { z } from 'zod';
import { Id } from './common';
import { limitedText } from '../limits';
import { PolicyDecision } from './sessions';

/**
 * Dry run of a draft policy (C1): the tool calls of the project's last N sessions are decided again
 * under the draft, and every decision that would change is listed, before anything is published.
 */
export const PolicyDryRunRequest = z
  .object({
    sourceText: limitedText('policySourceBytes').min(1, 'must not be empty'),
    sessions: z.number().int().min(1).max(100).default(20),
  })
  .strict();
export type PolicyDryRunRequest = z.infer<typeof PolicyDryRunRequest>;

export const PolicyDryRunChange = z.object({
  sessionId: Id,
  toolCallId: Id,
  tool: z.string(),
  /** The command, the path, or the arguments in short: what the decision was about. */
  subject: z.string(),
  before: PolicyDecision,
  after: PolicyDecision,
});
export type PolicyDryRunChange = z.infer<typeof PolicyDryRunChange>;

export const PolicyDryRunResponse = z.object({
  sessionsReplayed: z.number().int().nonnegative(),
  toolCallsReplayed: z.number().int().nonnegative(),
  changes: z.array(PolicyDryRunChange),
});
export type PolicyDryRunResponse = z.infer<typeof PolicyDryRunResponse>;
