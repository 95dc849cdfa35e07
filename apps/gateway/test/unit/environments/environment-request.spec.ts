import { SandboxLimits } from '@lemniscate/contracts';
import { parsePolicy } from '@lemniscate/policy';
import { AppError, ErrorCode } from '../../../src/common/errors';
import { environmentRequestFor } from '../../../src/environments/environment-request';

const project = { id: 'p1', name: 'demo', repositorySource: '/srv/git/demo.git', defaultRef: 'release' };

describe('environmentRequestFor', () => {
  it("describes the project's environment from its default ref and its policy", () => {
    const policy = parsePolicy({
      version: 1,
      sandbox: { runtime: 'runsc', cpus: 4, memoryMb: 4096, pids: 300, diskMb: 8192 },
      environment: { mirrors: ['https://npm.corp.example/'], setupTimeoutSeconds: 900 },
    });
    expect(environmentRequestFor(project, policy)).toEqual({
      projectId: 'p1',
      repository: { source: '/srv/git/demo.git', ref: 'release' },
      runtime: 'runsc',
      mirrors: ['https://npm.corp.example/'],
      limits: { cpus: 4, memoryMb: 4096, pids: 300, diskMb: 8192 },
      setupTimeoutSeconds: 900,
    });
  });

  it('keeps every value within what the exec-host accepts: the set-up time at least 10 s, limits at their maxima', () => {
    const policy = parsePolicy({ version: 1, sandbox: { cpus: 256, memoryMb: 1024 * 1024, pids: 1_000_000, diskMb: 10 * 1024 * 1024 }, environment: { setupTimeoutSeconds: 1 } });
    const request = environmentRequestFor(project, policy);
    expect(request.setupTimeoutSeconds).toBe(10);
    expect(request.limits).toEqual({
      cpus: SandboxLimits.shape.cpus.maxValue,
      memoryMb: SandboxLimits.shape.memoryMb.maxValue,
      pids: SandboxLimits.shape.pids.maxValue,
      diskMb: SandboxLimits.shape.diskMb.maxValue,
    });
    const small = environmentRequestFor(project, parsePolicy({ version: 1, sandbox: { pids: 1, memoryMb: 1, diskMb: 1 } }));
    expect(small.limits).toMatchObject({ pids: 16, memoryMb: 64, diskMb: 16 });
  });

  it('names the setting when the policy holds a value the exec-host would refuse', () => {
    const policy = parsePolicy({ version: 1 });
    const bad = { ...policy, environment: { ...policy.environment, mirrors: Array.from({ length: 51 }, (_, i) => `https://m${i}.example/`) } };
    let error: unknown;
    try {
      environmentRequestFor(project, bad);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe(ErrorCode.PolicyInvalid);
    expect((error as AppError).message).toMatch(/^The environment of project "demo" cannot be described to the exec-host from its policy \(mirrors: .*\); publish a corrected policy\.$/);
  });
});
