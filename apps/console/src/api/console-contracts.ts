import { z } from 'zod';
import { AuditEntryView, AuditVerificationView, PolicyDryRunRequest, PolicyDryRunResponse } from '@lemniscate/contracts';

/* Names the console's pages use for shapes the gateway defines in libs/contracts. */

// The dashboard's figures are served by the gateway; their shape is libs/contracts' DashboardStats.
export { DashboardStats } from '@lemniscate/contracts';

// One definition per message (STYLE.md §3): the audit and dry-run shapes come from libs/contracts.
export const AuditEntry = AuditEntryView;
export type AuditEntry = AuditEntryView;

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

export const AuditVerification = AuditVerificationView;
export type AuditVerification = AuditVerificationView;

export const DryRunRequest = PolicyDryRunRequest;
export type DryRunRequest = z.input<typeof PolicyDryRunRequest>;
export const DryRunResponse = PolicyDryRunResponse;
export type DryRunResponse = PolicyDryRunResponse;
