import { StopReason } from '../../src/api/sessions';
import { EventClass, GuardrailStopReason, SESSION_EVENT_TYPES, SessionEvent, TERMINAL_EVENT_TYPES } from '../../src/events';

const head = { seq: 7, sessionId: 'ses_01', at: '2026-11-29T19:00:00.000Z' };

describe('SessionEvent', () => {
  it('accepts a well-formed event of every kind the loop emits', () => {
    const samples: unknown[] = [
      {
        ...head,
        type: 'session_started',
        project: 'demo',
        agent: null,
        model: 'scripted',
        headless: true,
        parentSessionId: null,
        depth: 0,
        limits: { maxActions: 150, maxMinutes: 45, maxExtensions: 5, loopThreshold: 3 },
        workingCopy: { baseCommit: 'abc123', branch: 'main', includesUncommitted: false, treeFingerprint: 'sha256:00' },
      },
      { ...head, type: 'instruction', text: 'fix the tests', author: { kind: 'user', userId: 'u1' } },
      { ...head, type: 'tool_call_proposed', callId: 'c1', agent: 'main', name: 'Bash', arguments: { command: 'npm test' } },
      { ...head, type: 'decision', callId: 'c1', effect: 'deny', rule: 'commands.deny[0]', reason: 'curl is forbidden', thirdParty: false, class: 'policy_denied' },
      { ...head, type: 'approval_requested', approvalId: 'a1', callId: 'c1', agent: 'explore', kind: 'diff', thirdParty: true, subject: '--- a/x\n+++ b/x\n' },
      { ...head, type: 'approval_answered', approvalId: 'a1', answer: 'rejected', by: { kind: 'process', description: 'lemni -p' }, class: 'approval_refused_headless' },
      { ...head, type: 'tool_result', callId: 'c1', exitCode: null, stdout: '', stderr: '', truncated: false, durationMs: 12, class: 'sandbox_lost' },
      { ...head, type: 'changes_detected', callId: 'c1', files: [{ path: 'package.json', change: 'modified', thirdParty: true }] },
      { ...head, type: 'change_reverted', class: 'change_reverted', paths: ['package.json'], because: 'rejected' },
      { ...head, type: 'limit_reached', class: 'limit_actions', actionsUsed: 150, minutesUsed: 3.5 },
      { ...head, type: 'extension_granted', kind: 'actions', amount: 50, extensionsUsed: 1, by: { kind: 'user', userId: 'u1' } },
      { ...head, type: 'extension_refused', class: 'extension_refused', reason: 'the 5 extensions are used' },
      { ...head, type: 'loop_blocked', class: 'loop', callId: 'c4', name: 'Read', arguments: { path: 'a' }, repetitions: 4 },
      { ...head, type: 'subagent_started', childSessionId: 'ses_02', agent: 'explore', depth: 1, background: false },
      { ...head, type: 'subagent_refused', class: 'subagent_max_depth', agent: 'general', reason: 'depth 3 reached' },
      { ...head, type: 'subagent_finished', childSessionId: 'ses_02', agent: 'explore', report: 'cut_short', stopReason: 'limit_actions' },
      { ...head, type: 'question', questionId: 'q1', question: 'Which?', options: [], answer: 'state your assumption and continue', class: 'question_default_headless' },
      { ...head, type: 'model_text', text: 'Looking at the tests.' },
      { ...head, type: 'compaction', tokensBefore: 90_000, tokensAfter: 12_000, actionsUsed: 40 },
      { ...head, type: 'stalled', class: 'model_timeout', idleMs: 60_000 },
      { ...head, type: 'session_stopped', status: 'stopped', stopReason: 'loop', class: 'loop', summary: 'Done: …', exitCode: 3 },
      { ...head, type: 'session_completed', status: 'completed', stopReason: null, summary: 'Done.', exitCode: 0 },
      { ...head, type: 'session_failed', status: 'failed', stopReason: 'crash', class: 'crash', message: 'exec-host unreachable', exitCode: 1 },
    ];
    const types = samples.map((sample) => {
      const parsed = SessionEvent.safeParse(sample);
      if (!parsed.success) throw new Error(`${(sample as { type: string }).type}: ${parsed.error.message}`);
      return parsed.data.type;
    });
    // A new event type must come with a sample here.
    expect(new Set(types)).toEqual(new Set(SESSION_EVENT_TYPES));
  });

  it('refuses an unknown type, a missing seq and a timestamp without a zone', () => {
    expect(SessionEvent.safeParse({ ...head, type: 'telepathy' }).success).toBe(false);
    expect(SessionEvent.safeParse({ sessionId: 'ses_01', at: head.at, type: 'model_text', text: 'x' }).success).toBe(false);
    expect(SessionEvent.safeParse({ ...head, at: '2026-11-29 19:00', type: 'model_text', text: 'x' }).success).toBe(false);
    expect(SessionEvent.safeParse({ ...head, seq: -1, type: 'model_text', text: 'x' }).success).toBe(false);
  });

  it('keeps classes to the values allowed for each event', () => {
    const stalled = { ...head, type: 'stalled', idleMs: 1 };
    expect(SessionEvent.safeParse({ ...stalled, class: 'model_timeout' }).success).toBe(true);
    expect(SessionEvent.safeParse({ ...stalled, class: 'loop' }).success).toBe(false);
    expect(SessionEvent.safeParse({ ...stalled, class: 'stalled for a while' }).success).toBe(false);
  });

  it('ties endings to their exit codes so a stream reader cannot get them wrong', () => {
    const stopped = { ...head, type: 'session_stopped', status: 'stopped', stopReason: 'limit_minutes', class: 'limit_minutes', summary: null };
    expect(SessionEvent.safeParse({ ...stopped, exitCode: 3 }).success).toBe(true);
    expect(SessionEvent.safeParse({ ...stopped, exitCode: 0 }).success).toBe(false);
    expect(SessionEvent.safeParse({ ...stopped, stopReason: 'tired', class: 'tired', exitCode: 3 }).success).toBe(false);
    // A crash is not a guardrail stop: it ends as session_failed with exit code 1.
    expect(SessionEvent.safeParse({ ...stopped, stopReason: 'crash', class: 'crash', exitCode: 3 }).success).toBe(false);
    expect(GuardrailStopReason.options).toEqual(['limit_actions', 'limit_minutes', 'loop', 'revoked', 'stopped', 'refused']);
    expect(TERMINAL_EVENT_TYPES).toEqual(['session_stopped', 'session_completed', 'session_failed']);
  });

  it('lists every stop reason among the event classes', () => {
    for (const reason of StopReason.options) expect(EventClass.options).toContain(reason);
  });
});
