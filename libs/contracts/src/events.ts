import { z } from 'zod';
import { SessionId } from './common';
import { IsoTimestamp } from './api/common';
import { StopReason } from './api/sessions';

/**
 * Session events (X2): the WebSocket stream, the CLI's `stream-json` output and the audit payloads
 * all carry these shapes. Automation branches on `type` and `class`, never on the prose fields.
 */

/**
 * The stop reasons a guardrail or a person produces (`session_stopped`, exit code 3); `crash` is the
 * only other StopReason and belongs to `session_failed` (exit code 1).
 */
export const GuardrailStopReason = StopReason.exclude(['crash']);
export type GuardrailStopReason = z.infer<typeof GuardrailStopReason>;

/** Machine-readable classes carried by events; one list so consumers can switch exhaustively. */
export const EventClass = z.enum([
  // session endings, the same values as StopReason
  'limit_actions',
  'limit_minutes',
  'loop',
  'revoked',
  'stopped',
  'refused',
  // decisions made without asking anyone
  'policy_denied',
  'tool_disabled',
  'tool_not_in_catalogue',
  'outside_project',
  'third_party_forbidden',
  'over_limit',
  'symlink_outside',
  // approvals and questions
  'approval_refused_headless',
  'approval_expired',
  'question_default_headless',
  'question_declined',
  'extension_refused',
  // changes
  'change_reverted',
  // failures of the machinery around the model
  'sandbox_lost',
  // the exec-host or the container engine failed to handle a request: the platform failed, not the command
  'platform_error',
  'model_timeout',
  'model_error',
  'command_timeout',
  'resource_limit',
  'no_progress',
  'crash',
  // delegation
  'subagent_max_depth',
  'subagent_max_per_session',
  'subagent_max_concurrent',
]);
export type EventClass = z.infer<typeof EventClass>;

/** A subset of EventClass, validated as such, for the events that can carry only some classes. */
function classes<const T extends readonly [EventClass, ...EventClass[]]>(...values: T) {
  return z.enum(values);
}

const JsonObject = z.record(z.string(), z.unknown());

const base = {
  seq: z.int().nonnegative(),
  sessionId: SessionId,
  at: IsoTimestamp,
  /**
   * Set on a subagent's events: they travel on the root session's stream (one stream and one
   * approval point for the whole tree, AG5), and this names the child session they belong to.
   */
  subSessionId: SessionId.optional(),
};

/** Who took a decision or answered an approval: a person, or the automated process when headless. */
export const Actor = z.discriminatedUnion('kind', [
  /** `email`: who the user is, for display (absent in events recorded before it was carried). */
  z.object({ kind: z.literal('user'), userId: z.string().min(1), email: z.string().optional() }),
  z.object({ kind: z.literal('process'), description: z.string().min(1) }),
  z.object({ kind: z.literal('policy') }),
]);
export type Actor = z.infer<typeof Actor>;

/** X3: where the working copy stood, so a reviewer can reconstruct what the agent saw. */
export const WorkingCopyState = z.object({
  baseCommit: z.string().min(1),
  branch: z.string().nullable(),
  includesUncommitted: z.boolean(),
  treeFingerprint: z.string().min(1),
});
export type WorkingCopyState = z.infer<typeof WorkingCopyState>;

export const SessionStartedEvent = z.object({
  ...base,
  type: z.literal('session_started'),
  project: z.string().min(1),
  agent: z.string().nullable(),
  model: z.string().min(1),
  headless: z.boolean(),
  parentSessionId: SessionId.nullable(),
  depth: z.int().nonnegative(),
  limits: z.object({
    maxActions: z.int().positive().nullable(),
    maxMinutes: z.int().positive(),
    maxExtensions: z.int().nonnegative(),
    loopThreshold: z.int().positive().nullable(),
  }),
  workingCopy: WorkingCopyState,
});

export const InstructionEvent = z.object({
  ...base,
  type: z.literal('instruction'),
  text: z.string(),
  author: Actor,
});

export const ToolCallProposedEvent = z.object({
  ...base,
  type: z.literal('tool_call_proposed'),
  callId: z.string().min(1),
  agent: z.string().min(1),
  name: z.string().min(1),
  arguments: JsonObject,
});

