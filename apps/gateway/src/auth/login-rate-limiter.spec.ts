import { LoginRateLimiter } from './login-rate-limiter';

describe('LoginRateLimiter', () => {
  it('stops an account after the maximum failures and lets it try again when the window has passed', () => {
    let now = 1_000_000;
    const limiter = new LoginRateLimiter(3, 60_000, () => now);
    const keys = ['account:a@x', 'ip:1.2.3.4'];
    for (let i = 0; i < 3; i++) {
      expect(limiter.retryAfterSeconds(keys)).toBe(0);
      limiter.recordFailure(keys);
    }
    expect(limiter.retryAfterSeconds(keys)).toBe(60);
    now += 30_000;
    expect(limiter.retryAfterSeconds(keys)).toBe(30);
    now += 30_001;
    expect(limiter.retryAfterSeconds(keys)).toBe(0);
  });

  it('gives an address more room than an account, and a success clears the account', () => {
    const limiter = new LoginRateLimiter(2, 60_000, () => 0);
    limiter.recordFailure(['account:a@x', 'ip:9.9.9.9']);
    limiter.recordFailure(['account:b@x', 'ip:9.9.9.9']);
    expect(limiter.retryAfterSeconds(['ip:9.9.9.9'])).toBe(0);
    limiter.recordFailure(['account:a@x']);
    expect(limiter.retryAfterSeconds(['account:a@x'])).toBeGreaterThan(0);
    limiter.recordSuccess('account:a@x');
    expect(limiter.retryAfterSeconds(['account:a@x'])).toBe(0);
  });

  it('forgets expired failures instead of keeping every key it ever saw', () => {
    let now = 0;
    const limiter = new LoginRateLimiter(3, 1000, () => now);
    for (let i = 0; i <= 50_001; i++) limiter.recordFailure([`account:${i}@x`]);
    now = 5000;
    limiter.recordFailure(['account:late@x']);
    expect(limiter.trackedKeys).toBe(1);
  });
});
