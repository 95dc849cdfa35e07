import { z } from 'zod';
import { Id, IsoTimestamp } from './common';
import { limitedText } from '../limits';

export const SessionStatus = z.enum(['running', 'completed', 'stopped', 'failed']);
export type SessionStatus = z.infer<typeof SessionStatus>;

/** Machine-readable reasons a session ended early (DESIGN.md, CLI contract). */
export const StopReason = z.enum(['limit_actions', 'limit_minutes', 'loop', 'revoked', 'stopped', 'refused', 'crash']);
export type StopReason = z.infer<typeof StopReason>;

export const CreateSessionRequest = z
  .object({
    projectId: Id,
    instruction: limitedText('instructionBytes').trim().min(1, 'must not be empty'),
    agent: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be an agent file name').default('general'),
    headless: z.boolean().default(false),
    parentSessionId: Id.optional(),
    baseCommit: z.string().regex(/^[0-9a-f]{7,64}$/, 'must be a commit hash').optional(),
    branch: z.string().max(255).optional(),
    includedUncommitted: z.boolean().default(false),
    /** A model reference such as `scripted:PATH` or `anthropic:MODEL`; the gateway's default when absent. */
    model: z.string().min(1).max(4096).optional(),
    /** `git diff HEAD --binary` of the developer's uncommitted work, applied over the base before the agent starts. */
    startingPatch: limitedText('startingPatchBytes').optional(),
    /** Headless, but approvals wait in the inbox for a person instead of being refused at once. */
    waitForApprovals: z.boolean().default(false),
    /** The developer's `LEMNISCATE_SESSION_*` variables (L5), read as a fallback below configuration. */
    environment: z.record(z.string().regex(/^LEMNISCATE_SESSION_[A-Z_]+$/, 'must be a LEMNISCATE_SESSION_* variable'), z.string().max(200)).optional(),
    /** The `execution:` mapping of the developer's `~/.lemniscate/config.yaml`. */
    userConfig: z.object({ execution: z.record(z.string(), z.unknown()).optional() }).strict().optional(),
    /** The developer's `~/.lemniscate/agents/*.md`, for discovery (the repository's files win). */
    userAgents: z
      .array(z.object({ fileName: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.md$/, 'must be an agent file name ending in .md'), text: z.string().max(256 * 1024) }).strict())
      .max(200)
      .optional(),
  })
  .strict();
export type CreateSessionRequest = z.infer<typeof CreateSessionRequest>;

export const SessionView = z.object({
  id: Id,
  projectId: Id,
  userId: Id,
  parentSessionId: Id.nullable(),
  depth: z.number().int(),
  agent: z.string(),
  instruction: z.string(),
  policyVersionId: Id.nullable(),
  status: SessionStatus,
  stopReason: StopReason.nullable(),
  headless: z.boolean(),
  actionsUsed: z.number().int(),
  extensionsUsed: z.number().int(),
  startedAt: IsoTimestamp,
  endedAt: IsoTimestamp.nullable(),
  baseCommit: z.string().nullable(),
  branch: z.string().nullable(),
  includedUncommitted: z.boolean(),
  fingerprintStart: z.string().nullable(),
  fingerprintEnd: z.string().nullable(),
  finalPatch: z.string().nullable(),
  summary: z.string().nullable(),
});
export type SessionView = z.infer<typeof SessionView>;

export const SessionListQuery = z
  .object({
    projectId: Id.optional(),
    status: SessionStatus.optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  })
  .strict();
export type SessionListQuery = z.infer<typeof SessionListQuery>;

export const PolicyDecision = z.object({
  effect: z.enum(['allow', 'ask', 'deny']),
  rule: z.string(),
  reason: z.string(),
  thirdParty: z.array(z.object({ path: z.string(), class: z.string() })).optional(),
});
export type PolicyDecision = z.infer<typeof PolicyDecision>;

export const ToolCallView = z.object({
  id: Id,
  sessionId: Id,
  seq: z.number().int(),
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()),
  decision: PolicyDecision.nullable(),
  result: z.unknown().nullable(),
  agent: z.string(),
  createdAt: IsoTimestamp,
});
export type ToolCallView = z.infer<typeof ToolCallView>;

/**
 * `POST /sessions/:id/subagents`: `@general …` / `@explore …` in a running session, a background
 * subagent under the session's limits. The gateway, the CLI and the CLI's fake gateway all use this one schema.
 */
export const StartSubagentRequest = z.object({ agent: z.string().min(1).max(64), instruction: limitedText('instructionBytes').trim().min(1, 'must not be empty') }).strict();
export type StartSubagentRequest = z.infer<typeof StartSubagentRequest>;

export const StopSessionRequest = z.object({ reason: z.string().max(1000).optional() }).strict();
export type StopSessionRequest = z.infer<typeof StopSessionRequest>;

export const StopSessionResponse = z.object({
  session: SessionView,
  approvalsRejected: z.number().int(),
  sandboxDestroyed: z.boolean(),
  /** A sentence when the sandbox could not be destroyed right away (the reaper will). */
  sandboxNote: z.string().nullable(),
});
export type StopSessionResponse = z.infer<typeof StopSessionResponse>;