export const DecisionEvent = z.object({
  ...base,
  type: z.literal('decision'),
  callId: z.string().min(1),
  effect: z.enum(['allow', 'ask', 'deny']),
  rule: z.string().min(1),
  reason: z.string().min(1),
  thirdParty: z.boolean(),
  class: classes('policy_denied', 'tool_disabled', 'tool_not_in_catalogue', 'outside_project', 'third_party_forbidden', 'over_limit', 'symlink_outside').optional(),
});

export const ApprovalRequestedEvent = z.object({
  ...base,
  type: z.literal('approval_requested'),
  approvalId: z.string().min(1),
  callId: z.string().min(1).nullable(),
  agent: z.string().min(1),
  kind: z.enum(['command', 'diff', 'changes', 'extension', 'question']),
  thirdParty: z.boolean(),
  /** The exact command or unified diff shown to the person (A1); for a question, the question. */
  subject: z.string(),
  /** A question's suggested answers (the person may also answer in their own words). */
  options: z.array(z.string()).optional(),
  /** The third-party files the change touches, each flagged with its class (P5, A1). */
  thirdPartyFiles: z.array(z.object({ path: z.string(), class: z.string() })).optional(),
  /** True when the policy lets the person approve identical commands for the rest of the session. */
  reapprovalExempt: z.boolean().optional(),
  /** When the request expires unanswered (the policy's approvals.timeoutSeconds, bounded by the session's limit). */
  expiresAt: z.iso.datetime().optional(),
});

export const ApprovalAnsweredEvent = z.object({
  ...base,
  type: z.literal('approval_answered'),
  approvalId: z.string().min(1),
  answer: z.enum(['approved', 'rejected']),
  by: Actor,
  /** A question's answer, when the person answered it. */
  response: z.string().optional(),
  class: classes('approval_refused_headless', 'approval_expired').optional(),
});

export const ToolResultEvent = z.object({
  ...base,
  type: z.literal('tool_result'),
  callId: z.string().min(1),
  exitCode: z.int().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  truncated: z.boolean(),
  durationMs: z.int().nonnegative(),
  class: classes('sandbox_lost', 'command_timeout', 'resource_limit').optional(),
});

export const ChangedFile = z.object({
  path: z.string().min(1),
  change: z.enum(['added', 'modified', 'deleted']),
  thirdParty: z.boolean(),
});
export type ChangedFile = z.infer<typeof ChangedFile>;

export const ChangesDetectedEvent = z.object({
  ...base,
  type: z.literal('changes_detected'),
  callId: z.string().min(1).nullable(),
  files: z.array(ChangedFile).min(1),
});

export const ChangeRevertedEvent = z.object({
  ...base,
  type: z.literal('change_reverted'),
  class: z.literal('change_reverted'),
  paths: z.array(z.string().min(1)).min(1),
  because: z.enum(['rejected', 'forbidden', 'stopped']),
});

export const LimitReachedEvent = z.object({
  ...base,
  type: z.literal('limit_reached'),
  class: classes('limit_actions', 'limit_minutes'),
  actionsUsed: z.int().nonnegative(),
  minutesUsed: z.number().nonnegative(),
});

export const ExtensionGrantedEvent = z.object({
  ...base,
  type: z.literal('extension_granted'),
  kind: z.enum(['actions', 'minutes']),
  amount: z.int().positive(),
  extensionsUsed: z.int().positive(),
  by: Actor,
});

export const ExtensionRefusedEvent = z.object({
  ...base,
  type: z.literal('extension_refused'),
  class: classes('extension_refused', 'approval_refused_headless'),
  reason: z.string().min(1),
});

export const LoopBlockedEvent = z.object({
  ...base,
  type: z.literal('loop_blocked'),
  class: z.literal('loop'),
  callId: z.string().min(1),
  name: z.string().min(1),
  arguments: JsonObject,
  repetitions: z.int().positive(),
});

export const SubagentStartedEvent = z.object({
  ...base,
  type: z.literal('subagent_started'),
  childSessionId: SessionId,
  agent: z.string().min(1),
  depth: z.int().positive(),
  background: z.boolean(),
});

