import type { EnvironmentJobView, EnvironmentLog, EnvironmentPhase, EnvironmentState, EnvironmentStatus } from '@lemniscate/contracts';

/**
 * What the Environment page says about a project's environment, as pure functions of the gateway's
 * answers (libs/contracts `environment.ts`), so the words and the log's growth are unit-tested.
 */

export type Tone = 'good' | 'info' | 'warn' | 'bad' | 'neutral';

/** The state in words, and the colour it is drawn in. */
export const STATE_WORDS: Record<EnvironmentState, { headline: string; tone: Tone }> = {
  ready: { headline: 'Ready — sessions start from this environment', tone: 'good' },
  preparing: { headline: 'Being prepared', tone: 'info' },
  failed: { headline: 'Preparation failed', tone: 'bad' },
  not_prepared: { headline: 'Not prepared for the current devcontainer and lock files', tone: 'warn' },
  base: { headline: 'No devcontainer — sessions use the standard sandbox image', tone: 'neutral' },
};

export const PHASE_WORDS: Record<EnvironmentPhase, string> = {
  queued: 'Waiting to start',
  reading: 'Reading the devcontainer',
  image: 'Getting the image',
  setup: 'Running the set-up commands',
  snapshot: 'Saving the prepared environment',
  done: 'Done',
};

const JOB_STATE_WORDS: Record<EnvironmentJobView['state'], string> = { preparing: 'running', ready: 'succeeded', failed: 'failed' };

export function jobStateWords(job: EnvironmentJobView): string {
  return JOB_STATE_WORDS[job.state];
}

/** "2 of 4: running postCreateCommand": the step the job is at, as the progress bar's name. */
export function progressLabel(job: Pick<EnvironmentJobView, 'progress'>): string {
  const { done, total, label } = job.progress;
  const count = `${Math.min(done, total)} of ${total}`;
  return label.trim() ? `${count}: ${label.trim()}` : count;
}

/** A commit as the console shows it elsewhere: its first 12 hex digits. */
export function shortCommit(commit: string | null): string {
  return commit ? commit.slice(0, 12) : '—';
}

/** An input hash, short: `sha256:0123456789ab` keeps its algorithm and 12 digits. */
export function shortKey(key: string | null): string {
  if (!key) return '—';
  const m = /^([a-z0-9]+):([0-9a-f]+)$/i.exec(key);
  if (m) return `${m[1]}:${m[2]!.slice(0, 12)}`;
  return key.length > 16 ? `${key.slice(0, 16)}…` : key;
}

/** A length of time in the largest two units that say it: "45 s", "3 min 5 s", "1 h 2 min". */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return seconds % 60 ? `${minutes} min ${seconds % 60} s` : `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
}

/** How long the job took, or has taken so far while it runs. */
export function jobDuration(job: Pick<EnvironmentJobView, 'startedAt' | 'finishedAt'>, now: number): string {
  const start = Date.parse(job.startedAt);
  if (Number.isNaN(start)) return '—';
  if (job.finishedAt) return formatDuration(Date.parse(job.finishedAt) - start);
  return `${formatDuration(now - start)} so far`;
}

/**
 * The button offered to someone allowed to prepare: nothing without a devcontainer or while a
 * preparation runs; "Prepare again" (forced) when these inputs are ready or their preparation failed.
 */
export function prepareAction(state: EnvironmentState): { label: string; force: boolean; help: string } | null {
  switch (state) {
    case 'not_prepared':
      return { label: 'Prepare', force: false, help: 'Builds the image and runs the set-up commands, with network to the package mirrors only.' };
    case 'ready':
      return { label: 'Prepare again', force: true, help: 'Prepares these inputs anew, for example after a mirror served a broken package.' };
    case 'failed':
      return { label: 'Prepare again', force: true, help: 'Runs the preparation of these inputs again from the start.' };
    case 'preparing':
    case 'base':
      return null;
    default: {
      const unknown: never = state;
      return unknown;
    }
  }
}

/** What pressing Prepare did, from the status the gateway answered with. */
export function prepareNotice(status: EnvironmentStatus): string {
  switch (status.state) {
    case 'preparing':
      return 'Preparation started. This page follows it as it runs.';
    case 'ready':
      return 'These inputs are already prepared: sessions start from this environment.';
    case 'failed':
      return `The preparation did not start: ${status.message}`;
    case 'not_prepared':
    case 'base':
      return status.message;
    default: {
      const unknown: never = status.state;
      return unknown;
    }
  }
}

/** The log of one job as read so far: its text and where the next read starts. */
export interface LogState {
  jobId: string;
  text: string;
  nextOffset: number;
  complete: boolean;
  /** True when the start of a long log was dropped to keep the page responsive. */
  truncated: boolean;
}

/** At most this many characters of a log are kept on the page; the start is dropped first. */
export const MAX_LOG_CHARS = 400_000;

export function emptyLog(jobId: string): LogState {
  return { jobId, text: '', nextOffset: 0, complete: false, truncated: false };
}

// Colours and cursor moves of a terminal (CSI and OSC sequences) mean nothing on the page.
const TERMINAL_CODES = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)/g;

/** Text as a log viewer shows it: terminal codes removed, line ends made `\n`. */
export function cleanLogText(text: string): string {
  return text.replace(TERMINAL_CODES, '').replace(/\r\n?/g, '\n');
}

/**
 * Adds a chunk read from the log route. A chunk of another job, or one that does not start where the
 * last one ended (a late answer to an earlier poll), changes nothing, so no text is shown twice.
 */
export function appendLog(log: LogState, chunk: EnvironmentLog, max = MAX_LOG_CHARS): LogState {
  if (chunk.jobId !== log.jobId || chunk.offset !== log.nextOffset) return log;
  let text = log.text + cleanLogText(chunk.text);
  let truncated = log.truncated;
  if (text.length > max) {
    const cut = text.length - max;
    const lineStart = text.indexOf('\n', cut);
    text = text.slice(lineStart >= 0 && lineStart < text.length - 1 ? lineStart + 1 : cut);
    truncated = true;
  }
  return { jobId: log.jobId, text, nextOffset: Math.max(chunk.nextOffset, log.nextOffset), complete: chunk.complete, truncated };
}

/**
 * When to read the log again after this chunk, in milliseconds, or null to stop: every `pollMs` while
 * the job runs; at once while a finished job's log still brings text (a gateway may answer a long
 * log in several chunks, each saying it is complete); never once a read of a finished job brings
 * nothing new.
 */
export function nextLogRead(chunk: EnvironmentLog, pollMs: number): number | null {
  if (!chunk.complete) return pollMs;
  return chunk.text === '' || chunk.nextOffset === chunk.offset ? null : 0;
}
