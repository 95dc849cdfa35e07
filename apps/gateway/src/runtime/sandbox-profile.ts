import type { Policy } from '@lemniscate/policy';
import type { SandboxLimits } from '@lemniscate/contracts';

/**
 * The resources a session's sandbox is asked for, from the policy's `sandbox` section. The
 * exec-host keeps the profile of the policy's defaults warm from start-up (SESSION_DEFAULT_PROFILE
 * in libs/contracts); `test/unit/warm-profile.spec.ts` checks the two agree.
 */
export function sandboxProfile(sandbox: Policy['sandbox']): Pick<SandboxLimits, 'cpus' | 'memoryMb' | 'pids' | 'diskMb'> {
  return { cpus: sandbox.cpus, memoryMb: sandbox.memoryMb, pids: Math.max(16, sandbox.pids), diskMb: sandbox.diskMb };
}
