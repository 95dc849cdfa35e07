import { z } from 'zod';
import { Id, IsoTimestamp } from './common';
import { limitedText } from '../limits';

export const ProjectName = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'must be 1–63 lower-case letters, digits, ".", "-" or "_", starting with a letter or digit');

export const CreateProjectRequest = z
  .object({
    name: ProjectName,
    repositorySource: z.string().trim().min(1, 'must name where the repository comes from').max(2048),
    defaultRef: z.string().trim().min(1).max(255).default('main'),
  })
  .strict();
export type CreateProjectRequest = z.infer<typeof CreateProjectRequest>;

export const ProjectView = z.object({
  id: Id,
  name: z.string(),
  repositorySource: z.string(),
  defaultRef: z.string(),
  createdAt: IsoTimestamp,
});
export type ProjectView = z.infer<typeof ProjectView>;

export const ProjectParams = z.object({ projectId: Id }).strict();
export type ProjectParams = z.infer<typeof ProjectParams>;

export const ProjectMemberParams = z.object({ projectId: Id, userId: Id }).strict();
export type ProjectMemberParams = z.infer<typeof ProjectMemberParams>;

/**
 * A policy is published either as a parsed document (JSON) or as the administrator's YAML/JSON
 * text, which is kept verbatim so comments survive in the history.
 */
export const PublishPolicyRequest = z
  .object({
    document: z.unknown().optional(),
    sourceText: limitedText('policySourceBytes').optional(),
    comment: z.string().max(1000).default(''),
  })
  .strict()
  .refine((b) => (b.document === undefined) !== (b.sourceText === undefined), {
    message: 'give exactly one of "document" or "sourceText"',
    path: ['document'],
  });
export type PublishPolicyRequest = z.infer<typeof PublishPolicyRequest>;

export const PolicyVersionView = z.object({
  id: Id,
  projectId: Id,
  version: z.number().int().positive(),
  document: z.unknown(),
  sourceText: z.string().nullable(),
  authorId: Id.nullable(),
  comment: z.string(),
  createdAt: IsoTimestamp,
});
export type PolicyVersionView = z.infer<typeof PolicyVersionView>;

export const PolicyVersionSummary = PolicyVersionView.omit({ document: true, sourceText: true });
export type PolicyVersionSummary = z.infer<typeof PolicyVersionSummary>;

export const PolicyVersionParams = z.object({ projectId: Id, version: z.coerce.number().int().positive() }).strict();
export type PolicyVersionParams = z.infer<typeof PolicyVersionParams>;

export const PolicyDiffQuery = z.object({ from: z.coerce.number().int().positive(), to: z.coerce.number().int().positive() }).strict();
export type PolicyDiffQuery = z.infer<typeof PolicyDiffQuery>;

export const PolicyDiffResponse = z.object({ from: z.number().int(), to: z.number().int(), patch: z.string() });
export type PolicyDiffResponse = z.infer<typeof PolicyDiffResponse>;

export const RollbackPolicyRequest = z.object({ version: z.number().int().positive(), comment: z.string().max(1000).default('') }).strict();
export type RollbackPolicyRequest = z.infer<typeof RollbackPolicyRequest>;

export const PrepareEnvironmentBody = z
  .object({
    /** Prepare again even when the current inputs are already prepared. */
    force: z.boolean().default(false),
  })
  .strict();
export type PrepareEnvironmentBody = z.infer<typeof PrepareEnvironmentBody>;

export const EnvironmentLogParams = z.object({ projectId: Id, jobId: z.string().min(1).max(64) }).strict();
export const EnvironmentLogQueryParams = z.object({ offset: z.coerce.number().int().nonnegative().default(0) }).strict();
