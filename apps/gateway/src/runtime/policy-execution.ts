import type { Policy } from '@lemniscate/policy';
import type { ExecutionCeilings } from '@lemniscate/session';

/**
 * The project policy's `execution:` values as ceilings (P1, L5). Every key counts, written or
 * defaulted: a workstation's environment, configuration or agent file may lower a limit, never
 * raise it, and loop detection stays on unless `allowToolLoopDetectionOff` is true.
 */
export function ceilingsOf(policy: Pick<Policy, 'execution'>, location: string): ExecutionCeilings {
  const { allowToolLoopDetectionOff, ...values } = policy.execution;
  return { location, values, allowToolLoopDetectionOff };
}