export const SubagentRefusedEvent = z.object({
  ...base,
  type: z.literal('subagent_refused'),
  class: classes('subagent_max_depth', 'subagent_max_per_session', 'subagent_max_concurrent'),
  agent: z.string().min(1),
  reason: z.string().min(1),
});

export const SubagentFinishedEvent = z.object({
  ...base,
  type: z.literal('subagent_finished'),
  childSessionId: SessionId,
  agent: z.string().min(1),
  report: z.enum(['finished', 'cut_short', 'interrupted']),
  stopReason: StopReason.nullable(),
});

export const QuestionEvent = z.object({
  ...base,
  type: z.literal('question'),
  questionId: z.string().min(1),
  question: z.string().min(1),
  options: z.array(z.string()),
  /** null while unanswered; the announced default when nobody can answer or the person declined. */
  answer: z.string().nullable(),
  class: classes('question_default_headless', 'question_declined').optional(),
});

export const ModelTextEvent = z.object({
  ...base,
  type: z.literal('model_text'),
  text: z.string(),
});

export const CompactionEvent = z.object({
  ...base,
  type: z.literal('compaction'),
  tokensBefore: z.int().nonnegative(),
  tokensAfter: z.int().nonnegative(),
  actionsUsed: z.int().positive(),
});

export const StalledEvent = z.object({
  ...base,
  type: z.literal('stalled'),
  class: classes('model_timeout', 'no_progress'),
  idleMs: z.int().nonnegative(),
});

/** Token usage summed over the session's model turns, when the provider reports it. */
export const TokenUsage = z.object({ inputTokens: z.int().nonnegative(), outputTokens: z.int().nonnegative() });
export type TokenUsage = z.infer<typeof TokenUsage>;

export const SessionStoppedEvent = z.object({
  ...base,
  type: z.literal('session_stopped'),
  status: z.literal('stopped'),
  stopReason: GuardrailStopReason,
  /** Equal to stopReason; present so every ending carries a class. */
  class: GuardrailStopReason,
  summary: z.string().nullable(),
  exitCode: z.literal(3),
  usage: TokenUsage.optional(),
});

export const SessionCompletedEvent = z.object({
  ...base,
  type: z.literal('session_completed'),
  status: z.literal('completed'),
  stopReason: z.null(),
  summary: z.string().nullable(),
  exitCode: z.literal(0),
  usage: TokenUsage.optional(),
});

export const SessionFailedEvent = z.object({
  ...base,
  type: z.literal('session_failed'),
  status: z.literal('failed'),
  stopReason: z.literal('crash'),
  class: classes('crash', 'sandbox_lost', 'platform_error', 'model_timeout', 'model_error'),
  message: z.string().min(1),
  exitCode: z.literal(1),
  usage: TokenUsage.optional(),
});

export const SessionEvent = z.discriminatedUnion('type', [
  SessionStartedEvent,
  InstructionEvent,
  ToolCallProposedEvent,
  DecisionEvent,
  ApprovalRequestedEvent,
  ApprovalAnsweredEvent,
  ToolResultEvent,
  ChangesDetectedEvent,
  ChangeRevertedEvent,
  LimitReachedEvent,
  ExtensionGrantedEvent,
  ExtensionRefusedEvent,
  LoopBlockedEvent,
  SubagentStartedEvent,
  SubagentRefusedEvent,
  SubagentFinishedEvent,
  QuestionEvent,
  ModelTextEvent,
  CompactionEvent,
  StalledEvent,
  SessionStoppedEvent,
  SessionCompletedEvent,
  SessionFailedEvent,
]);
export type SessionEvent = z.infer<typeof SessionEvent>;
export type SessionEventType = SessionEvent['type'];
export type SessionEventOf<T extends SessionEventType> = Extract<SessionEvent, { type: T }>;

/** Every event type, in the order a session usually produces them. */
export const SESSION_EVENT_TYPES: readonly SessionEventType[] = SessionEvent.options.map((o) => o.shape.type.value);

/** The three endings; a stream is over once one of them has been seen. */
export const TERMINAL_EVENT_TYPES = ['session_stopped', 'session_completed', 'session_failed'] as const satisfies readonly SessionEventType[];
