import type { LoginFailureStore } from '../../src/auth/login-rate-limiter';

/** The gateway's login failure store in memory, for tests that have no database. */
export class MemoryLoginFailureStore implements LoginFailureStore {
  private readonly failures = new Map<string, number[]>();

  get trackedKeys(): number {
    return this.failures.size;
  }

  async recent(keys: readonly string[], since: Date): Promise<Map<string, number[]>> {
    return new Map(keys.map((k) => [k, (this.failures.get(k) ?? []).filter((t) => t > since.getTime())]));
  }

  async record(keys: readonly string[], at: Date, forgetBefore: Date): Promise<void> {
    for (const [key, list] of this.failures) {
      const kept = list.filter((t) => t >= forgetBefore.getTime());
      if (kept.length === 0) this.failures.delete(key);
      else this.failures.set(key, kept);
    }
    for (const key of keys) this.failures.set(key, [...(this.failures.get(key) ?? []), at.getTime()]);
  }

  async clear(key: string): Promise<void> {
    this.failures.delete(key);
  }
}
