/**
 * Failed logins per account and per address within a sliding window. Counting failures (not
 * attempts) keeps a person who types their password right from ever being slowed down, while a
 * guesser is stopped after a handful of tries on any one account or from any one address.
 */
const MAX_TRACKED_KEYS = 50_000;

export class LoginRateLimiter {
  private readonly failures = new Map<string, number[]>();

  get trackedKeys(): number {
    return this.failures.size;
  }

  constructor(
    private readonly maxFailures: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds to wait before the next attempt, or 0 when an attempt is allowed now. */
  retryAfterSeconds(keys: string[]): number {
    const now = this.now();
    let wait = 0;
    for (const key of keys) {
      const recent = this.recent(key, now);
      // Addresses get more room than accounts: several people may sit behind one proxy.
      const limit = key.startsWith('ip:') ? this.maxFailures * 4 : this.maxFailures;
      if (recent.length >= limit) {
        const oldest = recent[recent.length - limit] ?? now;
        wait = Math.max(wait, Math.ceil((oldest + this.windowMs - now) / 1000));
      }
    }
    return wait;
  }

  recordFailure(keys: string[]): void {
    const now = this.now();
    // Guessing with ever-new addresses or emails must not grow memory without bound.
    if (this.failures.size > MAX_TRACKED_KEYS) for (const key of [...this.failures.keys()]) this.recent(key, now);
    for (const key of keys) this.failures.set(key, [...this.recent(key, now), now]);
  }

  recordSuccess(accountKey: string): void {
    this.failures.delete(accountKey);
  }

  private recent(key: string, now: number): number[] {
    const list = (this.failures.get(key) ?? []).filter((t) => t > now - this.windowMs);
    if (list.length === 0) this.failures.delete(key);
    else this.failures.set(key, list);
    return list;
  }
}
