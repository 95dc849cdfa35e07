import type { SessionEvent } from '@lemniscate/contracts';
import { colourDiff, describeCall, describeEvent, stopSentence } from '../../../src/output/render';
import { table } from '../../../src/output/table';

const base = { seq: 1, sessionId: 's1', at: new Date().toISOString() };

describe('render', () => {
  it('describes a call by what a person recognises', () => {
    expect(describeCall('Bash', { command: 'npm   test\n--ci' })).toBe('Bash npm test --ci');
    expect(describeCall('Edit', { path: 'src/a.ts', old_string: 'x', new_string: 'y' })).toBe('Edit src/a.ts');
    expect(describeCall('Task', { agent: 'explore', instruction: 'find' })).toBe('Task explore');
    expect(describeCall('List', {})).toBe('List');
  });

  it('flags third-party files on their diff header only', () => {
    const diff = 'diff --git a/package.json b/package.json\n+x\ndiff --git a/src/a.ts b/src/a.ts\n-y';
    const lines = colourDiff(diff, new Set(['package.json'])).split('\n');
    expect(lines[0]).toContain('THIRD-PARTY FILE');
    expect(lines[2]).not.toContain('THIRD-PARTY FILE');
    expect(lines).toHaveLength(4);
  });

  it('shows a question waiting for an answer, and says when a headless run answered it by default', () => {
    const q = { ...base, type: 'question', questionId: 'q1', question: 'Which database?', options: ['pg', 'sqlite'], answer: null } as SessionEvent;
    expect(describeEvent(q, new Map())).toContain('Question: Which database? (pg / sqlite)');
    const d = { ...q, answer: 'assume', class: 'question_default_headless' } as SessionEvent;
    expect(describeEvent(d, new Map())).toContain('answered with its default in a headless run');
    const declined = { ...q, answer: 'state your assumption', class: 'question_declined' } as SessionEvent;
    expect(describeEvent(declined, new Map())).toContain('Question declined: Which database? → the agent states its assumption and continues.');
    expect(describeEvent({ ...q, answer: 'pg' } as SessionEvent, new Map())).toContain('Answered: Which database? → pg');
  });

  it("labels a subagent's lines with its name, learnt from subagent_started", () => {
    const text = { ...base, type: 'model_text', text: 'Found it.', subSessionId: 'ses_child' } as SessionEvent;
    expect(describeEvent(text, new Map(), new Map([['ses_child', 'explore']]))).toContain('[explore] Found it.');
    expect(describeEvent(text, new Map())).toContain('[subagent] Found it.');
    expect(describeEvent({ ...text, subSessionId: undefined } as SessionEvent, new Map())).toBe('Found it.');
  });

  it('every stop reason has a sentence', () => {
    for (const r of ['limit_actions', 'limit_minutes', 'loop', 'revoked', 'stopped', 'refused']) expect(stopSentence(r)).not.toBe(r);
    expect(stopSentence('limit_actions')).toContain('this is a limit, not the end of the task');
  });

  it('tables align columns and keep the last one unpadded', () => {
    expect(
      table(
        ['A', 'BB'],
        [
          ['xxx', 'y'],
          ['z', 'long value'],
        ],
      ),
    ).toBe('A    BB\nxxx  y\nz    long value\n');
  });
});
