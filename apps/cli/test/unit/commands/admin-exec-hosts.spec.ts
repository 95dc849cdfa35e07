import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ExecHostView } from '@lemniscate/contracts';
import { z } from 'zod';
import { execHostView, FakeGateway, fixedExecHostView, GOOD_TOKEN, type Refusal } from '../../support/fake-gateway';
import { buildCli, lemni } from '../../support/run-bin';

/*
 * `lemni admin exec-hosts list|drain|undrain` against the fake gateway (which plays the routes as
 * apps/gateway/src/exec-host/exec-hosts.service.ts answers them): every subcommand, in text and in
 * JSON, answered with success, the gateway's refusal (403), an unknown host (404), a gateway without
 * a pool (409), and no gateway at all.
 */

let gateway: FakeGateway;
let home: string;

beforeAll(() => buildCli(), 180_000);
beforeEach(async () => {
  gateway = await new FakeGateway().start();
  home = mkdtempSync(path.join(os.tmpdir(), 'lemni-home-'));
});
afterEach(async () => {
  await gateway.close();
  rmSync(home, { recursive: true, force: true });
});

const env = (gatewayUrl = gateway.url) => ({ HOME: home, LEMNISCATE_GATEWAY: gatewayUrl, LEMNISCATE_TOKEN: GOOD_TOKEN, TZ: 'UTC' });

const LOST_AT = '2026-01-05T14:02:11.000Z';
const pool = () => [
  execHostView('exec-host-1'),
  execHostView('exec-host-2', { address: 'http://127.0.0.1:7102', state: 'draining', drainedBy: 'user:u1', drainReason: 'kernel upgrade', liveSessions: 2, load: 2, runtimes: ['runc'] }),
  execHostView('exec-host-3', { address: 'unix:/run/lemniscate/exec-host-3.sock', state: 'lost', lastHeartbeatAt: LOST_AT, liveSessions: 0, load: 0 }),
];

const FORBIDDEN: Refusal = { status: 403, code: 'forbidden', message: 'As a developer you may not read exec-hosts.' };
const FORBIDDEN_CHANGE: Refusal = { status: 403, code: 'forbidden', message: 'As a security officer you may not update exec-hosts.' };
const NOT_FOUND = 'No exec-host "exec-host-9" has registered with the platform; `lemni admin exec-hosts list` shows those that have.';
const FIXED = (what: string) => `This gateway has one fixed exec-host (LEMNISCATE_EXEC_HOST_URL), not a pool, so it cannot be ${what}: there is no other exec-host to place sessions on.`;
const UNREACHABLE = 'Cannot reach the gateway at http://127.0.0.1:1: is it running? (`npm start`)';

type Sub = 'list' | 'drain' | 'undrain';
type Outcome = 'success' | 'forbidden' | 'not_found' | 'fixed' | 'unreachable';

interface Case {
  sub: Sub;
  format: 'text' | 'json';
  outcome: Outcome;
}

/** `list` names no host, so it has no 404, and a gateway without a pool lists its fixed exec-host (no 409). */
const OUTCOMES: Record<Sub, Outcome[]> = {
  list: ['success', 'forbidden', 'fixed', 'unreachable'],
  drain: ['success', 'forbidden', 'not_found', 'fixed', 'unreachable'],
  undrain: ['success', 'forbidden', 'not_found', 'fixed', 'unreachable'],
};
const cases: Case[] = (['list', 'drain', 'undrain'] as const).flatMap((sub) => OUTCOMES[sub].flatMap((outcome) => (['text', 'json'] as const).map((format) => ({ sub, format, outcome }))));

function argv({ sub, format, outcome }: Case): string[] {
  const id = outcome === 'not_found' ? 'exec-host-9' : outcome === 'fixed' ? 'fixed' : sub === 'undrain' ? 'exec-host-2' : 'exec-host-1';
  const args = ['admin', 'exec-hosts', sub, ...(sub === 'list' ? [] : [id])];
  if (sub === 'drain') args.push('--reason', 'kernel upgrade');
  if (format === 'json') args.push('--json');
  return args;
}

