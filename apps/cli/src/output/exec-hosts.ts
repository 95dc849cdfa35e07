import type { ExecHostView } from '@lemniscate/contracts';
import { table } from './table';

/** "3 s ago", "4 min ago", "2 h ago", "5 d ago": how long since `at`, as a person reads it. */
export function ago(at: string, now: number): string {
  const seconds = Math.max(0, Math.round((now - Date.parse(at)) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3_600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3_600)} h ago`;
  return `${Math.floor(seconds / 86_400)} d ago`;
}

/** A moment in the terminal's time zone: `14:02:11` today, `2026-12-03 14:02:11` another day. */
export function clock(at: string, now: number): string {
  const d = new Date(at);
  const pad = (n: number) => String(n).padStart(2, '0');
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return new Date(now).toDateString() === d.toDateString() ? time : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}

/** The state as a person understands it: `active`, `draining`, `lost (no heartbeat since 14:02:11)`, `active (fixed)`. */
export function describeState(h: ExecHostView, now: number): string {
  if (h.kind === 'fixed') return 'active (fixed)';
  if (h.state === 'lost') {
    const since = h.lastHeartbeatAt ? `no heartbeat since ${clock(h.lastHeartbeatAt, now)}` : 'no heartbeat';
    return `lost (${since}${h.drainedBy ? '; drained' : ''})`;
  }
  return h.state;
}

/** "3 / 10": the live sessions the platform counts on the host over its capacity. */
function sessions(h: ExecHostView): string {
  return h.kind === 'fixed' ? String(h.liveSessions) : `${h.liveSessions} / ${h.capacity}`;
}

function drained(h: ExecHostView): string {
  if (!h.drainedBy) return '';
  return h.drainReason ? `${h.drainedBy}: ${h.drainReason}` : h.drainedBy;
}

/** `lemni admin exec-hosts list`: one row per host, and what a fixed exec-host means. */
export function renderExecHosts(hosts: ExecHostView[], now: number): string {
  if (hosts.length === 0) {
    return 'No exec-host has registered yet: an exec-host started with LEMNISCATE_GATEWAY_URL set to this gateway registers with its first heartbeat.\n';
  }
  const out = table(
    ['ID', 'STATE', 'KIND', 'ADDRESS', 'RUNTIMES', 'SESSIONS', 'LOAD', 'WARM', 'HEARTBEAT', 'DRAINED BY'],
    hosts.map((h) => [
      h.id,
      describeState(h, now),
      h.kind,
      h.address,
      h.runtimes.join(',') || '-',
      sessions(h),
      h.kind === 'fixed' ? '-' : String(h.load),
      h.warm ? `${h.warm.ready} / ${h.warm.target}` : h.kind === 'fixed' ? '-' : 'off',
      h.lastHeartbeatAt ? ago(h.lastHeartbeatAt, now) : '-',
      drained(h),
    ]),
  );
  const notes: string[] = [];
  if (hosts.some((h) => h.kind === 'fixed')) {
    notes.push('This gateway has one configured exec-host (LEMNISCATE_EXEC_HOST_URL), not a pool: it cannot be drained.');
  }
  notes.push('SESSIONS: live sessions placed on the host / its capacity; LOAD: the sandboxes it reported at its last heartbeat; WARM: sandboxes made ahead of their sessions, ready / wanted.');
  return `${out}\n${notes.join('\n')}\n`;
}

function liveSessions(n: number): string {
  return n === 0 ? 'it has no live session' : n === 1 ? 'its 1 live session finishes' : `its ${n} live sessions finish`;
}

/** What `drain` did, from the host's view as the gateway returned it. */
export function describeDrain(h: ExecHostView, now: number): string {
  const why = h.drainReason ? ` (reason: ${h.drainReason})` : '';
  if (h.state === 'lost') {
    return `${h.id} is ${describeState(h, now)}; it stays drained when it returns: no new session will be placed on it${why}. \`lemni admin exec-hosts undrain ${h.id}\` undoes this.\n`;
  }
  return `No new session will be placed on ${h.id}; ${liveSessions(h.liveSessions)}${why}. \`lemni admin exec-hosts undrain ${h.id}\` undoes this.\n`;
}

/** What `undrain` did. */
export function describeUndrain(h: ExecHostView, now: number): string {
  if (h.state === 'lost') {
    return `${h.id} is no longer drained, but it is ${describeState(h, now)}: sessions are placed on it once it heartbeats again.\n`;
  }
  return `Sessions may be placed on ${h.id} again (${h.liveSessions} / ${h.capacity} live now).\n`;
}
