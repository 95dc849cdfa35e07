/**
 * Failed logins per account and per address within a sliding window. Counting failures (not
 * attempts) keeps a person who types their password right from ever being slowed down, while a
 * guesser is stopped after a handful of tries on any one account or from any one address. The
 * failures live in a store: the gateway's database, so every replica paces the same guesser.
 */
export interface LoginFailureStore {
  /** Failures since `since` per key, epoch milliseconds, oldest first. */
  recent(keys: readonly string[], since: Date): Promise<Map<string, number[]>>;
  /** One failure per key at `at`; failures older than `forgetBefore` may be dropped. */
  record(keys: readonly string[], at: Date, forgetBefore: Date): Promise<void>;
  clear(key: string): Promise<void>;
}

export class LoginRateLimiter {
  constructor(
    private readonly store: LoginFailureStore,
    private readonly maxFailures: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds to wait before the next attempt, or 0 when an attempt is allowed now. */
  async retryAfterSeconds(keys: string[]): Promise<number> {
    const now = this.now();
    const failures = await this.store.recent(keys, new Date(now - this.windowMs));
    let wait = 0;
    for (const key of keys) {
      const recent = (failures.get(key) ?? []).filter((t) => t > now - this.windowMs);
      // Addresses get more room than accounts: several people may sit behind one proxy.
      const limit = key.startsWith('ip:') ? this.maxFailures * 4 : this.maxFailures;
      if (recent.length >= limit) {
        const oldest = recent[recent.length - limit] ?? now;
        wait = Math.max(wait, Math.ceil((oldest + this.windowMs - now) / 1000));
      }
    }
    return wait;
  }

  async recordFailure(keys: string[]): Promise<void> {
    const now = this.now();
    // Guessing with ever-new addresses or emails must not grow the store without bound.
    await this.store.record(keys, new Date(now), new Date(now - this.windowMs));
  }

  async recordSuccess(accountKey: string): Promise<void> {
    await this.store.clear(accountKey);
  }
}
