import { rmSync } from 'node:fs';
import { FakeGateway, GOOD_TOKEN } from '../../support/fake-gateway';
import { bashCall, completed, failed, result, started, stopped } from '../../support/events';
import { buildCli, lemni } from '../../support/run-bin';

let gateway: FakeGateway;
const dirs: string[] = [];

beforeAll(() => buildCli(), 180_000);
beforeEach(async () => {
  gateway = await new FakeGateway().start();
});
afterEach(async () => {
  await gateway.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const env = () => ({ LEMNISCATE_GATEWAY: gateway.url, LEMNISCATE_TOKEN: GOOD_TOKEN });

describe('lemni session follow (through the real bin)', () => {
  it.each([
    ['completed', () => [started(), ...bashCall('c1', 'npm test'), result('c1', 'ok'), completed('All green.')], 0],
    ['stopped by the action limit', () => [started(), stopped('limit_actions', 'Done: a; remaining: b.')], 3],
    ['failed', () => [started(), failed()], 1],
  ] as const)('replays a session that %s from its first event and exits as its run did', async (_name, events, code) => {
    gateway.scenario = { events: events(), final: {} };
    const run = await lemni(['-p', 'go', '--project', 'demo', '--output-format', 'json', '--no-apply'], { env: env() });
    expect(run.code).toBe(code);
    const followed = await lemni(['session', 'follow', 's1', '--output-format', 'json'], { env: env() });
    expect(followed.code).toBe(code);
    const a = JSON.parse(run.stdout) as Record<string, unknown>;
    const b = JSON.parse(followed.stdout) as Record<string, unknown>;
    for (const key of ['session_id', 'status', 'stop_reason', 'exit_code', 'tool_calls', 'summary', 'project', 'agent']) expect({ key, value: b[key] }).toEqual({ key, value: a[key] });
    const text = await lemni(['session', 'follow', 's1'], { env: env() });
    expect(text.code).toBe(code);
    if (code === 0) expect(text.stdout).toBe('All green.\n');
  });

  it('follows a session still running until it ends, and stream-json prints each event', async () => {
    gateway.scenario = { events: [started(), ...bashCall('c1', 'npm test'), result('c1', 'ok'), completed('All green.')], final: {}, gateAt: 2 };
    const run = lemni(['-p', 'go', '--project', 'demo', '--no-apply'], { env: env() });
    while (!gateway.sessions.has('s1')) await new Promise((r) => setTimeout(r, 50));
    await gateway.waitForGate();
    const follow = lemni(['session', 'follow', 's1', '--output-format', 'stream-json'], { env: env() });
    // The session is held at the gate until the second follower (this one) is subscribed.
    while (gateway.followers('s1') < 2) await new Promise((r) => setTimeout(r, 50));
    gateway.release();
    const [r, f] = await Promise.all([run, follow]);
    expect(r.code).toBe(0);
    expect(f.code).toBe(0);
    const lines = f.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; exit_code?: number; status?: string });
    // As `lemni -p` does: the live events, then one result line with the json result's fields.
    expect(lines.map((l) => l.type).slice(-2)).toEqual(['session_completed', 'result']);
    expect(lines.at(-1)).toMatchObject({ type: 'result', status: 'completed', exit_code: 0, session_id: 's1' });
    expect(lines.map((l) => l.type)).toContain('tool_call_proposed');
    expect(f.stderr).toContain('Following session s1 (Ctrl-C stops following; the session goes on).');
  });

  it('a session nobody can see is one sentence, exit 1', async () => {
    const r = await lemni(['session', 'follow', 'nope'], { env: env() });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
