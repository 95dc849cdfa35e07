import type { GatewayEvent, ProjectView } from '@lemniscate/contracts';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { completed, started } from '../../support/events';
import { sessionView } from '../../support/fake-gateway';
import { runHeadless, textResult } from '../../../src/session/headless';
import { ResultCollector, truncate } from '../../../src/session/result';
import type { SessionRunApi } from '../../../src/session/session-api';

const project: ProjectView = { id: 'p1', name: 'demo', repositorySource: '/nowhere', defaultRef: 'main', createdAt: new Date().toISOString() };
let cwd: string;
beforeEach(() => (cwd = mkdtempSync(path.join(os.tmpdir(), 'lemni-hl-'))));
afterEach(() => rmSync(cwd, { recursive: true, force: true }));

const at = new Date().toISOString();
const ev = (seq: number, partial: Record<string, unknown>) => ({ seq, sessionId: 's1', projectId: 'p1', at, ...partial }) as GatewayEvent;

describe('runHeadless', () => {
  it('says on stderr when the session goes quiet, so a CI log never looks hung', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const api: SessionRunApi = {
      startSession: async () => sessionView('s1'),
      async *follow() {
        yield ev(1, started());
        await gate;
        yield ev(2, completed('ok'));
      },
      getSession: async () => sessionView('s1', { status: 'completed', summary: 'ok' }),
      stopSession: async () => ({}),
      answerApproval: async () => ({}),
      startSubagent: async () => sessionView('s2'),
    };
    const err: string[] = [];
    const run = runHeadless(
      api,
      { instruction: 'x', project, outputFormat: 'text', includeUncommitted: false, cwd, quietNoticeMs: 20 },
      {
        stdout: () => undefined,
        stderr: (s) => {
          err.push(s);
          if (s.startsWith('No event from session s1')) release();
        },
        onInterrupt: () => () => undefined,
      },
    );
    await expect(run).resolves.toBe(0);
    expect(err.some((l) => /^No event from session s1 for \d+ s; still following it \(Ctrl-C stops it\)\.\n$/.test(l))).toBe(true);
  });

  it('fails with a sentence when the live events end before the session does', async () => {
    const api: SessionRunApi = {
      startSession: async () => sessionView('s1'),
      async *follow() {
        yield ev(1, started());
      },
      getSession: async () => sessionView('s1', { status: 'running' }),
      stopSession: async () => ({}),
      answerApproval: async () => ({}),
      startSubagent: async () => sessionView('s2'),
    };
    await expect(
      runHeadless(api, { instruction: 'x', project, outputFormat: 'json', includeUncommitted: false, cwd }, { stdout: () => undefined, stderr: () => undefined, onInterrupt: () => () => undefined }),
    ).rejects.toThrow('The live events of session s1 ended before the session did.');
  });
});

describe('result helpers', () => {
  it('truncate marks what it cut', () => {
    expect(truncate('abc', 5)).toEqual({ text: 'abc', truncated: false });
    expect(truncate('abcdefgh', 5)).toEqual({ text: 'abcde\n…[truncated: 3 more characters]', truncated: true });
  });

  it('without a terminal event the result comes from the session record', () => {
    const r = new ResultCollector('s1').result(sessionView('s1', { status: 'stopped', stopReason: 'revoked', summary: 'cut' }), 'demo', 'general', false);
    expect(r).toMatchObject({ status: 'stopped', stop_reason: 'revoked', exit_code: 3, summary: 'cut' });
  });

  it('text result says a limit is a limit, not the end of the task', () => {
    const r = new ResultCollector('s1').result(sessionView('s1', { status: 'stopped', stopReason: 'limit_minutes', summary: 'Done: a. Remaining: b.' }), 'demo', 'general', false);
    expect(textResult(r)).toBe('Stopped: the time limit was reached; this is a limit, not the end of the task.\nDone: a. Remaining: b.\n');
  });

  it.each([
    ['platform_error', 'The session failed: the platform (the exec-host or the container engine) failed, not the command; the patch so far is kept.'],
    ['sandbox_lost', 'The session failed: its sandbox was lost; the patch so far is kept.'],
    ['model_timeout', 'The session failed: the model did not answer in time.'],
    ['model_error', 'The session failed: the model could not be reached or answered with an error.'],
    ['crash', 'The session failed.'],
  ] as const)('a run that failed with class %s says whose failure it was', (cls, sentence) => {
    const c = new ResultCollector('s1');
    c.add({ seq: 1, sessionId: 's1', projectId: 'p1', at, type: 'session_failed', status: 'failed', stopReason: 'crash', class: cls, message: 'detail', exitCode: 1 } as GatewayEvent);
    const r = c.result(sessionView('s1', { status: 'failed', stopReason: 'crash' }), 'demo', 'general', false);
    expect({ classes: r.classes, exit: r.exit_code, text: textResult(r).split('\n')[0] }).toEqual({ classes: [cls], exit: 1, text: sentence });
  });

  it("events of other sessions (subagents) do not become this session's tool calls", () => {
    const c = new ResultCollector('s1');
    c.add({ seq: 1, sessionId: 's2', projectId: 'p1', at, type: 'tool_call_proposed', callId: 'c9', agent: 'explore', name: 'Read', arguments: { path: 'a' } } as GatewayEvent);
    expect(c.result(null, 'demo', 'general', false).tool_calls).toEqual([]);
  });
});
