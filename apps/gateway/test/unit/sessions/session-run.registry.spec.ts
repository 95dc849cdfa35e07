import { SessionRunRegistry } from '../../../src/sessions/session-run.registry';

describe('SessionRunRegistry', () => {
  it('cancels a registered loop with the reason, once', async () => {
    const registry = new SessionRunRegistry();
    const { signal } = registry.register('s1');
    const aborted = new Promise<unknown>((resolve) => signal.addEventListener('abort', () => resolve(signal.reason)));
    expect(registry.isRunning('s1')).toBe(true);
    expect(registry.cancel('s1', 'revoked')).toBe(true);
    await expect(aborted).resolves.toBe('revoked');
    expect(registry.isRunning('s1')).toBe(false);
    expect(registry.cancel('s1', 'revoked')).toBe(false);
  });

  it('refuses a second run of the same session (X5) and forgets a finished one', () => {
    const registry = new SessionRunRegistry();
    const run = registry.register('s1');
    expect(() => registry.register('s1')).toThrow(/one run at a time/);
    run.done();
    expect(registry.isRunning('s1')).toBe(false);
    expect(() => registry.register('s1').done()).not.toThrow();
  });

  it('a finished run does not unregister its successor', () => {
    const registry = new SessionRunRegistry();
    const first = registry.register('s1');
    registry.cancel('s1', 'stopped');
    registry.register('s1');
    first.done();
    expect(registry.isRunning('s1')).toBe(true);
  });
});
