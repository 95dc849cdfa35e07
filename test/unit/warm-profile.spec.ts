// The exec-host keeps warm from start-up the resource profile sessions ask for under the policy's
// defaults (SESSION_DEFAULT_PROFILE). If the policy's defaults or the gateway's request changed
// alone, every session of a default policy would start cold while warm sandboxes of another profile
// sat idle.
import { SESSION_DEFAULT_PROFILE } from '@lemniscate/contracts';
import { parsePolicy, recommendedPolicy } from '@lemniscate/policy';
import { sandboxProfile } from '../../apps/gateway/src/runtime/sandbox-profile';

describe('the profile kept warm from start-up', () => {
  it('is what the gateway asks for under a policy that sets no sandbox section', () => {
    expect(sandboxProfile(parsePolicy({ version: 1 }).sandbox)).toEqual(SESSION_DEFAULT_PROFILE);
  });

  it('is what the gateway asks for under the recommended policy', () => {
    expect(sandboxProfile(recommendedPolicy.sandbox)).toEqual(SESSION_DEFAULT_PROFILE);
  });

  it('differs when the policy changes a resource, so such sessions are a kind of their own', () => {
    for (const field of ['cpus', 'memoryMb', 'pids', 'diskMb'] as const) {
      const sandbox = { ...parsePolicy({ version: 1 }).sandbox, [field]: SESSION_DEFAULT_PROFILE[field] * 2 };
      expect(sandboxProfile(sandbox)).not.toEqual(SESSION_DEFAULT_PROFILE);
    }
  });
});
