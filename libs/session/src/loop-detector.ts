import { canonicalJson } from './canonical-json';
import type { ExecutionConfig } from './execution-config';

/**
 * Loop detection (L6): the same tool call with exactly the same arguments, more than `threshold`
 * times in a row, is blocked before it runs. The window is consecutive on purpose: reading a file
 * again after changing it is not a loop.
 */

/** What the model is told, word for word: without it, the model retries and the guardrail becomes the loop. */
export const LOOP_BLOCKED_MESSAGE = 'blocked for repetition, do not retry';

export interface ToolCall {
  name: string;
  arguments: unknown;
}

export interface RepeatedCall {
  name: string;
  arguments: unknown;
  /** How many times in a row it was proposed, the blocked one included. */
  repetitions: number;
}

export type LoopVerdict =
  | { blocked: false }
  | {
      blocked: true;
      repeated: RepeatedCall;
      /** The tool result the model receives instead of running the call. */
      messageToModel: string;
      /** For the person the session is handed back to. */
      handBack: string;
    };

export class LoopDetector {
  private lastKey: string | null = null;
  private streak = 0;

  constructor(
    private readonly threshold: number,
    readonly enabled: boolean,
  ) {
    if (!Number.isSafeInteger(threshold) || threshold < 1) throw new RangeError(`toolLoopThreshold must be a whole number, 1 or more; got ${threshold}.`);
  }

  /** The main session's detector: off only when the configuration says `toolLoopDetection: false`. */
  static forMainSession(config: Pick<ExecutionConfig, 'toolLoopThreshold' | 'toolLoopDetection'>): LoopDetector {
    return new LoopDetector(config.toolLoopThreshold, config.toolLoopDetection !== false);
  }

  /** Children keep loop detection whatever the configuration says: nobody watches them (AG5). */
  static forChild(config: Pick<ExecutionConfig, 'toolLoopThreshold'>): LoopDetector {
    return new LoopDetector(config.toolLoopThreshold, true);
  }

  /** Records a proposed call and says whether it may run. Call it once per proposed call, in order. */
  observe(call: ToolCall): LoopVerdict {
    if (!this.enabled) return { blocked: false };
    const key = `${call.name}\u0000${canonicalJson(call.arguments)}`;
    if (key === this.lastKey) {
      this.streak += 1;
    } else {
      this.lastKey = key;
      this.streak = 1;
    }
    if (this.streak <= this.threshold) return { blocked: false };
    const shown = `${call.name} ${canonicalJson(call.arguments)}`;
    return {
      blocked: true,
      repeated: { name: call.name, arguments: call.arguments, repetitions: this.streak },
      messageToModel: `${LOOP_BLOCKED_MESSAGE}: ${shown} was proposed ${this.streak} times in a row.`,
      handBack: `Stopped by loop detection: the agent proposed ${shown} ${this.streak} times in a row with the same arguments; the last call did not run.`,
    };
  }
}
