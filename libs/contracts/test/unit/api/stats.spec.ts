import type { SessionView, ToolCallView } from '../../../src/api/sessions';
import { summariseDashboard as summarise } from '../../../src/api/stats';

const session = (id: string, startedAt: string) => ({ id, startedAt }) as SessionView;
const call = (name: string, args: Record<string, unknown>, effect: 'allow' | 'ask' | 'deny' | null, createdAt = '2026-11-29T10:00:00.000Z') =>
  ({ id: `c${Math.random()}`, name, arguments: args, decision: effect ? { effect, rule: 'r', reason: 'x' } : null, createdAt }) as ToolCallView;

describe('summariseDashboard (GET /stats/dashboard)', () => {
  const now = new Date('2026-11-29T15:00:00.000Z');

  it('counts sessions per UTC day over the period, zeros included, oldest first', () => {
    const s = summarise({
      sessions: [session('a', '2026-11-29T01:00:00.000Z'), session('b', '2026-11-29T23:00:00.000Z'), session('c', '2026-11-27T12:00:00.000Z'), session('old', '2026-11-01T12:00:00.000Z')],
      toolCalls: [],
      pending: [],
      days: 3,
      now,
    });
    expect(s.sessionsPerDay).toEqual([
      { day: '2026-11-27', count: 1 },
      { day: '2026-11-28', count: 0 },
      { day: '2026-11-29', count: 2 },
    ]);
  });

  it('counts decisions by effect and ranks the denied and asked commands', () => {
    const s = summarise({
      sessions: [],
      toolCalls: [
        call('Bash', { command: 'curl x' }, 'deny'),
        call('Bash', { command: 'curl x' }, 'deny'),
        call('Bash', { command: 'git push' }, 'deny'),
        call('Bash', { command: 'npm install' }, 'ask'),
        call('Write', { path: 'package.json' }, 'ask'),
        call('Bash', { command: 'npm test' }, 'allow'),
        call('Bash', { command: 'never decided' }, null),
        call('Bash', { command: 'too old' }, 'deny', '2026-10-01T00:00:00.000Z'),
      ],
      pending: [],
      days: 7,
      now,
    });
    expect(s.decisionsByEffect).toEqual({ allow: 1, ask: 2, deny: 3 });
    expect(s.mostDenied).toEqual([
      { command: 'curl x', count: 2 },
      { command: 'git push', count: 1 },
    ]);
    expect(s.mostAsked.map((c) => c.command)).toEqual(['npm install', 'Write package.json']); // ties in alphabetical order
  });

  it("ranks the period's sessions by project and by person, named where a name is known, older sessions left out", () => {
    const at = (id: string, projectId: string, userId: string, startedAt = '2026-11-29T10:00:00.000Z') => ({ id, projectId, userId, startedAt }) as SessionView;
    const s = summarise({
      sessions: [at('a', 'p1', 'u1'), at('b', 'p1', 'u2'), at('c', 'p2', 'u2'), at('d', 'p2', 'u2'), at('e', 'p2', 'u3'), at('old', 'p3', 'u3', '2026-10-01T00:00:00.000Z')],
      toolCalls: [],
      pending: [],
      days: 7,
      now,
      projectNames: new Map([
        ['p1', 'web'],
        ['p2', 'api'],
      ]),
      userEmails: new Map([['u2', 'bo@example.org']]),
    });
    expect(s.sessionsByProject).toEqual([
      { id: 'p2', label: 'api', count: 3 },
      { id: 'p1', label: 'web', count: 2 },
    ]);
    expect(s.sessionsByUser).toEqual([
      { id: 'u2', label: 'bo@example.org', count: 3 },
      { id: 'u1', label: 'u1', count: 1 },
      { id: 'u3', label: 'u3', count: 1 },
    ]);
  });
});
