import { EnvironmentRequest, SandboxLimits, type EnvironmentRequestParsed, type RepositoryAccess } from '@lemniscate/contracts';
import type { Policy } from '@lemniscate/policy';
import { AppError, ErrorCode } from '../common/errors';
import type { ProjectRow } from '../db/schema';

/** The shortest set-up the exec-host accepts (EnvironmentRequest.setupTimeoutSeconds). */
export const MIN_SETUP_TIMEOUT_SECONDS = 10;

/** A policy value within what the exec-host accepts for one sandbox limit (its hard maxima). */
function within(value: number, limit: keyof SandboxLimits): number {
  const schema = SandboxLimits.shape[limit];
  return Math.min(schema.maxValue ?? value, Math.max(schema.minValue ?? value, value));
}

/**
 * What identifies a project's environment (S8), built the same way for reading its status, preparing
 * it and creating every sandbox of the project: the repository at the project's default ref (never a
 * session's ref: the environment is the project's, prepared once for all its sessions) with the
 * project's access for a git URL, the policy's
 * runtime and sandbox limits for the set-up container, the policy's mirrors (nothing else is reachable
 * during set-up), and its set-up time, at least ten seconds.
 */
export function environmentRequestFor(
  project: Pick<ProjectRow, 'id' | 'name' | 'repositorySource' | 'defaultRef'>,
  policy: Pick<Policy, 'sandbox' | 'environment'>,
  access?: RepositoryAccess,
): EnvironmentRequestParsed {
  const request = EnvironmentRequest.safeParse({
    projectId: project.id,
    repository: { source: project.repositorySource, ref: project.defaultRef, ...(access ? { access } : {}) },
    runtime: policy.sandbox.runtime,
    mirrors: [...policy.environment.mirrors],
    limits: {
      cpus: within(policy.sandbox.cpus, 'cpus'),
      memoryMb: within(policy.sandbox.memoryMb, 'memoryMb'),
      pids: within(policy.sandbox.pids, 'pids'),
      diskMb: within(policy.sandbox.diskMb, 'diskMb'),
    },
    setupTimeoutSeconds: Math.max(MIN_SETUP_TIMEOUT_SECONDS, policy.environment.setupTimeoutSeconds),
  });
  if (request.success) return request.data;
  // The policy accepted it but the exec-host would not (a mirror URL without a host name): say which.
  const issues = request.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
  throw new AppError(ErrorCode.PolicyInvalid, `The environment of project "${project.name}" cannot be described to the exec-host from its policy (${issues}); publish a corrected policy.`);
}
