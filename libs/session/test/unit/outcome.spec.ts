import { GuardrailStopReason, SessionStatus } from '@lemniscate/contracts';
import { childReport, exitCodeFor, finalSummaryPrompt, needsSummaryTurn, outcomes, stopMessage, type SessionOutcome } from '../../src/outcome';

describe('session outcomes', () => {
  it('use only the statuses and stop reasons of the shared contract', () => {
    const all: SessionOutcome[] = [outcomes.completed(), outcomes.crashed('boom'), ...GuardrailStopReason.options.map((r) => outcomes.stopped(r))];
    for (const outcome of all) {
      expect(SessionStatus.options).toContain(outcome.status);
      if (outcome.status === 'stopped') expect(GuardrailStopReason.options).toContain(outcome.stopReason);
      else expect(outcome.stopReason).toBe(outcome.status === 'completed' ? null : 'crash');
    }
  });

  it('map to exit codes 0 completed, 3 every guardrail stop, 1 crash', () => {
    expect(exitCodeFor(outcomes.completed())).toBe(0);
    for (const reason of GuardrailStopReason.options) expect(exitCodeFor(outcomes.stopped(reason))).toBe(3);
    expect(exitCodeFor(outcomes.crashed('exec-host unreachable'))).toBe(1);
  });

  it('keep a detail only when there is one', () => {
    expect(outcomes.stopped('loop')).toEqual({ status: 'stopped', stopReason: 'loop' });
    expect(outcomes.stopped('refused', 'bad config')).toEqual({ status: 'stopped', stopReason: 'refused', detail: 'bad config' });
  });
});

describe('stopMessage', () => {
  it('says a limit is a limit, not the end of the task (L3)', () => {
    const actions = stopMessage(outcomes.stopped('limit_actions'), { actionsLimit: 150 });
    expect(actions).toBe('The session stopped at its action limit (150 actions). This is a limit, not the end of the task: the summary says what is done, in progress and remaining.');
    expect(stopMessage(outcomes.stopped('limit_minutes'), { minutesLimit: 45 })).toContain('time limit (45 minutes). This is a limit, not the end of the task');
    expect(stopMessage(outcomes.stopped('limit_actions'))).toContain('at its action limit. This is a limit');
  });

  it('names every other ending in a sentence, with its detail', () => {
    expect(stopMessage(outcomes.stopped('loop', 'Read {"path":"a"} came 4 times in a row.'))).toBe(
      'The session stopped because the agent was repeating itself; the task is not finished. Read {"path":"a"} came 4 times in a row.',
    );
    expect(stopMessage(outcomes.stopped('revoked'))).toBe('An administrator revoked the session; the task is not finished.');
    expect(stopMessage(outcomes.stopped('stopped'))).toBe('The session was stopped on request; the task is not finished.');
    expect(stopMessage(outcomes.stopped('refused', 'LEMNISCATE_SESSION_MAX_ACTIONS=abc is not a whole number of actions; fix or unset it.'))).toBe(
      'The session was refused before it started. LEMNISCATE_SESSION_MAX_ACTIONS=abc is not a whole number of actions; fix or unset it.',
    );
    expect(stopMessage(outcomes.completed())).toBe('The session completed.');
    expect(stopMessage(outcomes.crashed('the sandbox disappeared'))).toBe('The session failed: the sandbox disappeared. This is a fault, not a guardrail; the approved changes so far are kept.');
  });
});

describe('the final summary turn', () => {
  it('follows limits and loops, and nothing else', () => {
    expect(needsSummaryTurn(outcomes.stopped('limit_actions'))).toBe(true);
    expect(needsSummaryTurn(outcomes.stopped('limit_minutes'))).toBe(true);
    expect(needsSummaryTurn(outcomes.stopped('loop'))).toBe(true);
    for (const reason of ['revoked', 'stopped', 'refused'] as const) expect(needsSummaryTurn(outcomes.stopped(reason))).toBe(false);
    expect(needsSummaryTurn(outcomes.completed())).toBe(false);
    expect(needsSummaryTurn(outcomes.crashed('x'))).toBe(false);
  });

  it('asks for done / in progress / remaining and says no tool is left', () => {
    const prompt = finalSummaryPrompt('limit_actions');
    expect(prompt).toContain('action limit');
    expect(prompt).toContain('No tools are available any more');
    for (const part of ['Done:', 'In progress:', 'Remaining:']) expect(prompt).toContain(part);
    expect(finalSummaryPrompt('limit_minutes')).toContain('time limit');
    expect(finalSummaryPrompt('loop')).toContain('the same tool call kept being repeated');
  });
});

describe('childReport', () => {
  it('says finished, cut short by which guardrail, or interrupted', () => {
    expect(childReport(outcomes.completed())).toEqual({ report: 'finished', text: 'finished' });
    expect(childReport(outcomes.stopped('limit_actions'))).toEqual({ report: 'cut_short', text: 'cut short by a guardrail (action limit)' });
    expect(childReport(outcomes.stopped('limit_minutes')).text).toBe('cut short by a guardrail (time limit)');
    expect(childReport(outcomes.stopped('loop')).text).toBe('cut short by a guardrail (loop detection)');
    expect(childReport(outcomes.stopped('revoked')).text).toBe('cut short by a guardrail (revocation)');
    expect(childReport(outcomes.stopped('refused')).text).toBe('cut short by a guardrail (refused at start)');
    expect(childReport(outcomes.stopped('stopped'))).toEqual({ report: 'interrupted', text: 'interrupted' });
    expect(childReport(outcomes.crashed('x'))).toEqual({ report: 'interrupted', text: 'interrupted' });
  });
});
