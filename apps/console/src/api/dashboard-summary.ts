import type { ApprovalView, SessionView, ToolCallView } from '@lemniscate/contracts';
import type { DashboardStats } from './console-contracts';

/** The command a tool call stands for on the dashboard: the shell command, or the tool and its path. */
function subjectOf(call: ToolCallView): string {
  const a = call.arguments;
  if (call.name === 'Bash' && typeof a.command === 'string') return a.command;
  const target = a.path ?? a.pattern ?? a.agent;
  return typeof target === 'string' ? `${call.name} ${target}` : call.name;
}

function top(counts: Map<string, number>, n: number): { command: string; count: number }[] {
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, n)
    .map(([command, count]) => ({ command, count }));
}

/**
 * Builds the dashboard from the sessions, their tool calls and the pending approvals, for a
 * gateway that does not aggregate them itself. Days are UTC calendar days, oldest first.
 */
export function summarise(input: { sessions: SessionView[]; toolCalls: ToolCallView[]; pending: ApprovalView[]; days: number; now: Date }): DashboardStats {
  const { sessions, toolCalls, pending, days, now } = input;
  const dayKeys: string[] = [];
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  for (let i = days - 1; i >= 0; i--) dayKeys.push(new Date(today - i * 86_400_000).toISOString().slice(0, 10));
  const perDay = new Map(dayKeys.map((d) => [d, 0]));
  for (const s of sessions) {
    const d = s.startedAt.slice(0, 10);
    if (perDay.has(d)) perDay.set(d, perDay.get(d)! + 1);
  }
  const first = dayKeys[0]!;
  const decisions = { allow: 0, ask: 0, deny: 0 };
  const denied = new Map<string, number>();
  const asked = new Map<string, number>();
  for (const call of toolCalls) {
    if (!call.decision || call.createdAt.slice(0, 10) < first) continue;
    decisions[call.decision.effect] += 1;
    const bucket = call.decision.effect === 'deny' ? denied : call.decision.effect === 'ask' ? asked : null;
    if (bucket) bucket.set(subjectOf(call), (bucket.get(subjectOf(call)) ?? 0) + 1);
  }
  return {
    sessionsPerDay: dayKeys.map((day) => ({ day, count: perDay.get(day)! })),
    decisionsByEffect: decisions,
    mostDenied: top(denied, 5),
    mostAsked: top(asked, 5),
    pendingApprovals: pending.filter((a) => a.state === 'pending').length,
  };
}
