// The grammar's bytes cannot be read: initialisation fails with a sentence, and can be retried.
const mockReadFile = jest.fn();
jest.mock('node:fs/promises', () => ({ readFile: (...args: unknown[]) => mockReadFile(...args) }));

import { initPolicyEngine, isPolicyEngineReady } from '../../src/shell/parser';

describe('initPolicyEngine when the grammar cannot be loaded', () => {
  it('rejects with the cause, stays uninitialised, and tries again on the next call', async () => {
    mockReadFile.mockRejectedValueOnce(Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' }));
    await expect(initPolicyEngine()).rejects.toThrow('The policy engine could not load its bash parser: EACCES: permission denied');
    expect(isPolicyEngineReady()).toBe(false);

    const real = jest.requireActual<typeof import('node:fs/promises')>('node:fs/promises');
    mockReadFile.mockImplementation((p: string) => real.readFile(p));
    await initPolicyEngine();
    expect(isPolicyEngineReady()).toBe(true);
  });
});
