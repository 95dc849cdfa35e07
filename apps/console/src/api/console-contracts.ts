import { z } from 'zod';
import { Id, IsoTimestamp, PolicyDecision } from '@lemniscate/contracts';

/*
 * Response shapes the console needs and libs/contracts does not define yet (dashboard statistics,
 * audit entries and verification, policy dry run). They belong in libs/contracts next to the
 * gateway routes that produce them; until then the console validates against these.
 */

export const DashboardStats = z.object({
  sessionsPerDay: z.array(z.object({ day: z.string(), count: z.number().int().nonnegative() })),
  decisionsByEffect: z.object({ allow: z.number().int().nonnegative(), ask: z.number().int().nonnegative(), deny: z.number().int().nonnegative() }),
  mostDenied: z.array(z.object({ command: z.string(), count: z.number().int().nonnegative() })),
  mostAsked: z.array(z.object({ command: z.string(), count: z.number().int().nonnegative() })),
  pendingApprovals: z.number().int().nonnegative(),
});
export type DashboardStats = z.infer<typeof DashboardStats>;

export const AuditEntry = z.object({
  seq: z.number().int().positive(),
  at: IsoTimestamp,
  actor: z.string(),
  kind: z.string(),
  projectId: Id.nullable(),
  sessionId: Id.nullable(),
  payload: z.unknown(),
  prevHash: z.string(),
  hash: z.string(),
});
export type AuditEntry = z.infer<typeof AuditEntry>;

/** The same filters as `lemni audit export` (actor is `user:<id>`, `policy`, …). */
export const AuditQuery = z.object({
  projectId: z.string().optional(),
  actor: z.string().optional(),
  sessionId: z.string().optional(),
  kind: z.string().optional(),
  from: z.string().optional(),
  to: z.string().optional(),
  limit: z.number().int().min(1).max(1000).optional(),
});
export type AuditQuery = z.infer<typeof AuditQuery>;

/** What the gateway's audit service returns from verify (apps/gateway/src/audit/audit.service.ts). */
export const AuditVerification = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), checked: z.number().int().nonnegative(), lastSeq: z.number().int(), lastHash: z.string() }),
  z.object({
    ok: z.literal(false),
    checked: z.number().int().nonnegative(),
    seq: z.number().int(),
    problem: z.enum(['removed', 'reordered', 'altered', 'truncated', 'inserted']),
    message: z.string(),
  }),
]);
export type AuditVerification = z.infer<typeof AuditVerification>;

export const DryRunRequest = z.object({ sourceText: z.string(), sessions: z.number().int().min(1).max(100) });
export type DryRunRequest = z.infer<typeof DryRunRequest>;

export const DryRunChange = z.object({
  sessionId: Id,
  toolCallId: Id,
  tool: z.string(),
  subject: z.string(),
  before: PolicyDecision,
  after: PolicyDecision,
});
export type DryRunChange = z.infer<typeof DryRunChange>;

export const DryRunResponse = z.object({
  sessionsReplayed: z.number().int().nonnegative(),
  toolCallsReplayed: z.number().int().nonnegative(),
  changes: z.array(DryRunChange),
});
export type DryRunResponse = z.infer<typeof DryRunResponse>;
