import { LoginRateLimiter } from '../../../src/auth/login-rate-limiter';
import { MemoryLoginFailureStore } from '../../support/login-failure-store';

describe('LoginRateLimiter', () => {
  it('stops an account after the maximum failures and lets it try again when the window has passed', async () => {
    let now = 1_000_000;
    const limiter = new LoginRateLimiter(new MemoryLoginFailureStore(), 3, 60_000, () => now);
    const keys = ['account:a@x', 'ip:1.2.3.4'];
    for (let i = 0; i < 3; i++) {
      expect(await limiter.retryAfterSeconds(keys)).toBe(0);
      await limiter.recordFailure(keys);
    }
    expect(await limiter.retryAfterSeconds(keys)).toBe(60);
    now += 30_000;
    expect(await limiter.retryAfterSeconds(keys)).toBe(30);
    now += 30_001;
    expect(await limiter.retryAfterSeconds(keys)).toBe(0);
  });

  it('gives an address more room than an account, and a success clears the account', async () => {
    const limiter = new LoginRateLimiter(new MemoryLoginFailureStore(), 2, 60_000, () => 0);
    await limiter.recordFailure(['account:a@x', 'ip:9.9.9.9']);
    await limiter.recordFailure(['account:b@x', 'ip:9.9.9.9']);
    expect(await limiter.retryAfterSeconds(['ip:9.9.9.9'])).toBe(0);
    await limiter.recordFailure(['account:a@x']);
    expect(await limiter.retryAfterSeconds(['account:a@x'])).toBeGreaterThan(0);
    await limiter.recordSuccess('account:a@x');
    expect(await limiter.retryAfterSeconds(['account:a@x'])).toBe(0);
  });

  it('forgets expired failures instead of keeping every key it ever saw', async () => {
    let now = 0;
    const store = new MemoryLoginFailureStore();
    const limiter = new LoginRateLimiter(store, 3, 1000, () => now);
    for (let i = 0; i <= 5_000; i++) await limiter.recordFailure([`account:${i}@x`]);
    now = 5000;
    await limiter.recordFailure(['account:late@x']);
    expect(store.trackedKeys).toBe(1);
  });

  it('two limiters on one store pace the same guesser (replicas share the database)', async () => {
    const store = new MemoryLoginFailureStore();
    const a = new LoginRateLimiter(store, 2, 60_000, () => 0);
    const b = new LoginRateLimiter(store, 2, 60_000, () => 0);
    await a.recordFailure(['account:a@x']);
    await b.recordFailure(['account:a@x']);
    expect(await a.retryAfterSeconds(['account:a@x'])).toBe(60);
    expect(await b.retryAfterSeconds(['account:a@x'])).toBe(60);
  });
});
