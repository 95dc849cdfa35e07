import { z } from 'zod';
import { Id, IsoTimestamp } from './common';
import { limitedText } from '../limits';

export const SessionStatus = z.enum(['running', 'completed', 'stopped', 'failed']);
export type SessionStatus = z.infer<typeof SessionStatus>;

/** Machine-readable reasons a session ended early (DESIGN.md, CLI contract). */
export const StopReason = z.enum(['limit_actions', 'limit_minutes', 'loop', 'revoked', 'stopped', 'refused', 'crash']);
export type StopReason = z.infer<typeof StopReason>;

/**
 * How a session was started, recorded with it (L4) so that nobody reads a CI run as a person's:
 * - `interactive`: a person follows it and answers its approvals (`lemni` without -p, the console);
 * - `headless`: `lemni -p`; nobody can approve, so whatever needs a person is refused at once;
 * - `headless_with_approvals`: `lemni -p --wait-for-approvals`; no terminal, but approvals wait in
 *   the inbox for a person (console or `lemni approvals approve ID`).
 */
export const SessionMode = z.enum(['interactive', 'headless', 'headless_with_approvals'], {
  error: 'must be one of "interactive", "headless" or "headless_with_approvals"',
});
export type SessionMode = z.infer<typeof SessionMode>;

/** Words for people, the same in the CLI and the console. */
export const SESSION_MODE_LABELS: Record<SessionMode, string> = {
  interactive: 'Interactive',
  headless: 'Headless',
  headless_with_approvals: 'Headless, approvals waited for',
};

/** Nobody can answer an approval of this session: it is refused at once and recorded as such. */
export function refusesApprovals(mode: SessionMode): boolean {
  return mode === 'headless';
}

interface ModeFields {
  mode?: SessionMode | undefined;
  headless?: boolean | undefined;
  waitForApprovals?: boolean | undefined;
}

/**
 * The mode a start request asks for: `mode` when given, else the older pair `headless` +
 * `waitForApprovals` (still accepted, so that scripts written against them keep working).
 */
function requestedSessionMode(r: ModeFields): SessionMode {
  if (r.mode) return r.mode;
  if (r.headless) return r.waitForApprovals ? 'headless_with_approvals' : 'headless';
  return 'interactive';
}

/** Where `mode` and the older fields contradict each other: one sentence per field, none when they fit. */
function sessionModeConflicts(r: ModeFields): { path: 'headless' | 'waitForApprovals'; message: string }[] {
  const out: { path: 'headless' | 'waitForApprovals'; message: string }[] = [];
  if (r.mode) {
    const headless = r.mode !== 'interactive';
    const waits = r.mode === 'headless_with_approvals';
    if (r.headless !== undefined && r.headless !== headless) {
      out.push({ path: 'headless', message: `says ${r.headless}, but mode "${r.mode}" is ${headless ? 'a headless' : 'an interactive'} session; send mode alone` });
    }
    if (r.waitForApprovals !== undefined && r.waitForApprovals !== waits) {
      out.push({
        path: 'waitForApprovals',
        message: `says ${r.waitForApprovals}, but mode "${r.mode}" ${waits ? 'waits for approvals' : r.mode === 'headless' ? 'refuses approvals at once' : 'asks its developer directly'}; send mode alone`,
      });
    }
  } else if (r.waitForApprovals && r.headless !== true) {
    out.push({ path: 'waitForApprovals', message: 'goes with a headless session: send mode "headless_with_approvals" (or headless: true with it)' });
  }
  return out;
}

