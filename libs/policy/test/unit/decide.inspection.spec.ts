import { inspectionCorpus } from '../support/inspection-corpus';
import { decide } from '../../src/decide';
import { recommendedPolicy } from '../../src/schema';
import { initPolicyEngine } from '../../src/shell/parser';

beforeAll(async () => {
  await initPolicyEngine();
});

const bash = (command: string) => decide({ name: 'Bash', arguments: { command } }, recommendedPolicy, { workingDirectory: '/workspace', root: '/workspace' });

describe('the recommended policy on a corpus of inspection, writes, hidden execution, destruction and exfiltration', () => {
  it('has at least 600 commands', () => {
    expect(inspectionCorpus.length).toBeGreaterThanOrEqual(600);
  });

  it('allows none of the writes, hidden executions, destructive or exfiltrating commands, and at least 90 % of read-only inspection', () => {
    const counts = new Map<string, { total: number; allowed: number; ask: number; deny: number }>();
    const wronglyAllowed: string[] = [];
    const readOnlyAsked: string[] = [];
    for (const { kind, command } of inspectionCorpus) {
      const d = bash(command);
      const c = counts.get(kind) ?? { total: 0, allowed: 0, ask: 0, deny: 0 };
      c.total++;
      if (d.effect === 'allow') c.allowed++;
      else if (d.effect === 'ask') c.ask++;
      else c.deny++;
      counts.set(kind, c);
      if (kind !== 'read-only' && d.effect === 'allow') wronglyAllowed.push(`${kind}: ${command} → ${d.rule}: ${d.reason}`);
      if (kind === 'read-only' && d.effect !== 'allow') readOnlyAsked.push(`${command} → ${d.effect} ${d.rule}`);
    }
    const lines = [...counts].map(([kind, c]) => `  ${kind.padEnd(17)} ${String(c.total).padStart(4)} commands: ${c.allowed} allowed, ${c.ask} ask, ${c.deny} deny`);
    process.stdout.write(
      `Inspection corpus, ${inspectionCorpus.length} commands under the recommended policy:\n${lines.join('\n')}\n  read-only not allowed: ${readOnlyAsked.join(' | ') || 'none'}\n`,
    );
    expect(wronglyAllowed).toEqual([]);
    const ro = counts.get('read-only');
    expect(ro && ro.allowed / ro.total).toBeGreaterThanOrEqual(0.9);
  });
});
