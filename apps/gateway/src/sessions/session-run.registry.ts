import { Injectable } from '@nestjs/common';

/** `sandbox_lost`: the exec-host holding the session's sandbox was declared lost (the session fails, class sandbox_lost). */
export type CancelReason = 'stopped' | 'revoked' | 'sandbox_lost';

/**
 * Where a running session loop registers its AbortController, so a stop or a revocation arriving on
 * any request cancels the work in progress at once (A3, A4). A loop checks `signal.aborted` between
 * steps and passes the signal to every model request and exec-host call.
 */
@Injectable()
export class SessionRunRegistry {
  private readonly runs = new Map<string, AbortController>();

  /** Returns the signal the loop must honour and a function to call when the loop ends. */
  register(sessionId: string): { signal: AbortSignal; done: () => void } {
    if (this.runs.has(sessionId)) throw new Error(`Session ${sessionId} already has a running loop; one run at a time per session.`);
    const controller = new AbortController();
    this.runs.set(sessionId, controller);
    return {
      signal: controller.signal,
      done: () => {
        if (this.runs.get(sessionId) === controller) this.runs.delete(sessionId);
      },
    };
  }

  isRunning(sessionId: string): boolean {
    return this.runs.has(sessionId);
  }

  /** True when a loop was running here and has been told to stop. */
  cancel(sessionId: string, reason: CancelReason): boolean {
    const controller = this.runs.get(sessionId);
    if (!controller) return false;
    this.runs.delete(sessionId);
    controller.abort(reason);
    return true;
  }

  cancelAll(reason: CancelReason): void {
    for (const id of [...this.runs.keys()]) this.cancel(id, reason);
  }
}
