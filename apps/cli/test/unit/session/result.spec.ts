import type { GatewayEvent } from '@lemniscate/contracts';
import { completed, failed, started, stopped } from '../../support/events';
import { exitCodeFor, ResultCollector } from '../../../src/session/result';

/**
 * L4: the exit code and the JSON result of a headless run, for every outcome × what happened to the
 * proposed changes × --fail-on-refusal. Generated, so no combination is left out.
 */
const at = '2026-01-01T00:00:00.000Z';
let seq = 0;
const ev = (partial: Record<string, unknown>) => ({ seq: ++seq, sessionId: 's1', at, ...partial }) as GatewayEvent;

const outcomes = {
  completed: () => completed('done'),
  failed: () => failed(),
  stopped: () => stopped('limit_actions'),
} as const;

type Changes = 'none' | 'accepted' | 'refused' | 'refused_by_policy' | 'reverted';

/** The events of one proposed Write (or none) ending as named. */
function changeEvents(changes: Changes): Record<string, unknown>[] {
  if (changes === 'none') return [];
  const proposed = { type: 'tool_call_proposed', callId: 'c1', agent: 'general', name: 'Write', arguments: { path: 'src/a.ts', content: 'x' } };
  if (changes === 'refused_by_policy') {
    return [proposed, { type: 'decision', callId: 'c1', effect: 'deny', rule: 'files.forbidden[0]', reason: 'src/a.ts is forbidden', thirdParty: false, class: 'policy_denied' }];
  }
  const asked = [
    proposed,
    { type: 'decision', callId: 'c1', effect: 'ask', rule: 'files.default', reason: 'a write is approved as a diff', thirdParty: false },
    { type: 'approval_requested', approvalId: 'a1', callId: 'c1', agent: 'general', kind: 'diff', thirdParty: false, subject: '--- a/src/a.ts\n+++ b/src/a.ts\n' },
  ];
  if (changes === 'accepted') return [...asked, { type: 'approval_answered', approvalId: 'a1', answer: 'approved', by: { kind: 'user', userId: 'u1' } }];
  const refused = [...asked, { type: 'approval_answered', approvalId: 'a1', answer: 'rejected', by: { kind: 'process', description: 'headless session' }, class: 'approval_refused_headless' }];
  if (changes === 'refused') return refused;
  return [
    { type: 'tool_call_proposed', callId: 'c2', agent: 'general', name: 'Bash', arguments: { command: 'npm run fmt' } },
    { type: 'changes_detected', callId: 'c2', files: [{ path: 'src/a.ts', change: 'modified', thirdParty: false }] },
    { type: 'change_reverted', class: 'change_reverted', paths: ['src/a.ts'], because: 'rejected' },
  ];
}

const cases: [keyof typeof outcomes, Changes, boolean][] = [];
for (const outcome of Object.keys(outcomes) as (keyof typeof outcomes)[]) {
  for (const changes of ['none', 'accepted', 'refused', 'refused_by_policy', 'reverted'] as Changes[]) {
    for (const flag of [false, true]) cases.push([outcome, changes, flag]);
  }
}

function expectedExit(outcome: keyof typeof outcomes, changes: Changes, flag: boolean): number {
  if (outcome === 'failed') return 1;
  if (outcome === 'stopped') return 3;
  return flag && changes !== 'none' && changes !== 'accepted' ? 3 : 0;
}

describe('headless result × exit code (L4)', () => {
  it(`covers ${cases.length} combinations`, () => expect(cases).toHaveLength(30));

  it.each(cases)('outcome %s, changes %s, --fail-on-refusal %s', (outcome, changes, flag) => {
    let now = 1000;
    const collector = new ResultCollector('s1', () => now);
    for (const e of [started(), ...changeEvents(changes), { ...outcomes[outcome](), usage: { inputTokens: 12, outputTokens: 5 } }]) collector.add(ev(e));
    now = 3500;
    const result = collector.result(null, 'demo', 'general', false, flag);
    expect(result.status).toBe(outcome);
    expect(result.exit_code).toBe(expectedExit(outcome, changes, flag));
    expect(exitCodeFor(result, flag)).toBe(result.exit_code);
    expect(result.refused_changes).toHaveLength(changes === 'refused' || changes === 'refused_by_policy' ? 1 : 0);
    expect(result.reverted_changes).toEqual(changes === 'reverted' ? [{ paths: ['src/a.ts'], because: 'rejected' }] : []);
    if (changes === 'refused') expect(result.refused_changes[0]).toMatchObject({ approval_id: 'a1', call_id: 'c1', kind: 'diff', class: 'approval_refused_headless' });
    if (changes === 'refused_by_policy') expect(result.refused_changes[0]).toMatchObject({ approval_id: null, call_id: 'c1', subject: 'src/a.ts', class: 'policy_denied' });
    expect(result.classes.includes('change_refused')).toBe(outcome === 'completed' && result.exit_code === 3);
    expect(result.duration_ms).toBe(2500);
    expect(result.model).toBe('scripted:test.json');
    expect(result.usage).toEqual({ input_tokens: 12, output_tokens: 5 });
    // One naming convention across the result: every key is snake_case.
    const keys = (value: unknown): string[] =>
      value && typeof value === 'object' ? Object.entries(value).flatMap(([k, v]) => (Array.isArray(value) ? keys(v) : [k, ...(k === 'arguments' ? [] : keys(v))])) : [];
    for (const key of keys(result)) expect(key).toMatch(/^[a-z0-9]+(_[a-z0-9]+)*$/);
  });

  it('reports no usage when the provider reported none', () => {
    const collector = new ResultCollector('s1');
    for (const e of [started(), completed('ok')]) collector.add(ev(e));
    expect(collector.result(null, 'demo', 'general', false).usage).toBeNull();
  });
});
