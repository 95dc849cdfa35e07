import { z } from 'zod';
import type { ApprovalView } from './approvals';
import type { SessionView, ToolCallView } from './sessions';

/** GET /stats/dashboard: the console's figures, over the sessions the caller may read (C1). */
export const DashboardQuery = z.object({ days: z.coerce.number().int().min(1).max(90).default(14) }).strict();
export type DashboardQuery = z.infer<typeof DashboardQuery>;

export const DashboardStats = z.object({
  sessionsPerDay: z.array(z.object({ day: z.string(), count: z.number().int().nonnegative() })),
  decisionsByEffect: z.object({ allow: z.number().int().nonnegative(), ask: z.number().int().nonnegative(), deny: z.number().int().nonnegative() }),
  mostDenied: z.array(z.object({ command: z.string(), count: z.number().int().nonnegative() })),
  mostAsked: z.array(z.object({ command: z.string(), count: z.number().int().nonnegative() })),
  pendingApprovals: z.number().int().nonnegative(),
  /** Sessions started in the period by project and by person, most first (at most eight each). */
  sessionsByProject: z.array(z.object({ id: z.string(), label: z.string(), count: z.number().int().nonnegative() })).default([]),
  sessionsByUser: z.array(z.object({ id: z.string(), label: z.string(), count: z.number().int().nonnegative() })).default([]),
});
export type DashboardStats = z.infer<typeof DashboardStats>;

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
 * The dashboard's figures from the sessions, their tool calls and the pending approvals the caller
 * may read. Days are UTC calendar days, oldest first. The gateway computes them; the function lives
 * here so its shape and rules are defined once.
 */
export function summariseDashboard(input: {
  sessions: SessionView[];
  toolCalls: ToolCallView[];
  pending: ApprovalView[];
  days: number;
  now: Date;
  /** What to call a project and a person (its name, their email); an id stands for itself otherwise. */
  projectNames?: ReadonlyMap<string, string>;
  userEmails?: ReadonlyMap<string, string>;
}): DashboardStats {
  const { sessions, toolCalls, pending, days, now } = input;
  const dayKeys: string[] = [];
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  for (let i = days - 1; i >= 0; i--) dayKeys.push(new Date(today - i * 86_400_000).toISOString().slice(0, 10));
  const perDay = new Map(dayKeys.map((d) => [d, 0]));
  for (const s of sessions) {
    const d = s.startedAt.slice(0, 10);
    const count = perDay.get(d);
    if (count !== undefined) perDay.set(d, count + 1);
  }
  const first = dayKeys[0] ?? '';
  const byProject = new Map<string, number>();
  const byUser = new Map<string, number>();
  for (const s of sessions) {
    if (s.startedAt.slice(0, 10) < first) continue;
    byProject.set(s.projectId, (byProject.get(s.projectId) ?? 0) + 1);
    byUser.set(s.userId, (byUser.get(s.userId) ?? 0) + 1);
  }
  const named = (counts: Map<string, number>, names: ReadonlyMap<string, string> | undefined) => top(counts, 8).map(({ command: id, count }) => ({ id, label: names?.get(id) ?? id, count }));
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
    sessionsPerDay: dayKeys.map((day) => ({ day, count: perDay.get(day) ?? 0 })),
    decisionsByEffect: decisions,
    mostDenied: top(denied, 5),
    mostAsked: top(asked, 5),
    pendingApprovals: pending.filter((a) => a.state === 'pending').length,
    sessionsByProject: named(byProject, input.projectNames),
    sessionsByUser: named(byUser, input.userEmails),
  };
}
