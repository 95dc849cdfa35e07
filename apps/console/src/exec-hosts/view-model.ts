import type { ExecHostView } from '@lemniscate/contracts';

/** "3 s ago", "4 min ago", "2 h ago", "5 d ago": how long since `at`. */
export function ago(at: string, now: number): string {
  const seconds = Math.max(0, Math.round((now - Date.parse(at)) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3_600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3_600)} h ago`;
  return `${Math.floor(seconds / 86_400)} d ago`;
}

/** A moment in the reader's time zone: the time alone today, the date and time another day. */
export function clock(at: string, now: number): string {
  const d = new Date(at);
  return new Date(now).toDateString() === d.toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

export type HostTone = 'good' | 'warn' | 'bad';

/** The state as a badge (word and tone) and the sentence beside it that says what it means now. */
export function hostState(h: ExecHostView, now: number): { label: string; tone: HostTone; detail: string } {
  if (h.kind === 'fixed') return { label: 'active', tone: 'good', detail: 'the one exec-host this gateway is configured with' };
  if (h.state === 'active') return { label: 'active', tone: 'good', detail: 'new sessions may be placed on it' };
  if (h.state === 'draining') return { label: 'draining', tone: 'warn', detail: `no new session; ${liveSessions(h.liveSessions)}` };
  const since = h.lastHeartbeatAt ? `no heartbeat since ${clock(h.lastHeartbeatAt, now)}` : 'no heartbeat';
  return { label: 'lost', tone: 'bad', detail: `${since}${h.drainedBy ? '; stays drained when it returns' : ''}` };
}

export function liveSessions(n: number): string {
  return n === 0 ? 'no live session' : n === 1 ? 'its 1 live session finishes' : `its ${n} live sessions finish`;
}

/** What draining this host does, said before the administrator confirms and after. */
export function drainConsequence(h: ExecHostView): string {
  if (h.state === 'lost') return `${h.id} is lost; drained, it stays drained when it returns: no new session will be placed on it.`;
  return `No new session will be placed on ${h.id}; ${h.liveSessions === 0 ? 'it has no live session' : liveSessions(h.liveSessions)}.`;
}

/**
 * Who drained a host, as the page can name them: `user:ID` becomes the person's name when the reader may
 * list users (administrators), `you` for the reader, and otherwise `an administrator` (only they drain).
 */
export function actorName(actor: string, names: ReadonlyMap<string, string>, myUserId: string): string {
  const id = actor.startsWith('user:') ? actor.slice('user:'.length) : null;
  if (id === null) return actor;
  if (id === myUserId) return 'you';
  return names.get(id) ?? 'an administrator';
}
