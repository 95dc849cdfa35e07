import { EnvironmentState, type EnvironmentLog, type EnvironmentStatus } from '@lemniscate/contracts';
import {
  appendLog,
  cleanLogText,
  emptyLog,
  formatDuration,
  jobDuration,
  nextLogRead,
  prepareAction,
  prepareNotice,
  progressLabel,
  shortCommit,
  shortKey,
  STATE_WORDS,
} from '../../../src/environment/view-model';

const chunk = (over: Partial<EnvironmentLog>): EnvironmentLog => ({ jobId: 'j1', text: '', offset: 0, nextOffset: 0, complete: false, ...over });

describe('environment state in words', () => {
  it('has a headline for every state the contract declares', () => {
    for (const state of EnvironmentState.options) expect(STATE_WORDS[state].headline).toMatch(/\w/);
    expect(STATE_WORDS.ready.headline).toBe('Ready — sessions start from this environment');
    expect(STATE_WORDS.base.headline).toBe('No devcontainer — sessions use the standard sandbox image');
    expect(STATE_WORDS.failed.headline).toBe('Preparation failed');
  });

  it('offers Prepare before the first preparation, Prepare again (forced) after one, nothing without a devcontainer or while one runs', () => {
    expect(prepareAction('not_prepared')).toMatchObject({ label: 'Prepare', force: false });
    expect(prepareAction('ready')).toMatchObject({ label: 'Prepare again', force: true });
    expect(prepareAction('failed')).toMatchObject({ label: 'Prepare again', force: true });
    expect(prepareAction('preparing')).toBeNull();
    expect(prepareAction('base')).toBeNull();
  });

  it('says what pressing Prepare did from the status the gateway answered', () => {
    const status = (state: EnvironmentStatus['state'], message = 'm') => ({ state, message }) as EnvironmentStatus;
    expect(prepareNotice(status('preparing'))).toBe('Preparation started. This page follows it as it runs.');
    expect(prepareNotice(status('ready'))).toMatch(/already prepared/);
    expect(prepareNotice(status('failed', 'The exec-host has no mirror for pip.'))).toBe('The preparation did not start: The exec-host has no mirror for pip.');
  });
});

describe('progress, identifiers and durations', () => {
  it('names the step as "done of total: label"', () => {
    expect(progressLabel({ progress: { done: 2, total: 4, label: 'running postCreateCommand' } })).toBe('2 of 4: running postCreateCommand');
    expect(progressLabel({ progress: { done: 0, total: 1, label: '  ' } })).toBe('0 of 1');
    // A step count the server has not caught up with never reads "5 of 4".
    expect(progressLabel({ progress: { done: 5, total: 4, label: 'snapshot' } })).toBe('4 of 4: snapshot');
  });

  it('shortens commits and input keys', () => {
    expect(shortCommit('4f1c2a9e7b3d5c8a1e2f4b6d8c0a3e5f7b9d1c2e')).toBe('4f1c2a9e7b3d');
    expect(shortCommit(null)).toBe('—');
    expect(shortKey('sha256:9b2e41c7d05a3f86e1c4b7a2d9f0e3c6')).toBe('sha256:9b2e41c7d05a');
    expect(shortKey('9b2e41c7d05a3f86e1c4b7a2d9f0e3c6')).toBe('9b2e41c7d05a3f86…');
    expect(shortKey('short')).toBe('short');
    expect(shortKey(null)).toBe('—');
  });

  it('writes durations in the two largest units', () => {
    expect(formatDuration(0)).toBe('0 s');
    expect(formatDuration(44_600)).toBe('45 s');
    expect(formatDuration(135_000)).toBe('2 min 15 s');
    expect(formatDuration(120_000)).toBe('2 min');
    expect(formatDuration(3_720_000)).toBe('1 h 2 min');
    expect(formatDuration(-5_000)).toBe('0 s');
  });

  it('measures a finished job from start to finish and a running one to now', () => {
    const startedAt = '2026-11-29T14:00:00.000Z';
    expect(jobDuration({ startedAt, finishedAt: '2026-11-29T14:02:15.000Z' }, 0)).toBe('2 min 15 s');
    expect(jobDuration({ startedAt, finishedAt: null }, Date.parse(startedAt) + 90_000)).toBe('1 min 30 s so far');
  });
});

describe('following a log', () => {
  it('appends chunks that continue where the last one ended', () => {
    let log = emptyLog('j1');
    log = appendLog(log, chunk({ text: 'one\n', offset: 0, nextOffset: 4 }));
    log = appendLog(log, chunk({ text: 'two\n', offset: 4, nextOffset: 8, complete: true }));
    expect(log).toEqual({ jobId: 'j1', text: 'one\ntwo\n', nextOffset: 8, complete: true, truncated: false });
  });

  it('ignores a late answer to an earlier read and a chunk of another job, so nothing shows twice', () => {
    const log = appendLog(emptyLog('j1'), chunk({ text: 'one\n', offset: 0, nextOffset: 4 }));
    expect(appendLog(log, chunk({ text: 'one\n', offset: 0, nextOffset: 4 }))).toBe(log);
    expect(appendLog(log, chunk({ jobId: 'j2', text: 'other\n', offset: 4, nextOffset: 10 }))).toBe(log);
  });

  it('keeps offsets in bytes as the gateway counts them', () => {
    const log = appendLog(emptyLog('j1'), chunk({ text: 'digest sha256:5c1e…\n', offset: 0, nextOffset: 22 }));
    expect(log.nextOffset).toBe(22);
  });

  it('removes terminal colours and carriage returns', () => {
    expect(cleanLogText('\u001b[32mfound 0 vulnerabilities\u001b[39m\r\n')).toBe('found 0 vulnerabilities\n');
    expect(cleanLogText('\u001b]0;title\u0007progress 10%\rprogress 100%\n')).toBe('progress 10%\nprogress 100%\n');
  });

  it('drops the start of a very long log at a line boundary and says so', () => {
    let log = emptyLog('j1');
    log = appendLog(log, chunk({ text: 'aaaa\nbbbb\n', offset: 0, nextOffset: 10 }), 12);
    expect(log.truncated).toBe(false);
    log = appendLog(log, chunk({ text: 'cccc\n', offset: 10, nextOffset: 15 }), 12);
    expect(log).toMatchObject({ text: 'bbbb\ncccc\n', truncated: true, nextOffset: 15 });
  });

  it('reads again every poll while the job runs, at once while a finished log still brings text, and stops when it brings nothing', () => {
    expect(nextLogRead(chunk({ text: 'x', offset: 0, nextOffset: 1 }), 1000)).toBe(1000);
    expect(nextLogRead(chunk({ text: '', offset: 1, nextOffset: 1 }), 1000)).toBe(1000);
    expect(nextLogRead(chunk({ text: 'x', offset: 1, nextOffset: 2, complete: true }), 1000)).toBe(0);
    expect(nextLogRead(chunk({ text: '', offset: 2, nextOffset: 2, complete: true }), 1000)).toBeNull();
  });
});
