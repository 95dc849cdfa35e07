import { z } from 'zod';
import { Id, IsoTimestamp, UserRole } from './common';
import { limitedText } from '../limits';
import { RepositoryAccess, repositorySourceProblem } from '../repository';

export const ProjectName = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'must be 1–63 lower-case letters, digits, ".", "-" or "_", starting with a letter or digit');

const ProjectSource = z
  .string()
  .trim()
  .min(1, 'must name where the repository comes from')
  .max(2048)
  .superRefine((source, ctx) => {
    const problem = repositorySourceProblem(source);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
const DefaultRef = z.string().trim().min(1, 'must not be empty').max(255);

export const CreateProjectRequest = z
  .object({
    name: ProjectName,
    repositorySource: ProjectSource,
    defaultRef: DefaultRef.default('main'),
  })
  .strict();
export type CreateProjectRequest = z.infer<typeof CreateProjectRequest>;

/** What an administrator may change of a project after its creation; at least one field. */
export const UpdateProjectRequest = z
  .object({
    repositorySource: ProjectSource.optional(),
    defaultRef: DefaultRef.optional(),
  })
  .strict()
  .refine((u) => u.repositorySource !== undefined || u.defaultRef !== undefined, { message: 'name at least one of repositorySource and defaultRef to change' });
export type UpdateProjectRequest = z.infer<typeof UpdateProjectRequest>;

/** A member of a project as its administrators see it. */
export const ProjectMemberView = z.object({
  userId: Id,
  email: z.string(),
  displayName: z.string(),
  role: UserRole,
  addedAt: IsoTimestamp,
});
export type ProjectMemberView = z.infer<typeof ProjectMemberView>;

export const ProjectView = z.object({
  id: Id,
  name: z.string(),
  repositorySource: z.string(),
  defaultRef: z.string(),
  createdAt: IsoTimestamp,
});
export type ProjectView = z.infer<typeof ProjectView>;

/**
 * A project's repository access as an administrator sets it (each set replaces the whole of it). The
 * credential is sealed at rest and never returned; known hosts and a CA certificate are not secret.
 */
export const SetRepositoryAccessRequest = RepositoryAccess;
export type SetRepositoryAccessRequest = z.infer<typeof SetRepositoryAccessRequest>;

/** What anyone who may read the project sees of its repository access: never the secret itself. */
export const RepositoryAccessView = z.object({
  projectId: Id,
  repositorySource: z.string(),
  transport: z.enum(['local', 'https', 'ssh']),
  defaultRef: z.string(),
  credential: z
    .object({
      kind: z.enum(['https', 'ssh']),
      /** https: the user name; the password or token is never shown. */
      username: z.string().nullable(),
      /** ssh: the SHA256 fingerprint of the key's public half, as `ssh-keygen -lf` prints it. */
      keyFingerprint: z.string().nullable(),
    })
    .nullable(),
  knownHosts: z.string().nullable(),
  caPem: z.string().nullable(),
  updatedAt: IsoTimestamp.nullable(),
  updatedBy: Id.nullable(),
});
export type RepositoryAccessView = z.infer<typeof RepositoryAccessView>;

/** The agents a project's sessions can use, read from its repository at the default ref (AG1). */
export const ProjectAgentsView = z.object({
  projectId: Id,
  ref: z.string(),
  /** The commit the agents were read at; null when the repository could not be read (see notices). */
  commit: z.string().nullable(),
  agents: z.array(
    z.object({
      name: z.string(),
      description: z.string(),
      mode: z.string(),
      tools: z.array(z.string()).nullable(),
      model: z.string().nullable(),
      readOnly: z.boolean(),
      origin: z.string(),
      location: z.string(),
    }),
  ),
  notices: z.array(z.object({ level: z.enum(['error', 'warning', 'note']), code: z.string(), location: z.string(), message: z.string() })),
});
export type ProjectAgentsView = z.infer<typeof ProjectAgentsView>;

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
  /** Who published it, for display; null for the system or a removed account. */
  authorEmail: z.string().nullable(),
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

/** How a tool a server listed stands against the policy's pins (AG7). */
export const McpToolStatus = z.enum(['pinned', 'unpinned', 'changed']);

/**
 * A project's MCP servers as the policy in force declares them, and what each listed when a session
 * last started it (read from the audit log): the pin of every tool's description, for an
 * administrator to approve by publishing it under `pinned`. A credential is named and said to be
 * held or not, never shown.
 */
export const ProjectMcpView = z.object({
  projectId: z.string(),
  policyVersion: z.number().int().nullable(),
  servers: z.array(
    z.object({
      name: z.string(),
      kind: z.enum(['local', 'remote']),
      command: z.array(z.string()).optional(),
      url: z.string().optional(),
      credential: z.object({ name: z.string(), held: z.boolean() }).nullable(),
      tools: z.object({ default: z.enum(['allow', 'ask', 'deny']), free: z.array(z.string()), forbidden: z.array(z.string()), readOnly: z.array(z.string()) }),
      pinned: z.record(z.string(), z.string()),
      lastListing: z
        .object({
          at: z.string(),
          sessionId: z.string().nullable(),
          tools: z.array(z.object({ name: z.string(), description: z.string(), pin: z.string(), status: McpToolStatus })),
        })
        .nullable(),
      /** Why the server could not be listed the last time a session tried, when that is the latest news of it. */
      lastError: z.object({ at: z.string(), message: z.string() }).nullable(),
    }),
  ),
});
export type ProjectMcpView = z.infer<typeof ProjectMcpView>;
