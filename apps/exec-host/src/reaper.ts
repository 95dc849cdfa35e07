import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { ExecHostConfig } from './config';
import { LABEL_SANDBOX, type SandboxDriver } from './driver/sandbox.driver';
import type { SandboxService } from './sandbox.service';

/** What the reaper asks of the sandboxes; every ownership question is asked at the moment it decides. */
export type ReapedSandboxes = Pick<SandboxService, 'expired' | 'destroy' | 'owns' | 'markLostIfStopped' | 'cleanup' | 'sandboxesDir'>;

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
    private readonly sandboxes: ReapedSandboxes,
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
    // No snapshot of the live set is taken before the engine answers: a sandbox may finish being
    // created, or start being destroyed, while the listing is under way. Ownership is read per item,
    // after the engine's answer, and nothing not owned then can become owned again (ids are new).
    for (const c of await this.driver.listManaged(this.config.instance)) {
      const owner = c.labels[LABEL_SANDBOX];
      if (owner && this.sandboxes.owns(owner)) {
        if (!c.running && (await this.sandboxes.markLostIfStopped(owner, c.id))) report.lost++;
        continue;
      }
      // Listed before its sandbox's destroy finished: already removed, nothing to reap.
      if ((await this.driver.status(c.id).catch(() => undefined)) === null) continue;
      this.log(`Removing orphan container ${c.name} (sandbox ${owner ?? 'unknown'}).`);
      await this.driver.remove(c.id);
      report.containers++;
    }
    const dir = this.sandboxes.sandboxesDir;
    const entries = await fs.readdir(dir).catch(() => [] as string[]);
    for (const name of entries) {
      // A sandbox being created has its directory before it is registered; one being destroyed keeps
      // it until its clean-up is over: both are owned.
      if (this.sandboxes.owns(name)) continue;
      // Listed before its sandbox's destroy finished: already removed, nothing to reap.
      if (
        !(await fs.lstat(path.join(dir, name)).then(
          () => true,
          () => false,
        ))
      )
        continue;
      this.log(`Removing orphan working directory ${name}.`);
      await this.sandboxes.cleanup(null, path.join(dir, name));
      report.directories++;
    }
    return report;
  }
}
