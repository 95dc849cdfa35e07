import { assertUnreachable, type GuardrailStopReason } from '@lemniscate/contracts';

/**
 * How a session ended, in the values of DESIGN.md's CLI contract, and what follows from it: the
 * exit code (L4), the stop message (L3), the final summary prompt and a child's report (AG5).
 */

export type SessionOutcome =
  { status: 'completed'; stopReason: null } | { status: 'stopped'; stopReason: GuardrailStopReason; detail?: string } | { status: 'failed'; stopReason: 'crash'; detail: string };

export const outcomes = {
  completed: (): SessionOutcome => ({ status: 'completed', stopReason: null }),
  stopped: (stopReason: GuardrailStopReason, detail?: string): SessionOutcome => (detail === undefined ? { status: 'stopped', stopReason } : { status: 'stopped', stopReason, detail }),
  crashed: (detail: string): SessionOutcome => ({ status: 'failed', stopReason: 'crash', detail }),
};

const EXIT_CODES = { completed: 0, crash: 1, guardrail: 3 } as const;
export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

/** L4: 0 done, 1 broken, 3 not finished because something stopped it, so a script can tell them apart. */
export function exitCodeFor(outcome: SessionOutcome): ExitCode {
  switch (outcome.status) {
    case 'completed':
      return EXIT_CODES.completed;
    case 'stopped':
      return EXIT_CODES.guardrail;
    case 'failed':
      return EXIT_CODES.crash;
    default:
      return assertUnreachable(outcome);
  }
}

export interface StopContext {
  actionsLimit?: number | null;
  minutesLimit?: number;
}

/** The sentence shown at the end of a session; for a limit it says a limit was reached, not the task finished (L3). */
export function stopMessage(outcome: SessionOutcome, context: StopContext = {}): string {
  if (outcome.status === 'completed') return 'The session completed.';
  if (outcome.status === 'failed') {
    return `The session failed: ${outcome.detail}. This is a fault, not a guardrail; the approved changes so far are kept.`;
  }
  const suffix = outcome.detail ? ` ${outcome.detail}` : '';
  const reason = outcome.stopReason;
  switch (reason) {
    case 'limit_actions': {
      const limit = context.actionsLimit ? ` (${context.actionsLimit} actions)` : '';
      return `The session stopped at its action limit${limit}. This is a limit, not the end of the task: the summary says what is done, in progress and remaining.${suffix}`;
    }
    case 'limit_minutes': {
      const limit = context.minutesLimit ? ` (${context.minutesLimit} minutes)` : '';
      return `The session stopped at its time limit${limit}. This is a limit, not the end of the task: the summary says what is done, in progress and remaining.${suffix}`;
    }
    case 'loop':
      return `The session stopped because the agent was repeating itself; the task is not finished.${suffix}`;
    case 'revoked':
      return `An administrator revoked the session; the task is not finished.${suffix}`;
    case 'stopped':
      return `The session was stopped on request; the task is not finished.${suffix}`;
    case 'refused':
      return `The session was refused before it started.${suffix}`;
    default:
      return assertUnreachable(reason);
  }
}

/** Stops after which the model gets one last turn, with no tools, to write its summary (L3). */
export type SummaryReason = Extract<GuardrailStopReason, 'limit_actions' | 'limit_minutes' | 'loop'>;

export function needsSummaryTurn(outcome: SessionOutcome): outcome is SessionOutcome & { stopReason: SummaryReason } {
  return outcome.status === 'stopped' && (outcome.stopReason === 'limit_actions' || outcome.stopReason === 'limit_minutes' || outcome.stopReason === 'loop');
}

const SUMMARY_CAUSE: Record<SummaryReason, string> = {
  limit_actions: 'This session has reached its action limit.',
  limit_minutes: 'This session has reached its time limit.',
  loop: 'This session was stopped because the same tool call kept being repeated.',
};

/** The prompt of the final turn. The gateway sends it with an empty tool catalogue: nothing runs after exhaustion. */
export function finalSummaryPrompt(reason: SummaryReason): string {
  return [
    `${SUMMARY_CAUSE[reason]} No tools are available any more and nothing else will run.`,
    'Write a short summary for the developer, in three parts:',
    'Done: what was completed and verified.',
    'In progress: what was started and in what state it was left.',
    'Remaining: what is still to do to finish the task.',
    'Do not claim the task is finished unless it is.',
  ].join('\n');
}

export type ChildReport = 'finished' | 'cut_short' | 'interrupted';

const GUARDRAIL_NAMES: Record<Exclude<GuardrailStopReason, 'stopped'>, string> = {
  limit_actions: 'action limit',
  limit_minutes: 'time limit',
  loop: 'loop detection',
  revoked: 'revocation',
  refused: 'refused at start',
};

/**
 * What a parent is told about its child (AG5), so it can tell finished work from work cut short.
 * A stop on request and a crash are interruptions: no guardrail judged the work.
 */
export function childReport(outcome: SessionOutcome): { report: ChildReport; text: string } {
  if (outcome.status === 'completed') return { report: 'finished', text: 'finished' };
  if (outcome.status === 'failed' || outcome.stopReason === 'stopped') return { report: 'interrupted', text: 'interrupted' };
  return { report: 'cut_short', text: `cut short by a guardrail (${GUARDRAIL_NAMES[outcome.stopReason]})` };
}
