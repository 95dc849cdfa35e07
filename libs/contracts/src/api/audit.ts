import { z } from 'zod';
import { Id, IsoTimestamp } from './common';

export const AuditEntryView = z.object({
  seq: z.number().int().positive(),
  at: IsoTimestamp,
  actor: z.string(),
  kind: z.string(),
  projectId: Id.nullable(),
  sessionId: Id.nullable(),
  payload: z.unknown(),
  prevHash: z.string(),
  hash: z.string(),
  /** Who `actor: user:<id>` is, resolved when the entry is read; null for other actors or a deleted user. */
  actorIdentity: z.object({ userId: Id, email: z.string(), displayName: z.string() }).nullable().optional(),
});
export type AuditEntryView = z.infer<typeof AuditEntryView>;

/**
 * Every kind of entry the gateway writes to the audit log (T3). The server owns this list: the
 * console's Kind filter and `lemni audit --kind` offer these, and a filter naming any other kind is
 * refused rather than answered with nothing. A spec in the gateway fails when code writes a kind
 * missing here.
 */
export const AUDIT_KINDS = [
  'approval.answer',
  'approval.expired',
  'approval.request',
  'audit.archived',
  'audit.export',
  'audit.verify',
  'auth.csrf_rejected',
  'auth.login',
  'auth.login_failed',
  'auth.login_throttled',
  'auth.logout',
  'auth.oidc_mapping',
  'auth.oidc_session_ended',
  'auth.password_change_failed',
  'auth.password_changed',
  'auth.token_created',
  'auth.token_rejected',
  'auth.token_revoked',
  'authz.denied',
  'changes.reverted',
  'context.compaction',
  'environment.prepare_failed',
  'environment.prepare_lost',
  'environment.prepare_requested',
  'environment.prepared',
  'exec_host.drained',
  'exec_host.lost',
  'exec_host.registered',
  'exec_host.registration_refused',
  'exec_host.returned',
  'exec_host.undrained',
  'extension.granted',
  'extension.refused',
  'limit.reached',
  'loop.blocked',
  'mcp.listed',
  'mcp.result',
  'mcp.unavailable',
  'policy.decision',
  'policy.publish',
  'policy.rollback',
  'project.create',
  'project.member_add',
  'project.member_remove',
  'project.update',
  'project.repository_access_cleared',
  'project.repository_access_set',
  'question.answered',
  'sandbox.destroy_failed',
  'session.configured',
  'session.ended',
  'session.instruction',
  'session.orphaned',
  'session.revoke',
  'session.stop',
  'subagent.finished',
  'subagent.refused',
  'subagent.started',
  'tool.result',
  'tool_call.proposed',
  'tool_call.result',
  'user.bootstrap_admin',
  'user.create',
  'user.revoke',
  'user.update',
] as const;

export const AuditKindsView = z.object({ kinds: z.array(z.string()) });

/** How many entries a filter matches, within what the reader may read (the list's page holds at most 1,000). */
export const AuditCountView = z.object({ count: z.number().int().nonnegative() });
export type AuditCountView = z.infer<typeof AuditCountView>;
export type AuditKindsView = z.infer<typeof AuditKindsView>;

/** T3 filters: project, user (actor `user:<id>`, or a person's email), session, kind (comma-separated), time range. */
export const AuditFilterQuery = z
  .object({
    projectId: Id.optional(),
    actor: z.string().min(1).max(200).optional(),
    sessionId: Id.optional(),
    kind: z
      .string()
      .regex(/^[a-z][a-z0-9_.]*(,[a-z][a-z0-9_.]*)*$/, 'must be audit kinds like "session.stop", separated by commas')
      .optional(),
    from: IsoTimestamp.optional(),
    to: IsoTimestamp.optional(),
  })
  .strict();
export type AuditFilterQuery = z.infer<typeof AuditFilterQuery>;

export const AuditListQuery = AuditFilterQuery.extend({
  order: z.enum(['asc', 'desc']).default('desc'),
  /** Keyset cursor: entries after this seq in the chosen order. */
  after: z.coerce.number().int().positive().optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
}).strict();
export type AuditListQuery = z.infer<typeof AuditListQuery>;

export const AuditExportQuery = AuditFilterQuery.extend({
  format: z.enum(['jsonl', 'csv']).default('jsonl'),
  /** An incremental export (a SIEM's cursor): only entries after this seq, the last one the reader has. */
  afterSeq: z.coerce.number().int().nonnegative().optional(),
}).strict();
export type AuditExportQuery = z.infer<typeof AuditExportQuery>;

/** An anchor kept outside the database (a previous `lastSeq`/`lastHash`) also catches a rewritten tail. */
export const AuditVerifyQuery = z
  .object({
    anchorSeq: z.coerce.number().int().positive().optional(),
    anchorHash: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be a SHA-256 hex digest')
      .optional(),
  })
  .strict()
  .refine((q) => (q.anchorSeq === undefined) === (q.anchorHash === undefined), { message: 'give both "anchorSeq" and "anchorHash", or neither', path: ['anchorSeq'] });
export type AuditVerifyQuery = z.infer<typeof AuditVerifyQuery>;

export const AuditVerificationView = z.discriminatedUnion('ok', [
  z.object({
    ok: z.literal(true),
    checked: z.number().int().nonnegative(),
    lastSeq: z.number().int(),
    lastHash: z.string(),
    /** Entries up to `seq` were archived by the retention and removed: their archive file proves them. */
    archivedThrough: z.object({ seq: z.number().int(), hash: z.string(), file: z.string() }).nullable().optional(),
  }),
  z.object({
    ok: z.literal(false),
    checked: z.number().int().nonnegative(),
    seq: z.number().int(),
    problem: z.enum(['removed', 'reordered', 'altered', 'truncated', 'inserted']),
    message: z.string(),
  }),
]);
export type AuditVerificationView = z.infer<typeof AuditVerificationView>;

/** One audit sink (T2) as the gateway's database says now: where it sends, how far it is, whether it fails. */
export const AuditSinkView = z.object({
  name: z.string(),
  type: z.enum(['syslog', 'webhook', 'file']),
  format: z.enum(['json', 'ocsf']),
  /** Its URL or file path; never its secret. */
  target: z.string(),
  /** The last seq it was sent. */
  cursor: z.number().int().nonnegative(),
  /** Entries chained but not yet sent to it. */
  lag: z.number().int().nonnegative(),
  state: z.enum(['up_to_date', 'behind', 'failing']),
  deliveredAt: z.string().nullable(),
  failingSince: z.string().nullable(),
  lastError: z.string().nullable(),
  lastAttemptAt: z.string().nullable(),
});
export type AuditSinkView = z.infer<typeof AuditSinkView>;

export const AuditSinksView = z.object({
  /** False when the deployment names no sink. */
  configured: z.boolean(),
  /** `refuse`: actions that would be audited are refused while no sink can record. */
  onUnrecorded: z.enum(['continue', 'refuse']),
  /** The chain's last seq. */
  head: z.number().int().nonnegative(),
  /** False while every sink is failing. */
  recording: z.boolean(),
  sinks: z.array(AuditSinkView),
});
export type AuditSinksView = z.infer<typeof AuditSinksView>;