describe.each(cases)('lemni admin exec-hosts $sub ($format): $outcome', (c) => {
  it('prints what happened, or the sentence with exit 1', async () => {
    gateway.execHosts = c.outcome === 'fixed' ? [fixedExecHostView()] : pool();
    if (c.outcome === 'forbidden') gateway.execHostRefusals = c.sub === 'list' ? { list: FORBIDDEN } : { change: FORBIDDEN_CHANGE };
    const r = await lemni(argv(c), { env: env(c.outcome === 'unreachable' ? 'http://127.0.0.1:1' : gateway.url) });

    const failure: Partial<Record<Outcome, string>> = {
      forbidden: `${c.sub === 'list' ? FORBIDDEN.message : FORBIDDEN_CHANGE.message} (request req-1)`,
      not_found: `${NOT_FOUND} (request req-1)`,
      unreachable: UNREACHABLE,
      ...(c.sub === 'list' ? {} : { fixed: `${FIXED(c.sub === 'drain' ? 'drained' : 'undrained')} (request req-1)` }),
    };
    const expected = failure[c.outcome];
    if (expected !== undefined) {
      // A failure has no result: stdout stays empty whatever the format, the sentence is on stderr.
      expect(r).toEqual({ code: 1, stdout: '', stderr: `${expected}\n` });
      return;
    }
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    if (c.format === 'json') {
      const printed: unknown = JSON.parse(r.stdout);
      if (c.sub === 'list')
        expect(
          z
            .array(ExecHostView)
            .parse(printed)
            .map((h) => [h.id, h.state]),
        ).toEqual(gateway.execHosts.map((h) => [h.id, h.state]));
      else expect(ExecHostView.parse(printed)).toEqual(gateway.execHosts.find((h) => h.id === (printed as { id: string }).id));
      return;
    }
    if (c.sub === 'list' && c.outcome === 'fixed') {
      expect(r.stdout).toMatch(/^fixed +active \(fixed\) +fixed +http:\/\/127\.0\.0\.1:7071 +- +1 +- +2 \/ 2 +-$/m);
      expect(r.stdout).toContain('This gateway has one configured exec-host (LEMNISCATE_EXEC_HOST_URL), not a pool: it cannot be drained.\n');
    } else if (c.sub === 'list') {
      const lines = r.stdout.split('\n');
      expect(lines[0]).toMatch(/^ID +STATE +KIND +ADDRESS +RUNTIMES +SESSIONS +LOAD +WARM +HEARTBEAT +DRAINED BY$/);
      expect(lines[1]).toMatch(/^exec-host-1 +active +registered +http:\/\/127\.0\.0\.1:7101 +runc,runsc +3 \/ 10 +3 +2 \/ 2 +\d+ s ago$/);
      expect(lines[2]).toMatch(/^exec-host-2 +draining +registered +http:\/\/127\.0\.0\.1:7102 +runc +2 \/ 10 +2 +2 \/ 2 +\d+ s ago +user:u1: kernel upgrade$/);
      expect(lines[3]).toMatch(/^exec-host-3 +lost \(no heartbeat since 2026-01-05 14:02:11\) +registered +unix:\/run\/lemniscate\/exec-host-3\.sock +runc,runsc +0 \/ 10 +0 +2 \/ 2 +\d+ d ago$/);
      expect(r.stdout).toContain(
        'SESSIONS: live sessions placed on the host / its capacity; LOAD: the sandboxes it reported at its last heartbeat; WARM: sandboxes made ahead of their sessions, ready / wanted.\n',
      );
    } else if (c.sub === 'drain') {
      expect(r.stdout).toBe('No new session will be placed on exec-host-1; its 3 live sessions finish (reason: kernel upgrade). `lemni admin exec-hosts undrain exec-host-1` undoes this.\n');
    } else {
      expect(r.stdout).toBe('Sessions may be placed on exec-host-2 again (2 / 10 live now).\n');
    }
    if (c.sub !== 'list') {
      // What was sent: the route of the table, and the reason only when given.
      const hit = gateway.requests.find((q) => q.method === 'POST');
      expect(hit).toMatchObject({ route: c.sub === 'drain' ? 'drainExecHost' : 'undrainExecHost', body: c.sub === 'drain' ? { reason: 'kernel upgrade' } : undefined });
    }
  });
});

