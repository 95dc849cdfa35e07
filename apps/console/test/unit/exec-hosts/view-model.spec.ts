import type { ExecHostView } from '@lemniscate/contracts';
import { actorName, ago, drainConsequence, hostState } from '../../../src/exec-hosts/view-model';

const now = Date.parse('2026-11-29T14:05:00.000Z');
const host = (over: Partial<ExecHostView> = {}): ExecHostView => ({
  id: 'exec-host-1',
  address: 'https://exec-host-1.internal:7071',
  kind: 'registered',
  state: 'active',
  runtimes: ['runc'],
  images: [],
  environments: [],
  capacity: 10,
  load: 2,
  warm: null,
  liveSessions: 3,
  version: '0.1.0',
  registeredAt: '2026-11-29T10:00:00.000Z',
  lastHeartbeatAt: '2026-11-29T14:04:57.000Z',
  drainedBy: null,
  drainReason: null,
  stateChangedAt: '2026-11-29T10:00:00.000Z',
  ...over,
});

describe('the Exec-hosts page in words', () => {
  it('says how long ago, in seconds, minutes, hours, days', () => {
    expect(ago('2026-11-29T14:04:57.000Z', now)).toBe('3 s ago');
    expect(ago('2026-11-29T14:01:00.000Z', now)).toBe('4 min ago');
    expect(ago('2026-11-29T11:05:00.000Z', now)).toBe('3 h ago');
    expect(ago('2026-11-24T14:05:00.000Z', now)).toBe('5 d ago');
    // A clock a little ahead of the reader's is "0 s ago", not a negative time.
    expect(ago('2026-11-29T14:05:02.000Z', now)).toBe('0 s ago');
  });

  it('gives each state a badge and what it means now', () => {
    expect(hostState(host(), now)).toEqual({ label: 'active', tone: 'good', detail: 'new sessions may be placed on it' });
    expect(hostState(host({ state: 'draining', drainedBy: 'user:u1' }), now)).toEqual({ label: 'draining', tone: 'warn', detail: 'no new session; its 3 live sessions finish' });
    expect(hostState(host({ state: 'draining', liveSessions: 1 }), now).detail).toBe('no new session; its 1 live session finishes');
    const lost = hostState(host({ state: 'lost', drainedBy: 'user:u1' }), now);
    expect(lost).toMatchObject({ label: 'lost', tone: 'bad' });
    expect(lost.detail).toMatch(/^no heartbeat since .+; stays drained when it returns$/);
    expect(hostState(host({ kind: 'fixed', capacity: 0, lastHeartbeatAt: null }), now).detail).toBe('the one exec-host this gateway is configured with');
  });

  it('says what a drain does before it is confirmed', () => {
    expect(drainConsequence(host())).toBe('No new session will be placed on exec-host-1; its 3 live sessions finish.');
    expect(drainConsequence(host({ liveSessions: 0 }))).toBe('No new session will be placed on exec-host-1; it has no live session.');
    expect(drainConsequence(host({ state: 'lost' }))).toBe('exec-host-1 is lost; drained, it stays drained when it returns: no new session will be placed on it.');
  });

  it('names who drained a host as far as the reader may know', () => {
    const names = new Map([['u2', 'Ada Admin']]);
    expect(actorName('user:u1', names, 'u1')).toBe('you');
    expect(actorName('user:u2', names, 'u1')).toBe('Ada Admin');
    expect(actorName('user:u3', names, 'u1')).toBe('an administrator');
    expect(actorName('system', names, 'u1')).toBe('system');
  });
});
