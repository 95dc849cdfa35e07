/** Session events shaped as libs/contracts/src/events.ts defines them (seq, sessionId, at added by the server). */
export function started(baseCommit = 'a'.repeat(40)): Record<string, unknown> {
  return {
    type: 'session_started',
    project: 'demo',
    agent: 'general',
    model: 'scripted:test.json',
    headless: true,
    parentSessionId: null,
    depth: 0,
    limits: { maxActions: 150, maxMinutes: 45, maxExtensions: 5, loopThreshold: 3 },
    workingCopy: { baseCommit, branch: 'main', includesUncommitted: false, treeFingerprint: 'sha256:abc' },
  };
}

export function bashCall(callId: string, command: string, effect: 'allow' | 'ask' | 'deny' = 'allow'): Record<string, unknown>[] {
  return [
    { type: 'tool_call_proposed', callId, agent: 'general', name: 'Bash', arguments: { command } },
    {
      type: 'decision',
      callId,
      effect,
      rule: effect === 'allow' ? 'commands.free[0]' : effect === 'ask' ? 'commands.default' : 'commands.forbidden[0]',
      reason: `${command} is ${effect}`,
      thirdParty: false,
    },
  ];
}

export function result(callId: string, stdout: string, exitCode = 0): Record<string, unknown> {
  return { type: 'tool_result', callId, exitCode, stdout, stderr: '', truncated: false, durationMs: 12 };
}

export const completed = (summary = 'Done: tests pass.') => ({ type: 'session_completed', status: 'completed', stopReason: null, summary, exitCode: 0 });
export const stopped = (reason: string, summary: string | null = null) => ({ type: 'session_stopped', status: 'stopped', stopReason: reason, class: reason, summary, exitCode: 3 });
export const failed = (message = 'The sandbox disappeared.') => ({ type: 'session_failed', status: 'failed', stopReason: 'crash', class: 'sandbox_lost', message, exitCode: 1 });