describe('lemni admin exec-hosts: drain and undrain change what list shows', () => {
  it('drain without a reason sends {}, says a host without live sessions has none; undrain returns it; both are idempotent', async () => {
    gateway.execHosts = [execHostView('exec-host-1', { liveSessions: 0, load: 0 })];
    const once = await lemni(['admin', 'exec-hosts', 'drain', 'exec-host-1'], { env: env() });
    expect(once.stdout).toBe('No new session will be placed on exec-host-1; it has no live session. `lemni admin exec-hosts undrain exec-host-1` undoes this.\n');
    const twice = await lemni(['admin', 'exec-hosts', 'drain', 'exec-host-1'], { env: env() });
    expect(twice).toEqual(once);
    expect(gateway.hits('POST', '/admin/exec-hosts/exec-host-1/drain').map((h) => h.body)).toEqual([{}, {}]);
    expect((await lemni(['admin', 'exec-hosts', 'list'], { env: env() })).stdout).toMatch(/^exec-host-1 +draining .* user:u1$/m);
    expect((await lemni(['admin', 'exec-hosts', 'undrain', 'exec-host-1'], { env: env() })).stdout).toBe('Sessions may be placed on exec-host-1 again (0 / 10 live now).\n');
    expect((await lemni(['admin', 'exec-hosts', 'undrain', 'exec-host-1'], { env: env() })).code).toBe(0);
    expect((await lemni(['admin', 'exec-hosts', 'list'], { env: env() })).stdout).toMatch(/^exec-host-1 +active +registered/m);
  });

  it('a lost host drained stays drained when it returns; undrained, it is placed on once it heartbeats again', async () => {
    gateway.execHosts = [execHostView('exec-host-3', { state: 'lost', lastHeartbeatAt: LOST_AT, liveSessions: 0 })];
    const drain = await lemni(['admin', 'exec-hosts', 'drain', 'exec-host-3', '--reason', 'disk failing'], { env: env() });
    expect(drain.stdout).toBe(
      'exec-host-3 is lost (no heartbeat since 2026-01-05 14:02:11; drained); it stays drained when it returns: no new session will be placed on it (reason: disk failing). `lemni admin exec-hosts undrain exec-host-3` undoes this.\n',
    );
    const undrain = await lemni(['admin', 'exec-hosts', 'undrain', 'exec-host-3'], { env: env() });
    expect(undrain.stdout).toBe('exec-host-3 is no longer drained, but it is lost (no heartbeat since 2026-01-05 14:02:11): sessions are placed on it once it heartbeats again.\n');
  });

  it('a pool with no host yet says how an exec-host registers', async () => {
    const r = await lemni(['admin', 'exec-hosts', 'list'], { env: env() });
    expect(r).toEqual({ code: 0, stderr: '', stdout: 'No exec-host has registered yet: an exec-host started with LEMNISCATE_GATEWAY_URL set to this gateway registers with its first heartbeat.\n' });
    expect(JSON.parse((await lemni(['admin', 'exec-hosts', 'list', '--json'], { env: env() })).stdout)).toEqual([]);
  });
});

describe('lemni admin exec-hosts: argument errors are sentences, exit 1, and nothing is sent', () => {
  const usage: [string, string[], string][] = [
    ['drain without an id', ['drain'], 'Name the exec-host: `lemni admin exec-hosts drain ID` (`lemni admin exec-hosts list` shows the ids).'],
    ['undrain without an id', ['undrain', '--json'], 'Name the exec-host: `lemni admin exec-hosts undrain ID` (`lemni admin exec-hosts list` shows the ids).'],
    [
      'an id that is not an exec-host id',
      ['drain', 'Exec_Host_2'],
      '"Exec_Host_2" is not an exec-host id: an id is a lower-case DNS name (labels of letters, digits or "-", not at either end, joined by ".") (`lemni admin exec-hosts list` shows them).',
    ],
    [
      'an id ending with "-"',
      ['undrain', 'exec-host-'],
      '"exec-host-" is not an exec-host id: an id is a lower-case DNS name (labels of letters, digits or "-", not at either end, joined by ".") (`lemni admin exec-hosts list` shows them).',
    ],
    ['an empty reason', ['drain', 'exec-host-1', '--reason', '  '], '--reason is empty: say why the host is drained, or leave the option out.'],
    ['a reason over 500 characters', ['drain', 'exec-host-1', '--reason', 'x'.repeat(501)], '--reason is longer than 500 characters.'],
    ['an unknown flag', ['list', '--all'], "error: unknown option '--all'"],
    ['a flag of another subcommand', ['undrain', 'exec-host-1', '--reason', 'x'], "error: unknown option '--reason'"],
    ['an unknown subcommand', ['remove', 'exec-host-1'], "error: unknown command 'remove'"],
  ];
  it.each(usage)('%s', async (_what, args, sentence) => {
    const r = await lemni(['admin', 'exec-hosts', ...args], { env: env() });
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 1, stdout: '' });
    expect(r.stderr.split('\n')[0]).toBe(sentence);
    expect(gateway.requests).toEqual([]);
  });
});