export const CreateSessionRequest = z
  .object({
    projectId: Id,
    instruction: limitedText('instructionBytes').trim().min(1, 'must not be empty'),
    agent: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be an agent file name')
      .default('general'),
    /** How the session is run (L4); when absent, read from the older `headless` and `waitForApprovals`. */
    mode: SessionMode.optional(),
    /** Older form of `mode: "headless"`; must agree with `mode` when both are sent. */
    headless: z.boolean().optional(),
    baseCommit: z
      .string()
      .regex(/^[0-9a-f]{7,64}$/, 'must be a commit hash')
      .optional(),
    branch: z.string().max(255).optional(),
    includedUncommitted: z.boolean().default(false),
    /** A model reference such as `scripted:PATH` or `anthropic:MODEL`; the gateway's default when absent. */
    model: z.string().min(1).max(4096).optional(),
    /** `git diff HEAD --binary` of the developer's uncommitted work, applied over the base before the agent starts. */
    startingPatch: limitedText('startingPatchBytes').optional(),
    /** Older form of `mode: "headless_with_approvals"` (with `headless: true`); must agree with `mode`. */
    waitForApprovals: z.boolean().optional(),
    /** The developer's `LEMNISCATE_SESSION_*` variables (L5), read as a fallback below configuration. */
    environment: z.record(z.string().regex(/^LEMNISCATE_SESSION_[A-Z_]+$/, 'must be a LEMNISCATE_SESSION_* variable'), z.string().max(200)).optional(),
    /** The `execution:` mapping of the developer's `~/.lemniscate/config.yaml`. */
    userConfig: z
      .object({ execution: z.record(z.string(), z.unknown()).optional() })
      .strict()
      .optional(),
    /** The developer's `~/.lemniscate/agents/*.md`, for discovery (the repository's files win). */
    userAgents: z
      .array(z.object({ fileName: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.md$/, 'must be an agent file name ending in .md'), text: z.string().max(256 * 1024) }).strict())
      .max(200)
      .optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    for (const conflict of sessionModeConflicts(r)) ctx.addIssue({ code: 'custom', path: [conflict.path], message: conflict.message });
  })
  // The gateway reads one field: the older pair is folded into `mode` here.
  .transform(({ headless, waitForApprovals, ...rest }) => ({ ...rest, mode: requestedSessionMode({ mode: rest.mode, headless, waitForApprovals }) }));
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
  mode: SessionMode,
  /** True when nobody can approve (mode "headless"): approvals are refused at once. */
  headless: z.boolean(),
  actionsUsed: z.number().int(),
  extensionsUsed: z.number().int(),
  startedAt: IsoTimestamp,
  endedAt: IsoTimestamp.nullable(),
  baseCommit: z.string().nullable(),
  branch: z.string().nullable(),
  includedUncommitted: z.boolean(),
  /** X3: `sha256:…` over (mode, blob id, path) of every file the sandbox received; null when it never had one. */
  fingerprintStart: z.string().nullable(),
  /**
   * X3: the same hash over the tree the session kept (the start plus every accepted change: the tree
   * `finalPatch` gives on `baseCommit`); equal to `fingerprintStart` when nothing was kept. Null when
   * the sandbox never existed, or was gone after a change was accepted and before it could be read.
   */
  fingerprintEnd: z.string().nullable(),
  finalPatch: z.string().nullable(),
  summary: z.string().nullable(),
  /** The exec-host of the pool its sandbox was placed on; null with one fixed exec-host or before placement. */
  execHost: z.string().nullable().optional(),
});
export type SessionView = z.infer<typeof SessionView>;

/**
 * The start of an id, as people type it (`lemni apply 8a7d`): at least four characters. A list
 * filtered by one answers the records the caller may see whose id starts with it.
 */
export const IdPrefix = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{3,63}$/, 'must be the first 4 to 64 characters of an id (letters, digits, "-" or "_")');

export const SessionListQuery = z
  .object({
    projectId: Id.optional(),
    idPrefix: IdPrefix.optional(),
    status: SessionStatus.optional(),
    /** One person's sessions (a developer only ever sees their own, whatever this says). */
    userId: Id.optional(),
    /** `true`: only sessions with an approval or question waiting for a person. */
    waiting: z.enum(['true', 'false']).optional(),
    /** Sessions started at or after `from` and before `to`. */
    from: IsoTimestamp.optional(),
    to: IsoTimestamp.optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  })
  .strict();
export type SessionListQuery = z.infer<typeof SessionListQuery>;

/**
 * A row of the sessions list: the session, who started it and how many of its approvals wait for a
 * person. The two additions default so that a list read from an older gateway still parses.
 */
export const SessionListItem = SessionView.extend({
  ownerEmail: z.string().nullable().default(null),
  pendingApprovals: z.number().int().nonnegative().default(0),
});
export type SessionListItem = z.infer<typeof SessionListItem>;

export const PolicyDecision = z.object({
  effect: z.enum(['allow', 'ask', 'deny']),
  rule: z.string(),
  reason: z.string(),
  thirdParty: z.array(z.object({ path: z.string(), class: z.string() })).optional(),
  /** A command the person may approve with its identical repeats (P3). */
  reapprovalExempt: z.boolean().optional(),
  /** A command allowed again by an earlier "approve identical" answer: that approval. */
  approvalId: z.string().optional(),
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
