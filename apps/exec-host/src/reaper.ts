import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { ExecHostConfig } from './config';
import { LABEL_SANDBOX, type SandboxDriver } from './driver/sandbox.driver';
import type { SandboxService } from './sandbox.service';

export interface ReapReport {
  containers: number;
  directories: number;
  expired: number;
  lost: number;
}

/**
 * Removes what no live sandbox owns (containers of this exec-host by label, host directories under
 * the state dir) and destroys sandboxes past their lifetime. Runs at start-up, when nothing is live
 * yet, so everything a crash left behind goes, and then periodically.
 */
export class Reaper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<ReapReport> | null = null;

  constructor(
    private readonly config: ExecHostConfig,
    private readonly driver: SandboxDriver,
    private readonly sandboxes: SandboxService,
    private readonly log: (message: string) => void = () => undefined,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.reap().catch((e) => this.log(`The reaper failed: ${(e as Error).message}`)), this.config.reaperIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  reap(): Promise<ReapReport> {
    this.running ??= this.pass().finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<ReapReport> {
    const report: ReapReport = { containers: 0, directories: 0, expired: 0, lost: 0 };
    for (const id of this.sandboxes.expired()) {
      this.log(`Sandbox ${id} reached its lifetime cap and is destroyed.`);
      await this.sandboxes.destroy(id);
      report.expired++;
    }
    const live = new Set(this.sandboxes.ids());
    for (const c of await this.driver.listManaged(this.config.instance)) {
      const owner = c.labels[LABEL_SANDBOX];
      if (owner && this.sandboxes.creating.has(owner)) continue;
      if (owner && live.has(owner)) {
        if (!c.running) {
          this.sandboxes.markLost(owner);
          report.lost++;
        }
        continue;
      }
      this.log(`Removing orphan container ${c.name} (sandbox ${owner ?? 'unknown'}).`);
      await this.driver.remove(c.id);
      report.containers++;
    }
    const dir = this.sandboxes.sandboxesDir;
    const entries = await fs.readdir(dir).catch(() => [] as string[]);
    for (const name of entries) {
      if (live.has(name)) continue;
      // A sandbox being created right now has its directory before it is registered.
      if (this.sandboxes.creating.has(name)) continue;
      this.log(`Removing orphan working directory ${name}.`);
      await this.sandboxes.cleanup(null, path.join(dir, name));
      report.directories++;
    }
    return report;
  }
}
