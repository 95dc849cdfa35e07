import { useLayoutEffect, useRef } from 'react';
import type { EnvironmentJobView, EnvironmentStatus, ProjectView } from '@lemniscate/contracts';
import { DataTable, When, type Column } from '../components/DataTable';
import { InlineSelect, LiveStatus } from '../components/PageHeader';
import { Query, type QueryState } from '../components/Query';
import { Empty, InlineError, Notice } from '../components/States';
import { jobDuration, jobStateWords, PHASE_WORDS, prepareAction, progressLabel, shortCommit, shortKey, STATE_WORDS } from '../environment/view-model';

/** The log of the latest job as far as it has been read. */
export interface LogView {
  text: string;
  complete: boolean;
  truncated: boolean;
  error: unknown;
}

interface EnvironmentPageViewProps {
  projects: ProjectView[];
  projectId: string;
  onProjectChange: (id: string) => void;
  status: QueryState<EnvironmentStatus>;
  /** Null until the latest job's log is first read, and when there is no job. */
  log: LogView | null;
  /**
   * Administrators and developers of the project prepare; others read (the gateway refuses them
   * anyway, with a sentence shown as `prepareError`).
   */
  canPrepare: boolean;
  onPrepare: (force: boolean) => void;
  /** True while the request to prepare is on its way. */
  requesting: boolean;
  prepareError: unknown;
  notice: string | null;
  /** The time durations of a running job are measured to (the page's last render). */
  now: number;
  /** True when the gateway's API description has no environment routes: a sentence replaces the page. */
  unavailable?: boolean;
}

export function EnvironmentPageView(p: EnvironmentPageViewProps) {
  const projectOptions = p.projects.some((proj) => proj.id === p.projectId) ? p.projects : [{ id: p.projectId, name: p.projectId }, ...p.projects];
  return (
    <div className="page">
      <div className="page-header">
        <h1>Environment</h1>
        <InlineSelect id="project" label="Project" value={p.projectId} options={projectOptions.map((proj) => [proj.id, proj.name] as const)} onChange={p.onProjectChange} />
      </div>
      {p.unavailable ? (
        <Empty>This gateway does not prepare project environments yet: sessions use the standard sandbox image.</Empty>
      ) : (
        <Query state={p.status} what="the environment">
          {(s) => <EnvironmentDetail {...p} s={s} />}
        </Query>
      )}
    </div>
  );
}

function EnvironmentDetail({ s, log, canPrepare, onPrepare, requesting, prepareError, notice, now }: EnvironmentPageViewProps & { s: EnvironmentStatus }) {
  const words = STATE_WORDS[s.state];
  const action = canPrepare ? prepareAction(s.state) : null;
  return (
    <>
      <section className={`env-state ${words.tone}`} aria-labelledby="env-state-title">
        <div aria-live="polite" aria-atomic="true">
          <h2 id="env-state-title">{words.headline}</h2>
          <p>{s.message}</p>
        </div>
        {action && (
          <div className="env-action">
            <button type="button" className="primary" onClick={() => onPrepare(action.force)} disabled={requesting} aria-describedby="env-action-help">
              {requesting ? 'Asking…' : action.label}
            </button>
            <p id="env-action-help" className="muted small">
              {action.help}
            </p>
          </div>
        )}
      </section>
      {!canPrepare && s.state !== 'base' && <p className="muted small">Administrators and developers of this project prepare its environment; you can follow it here.</p>}
      <InlineError error={prepareError} />
      <Notice text={notice} />
      <div className="grid env">
        <Definition s={s} />
        <section className="card span-2" aria-labelledby="env-job-title">
          <div className="card-header">
            <h2 id="env-job-title">Latest preparation</h2>
            {s.job && <LiveStatus live={s.job.state === 'preparing'} on="Following it as it runs" off={`Finished: ${jobStateWords(s.job)}`} />}
          </div>
          {s.job ? <Job job={s.job} log={log} now={now} /> : <NoJob s={s} />}
        </section>
      </div>
    </>
  );
}

function NoJob({ s }: { s: EnvironmentStatus }) {
  if (s.state !== 'base') return <p className="muted">These inputs have not been prepared yet.</p>;
  return (
    <>
      <p className="muted">Nothing to prepare: the project has no devcontainer.</p>
      <p className="muted small">
        To start sessions from your own image with the project&apos;s dependencies installed, commit <code>.devcontainer/devcontainer.json</code> to <code>{s.ref}</code>.
      </p>
    </>
  );
}

const commandColumns: Column<{ step: number; command: string }>[] = [
  { header: 'Step', num: true, cell: (c) => c.step },
  { header: 'Command', className: 'env-command', cell: (c) => <code>{c.command}</code> },
];

function Definition({ s }: { s: EnvironmentStatus }) {
  const d = s.devcontainer;
  return (
    <section className="card" aria-labelledby="env-def-title">
      <h2 id="env-def-title">Definition</h2>
      <dl className="facts">
        <dt>Ref</dt>
        <dd>
          <code>{s.ref}</code>
        </dd>
        <dt>Commit</dt>
        <dd>{s.commit ? <code title={s.commit}>{shortCommit(s.commit)}</code> : '—'}</dd>
        <dt>Inputs key</dt>
        <dd>{s.key ? <code title={s.key}>{shortKey(s.key)}</code> : '—'}</dd>
        <dt>Devcontainer</dt>
        <dd>{d ? <code>{d.path}</code> : 'none'}</dd>
        <dt>Image</dt>
        <dd>{d?.image ? <code>{d.image}</code> : d ? 'built from its Dockerfile' : 'the standard sandbox image'}</dd>
      </dl>
      {d && (
        <>
          <h3 id="env-setup-title">Set-up commands</h3>
          {d.setupCommands.length ? (
            <DataTable
              caption="Set-up commands, in the order they run"
              className="compact"
              columns={commandColumns}
              rows={d.setupCommands.map((command, i) => ({ step: i + 1, command }))}
              rowKey={(c) => c.step}
            />
          ) : (
            <p className="muted small">None: the image is used as it is.</p>
          )}
          {d.warnings.length > 0 && <Warnings id="env-def-warnings" title="Not applied from the devcontainer" items={d.warnings} />}
        </>
      )}
    </section>
  );
}

function Warnings({ id, title, items }: { id: string; title: string; items: string[] }) {
  return (
    <>
      <h3 id={id}>{title}</h3>
      <ul className="env-warnings" aria-labelledby={id}>
        {items.map((w, i) => (
          <li key={i}>{w}</li>
        ))}
      </ul>
    </>
  );
}

function Job({ job, log, now }: { job: EnvironmentJobView; log: LogView | null; now: number }) {
  const label = progressLabel(job);
  return (
    <>
      <div className="env-progress">
        <progress id="env-progress" max={job.progress.total} value={Math.min(job.progress.done, job.progress.total)} aria-labelledby="env-progress-label" />
        <p id="env-progress-label" aria-live="polite">
          {label}
        </p>
      </div>
      <dl className="facts">
        <dt>Result</dt>
        <dd>
          <span className={`badge job-${job.state}`}>{jobStateWords(job)}</span>
        </dd>
        <dt>Phase</dt>
        <dd>{PHASE_WORDS[job.phase]}</dd>
        <dt>Started</dt>
        <dd>
          <When at={job.startedAt} />
        </dd>
        <dt>Finished</dt>
        <dd>{job.finishedAt ? <When at={job.finishedAt} /> : '—'}</dd>
        <dt>Duration</dt>
        <dd>{jobDuration(job, now)}</dd>
        <dt>Job</dt>
        <dd>
          <code>{job.jobId}</code>
        </dd>
      </dl>
      {job.message && <p className={job.state === 'failed' ? 'env-message bad' : 'env-message'}>{job.message}</p>}
      {job.warnings.length > 0 && <Warnings id="env-job-warnings" title="Warnings" items={job.warnings} />}
      <LogViewer log={log} running={job.state === 'preparing'} />
    </>
  );
}

/** The log in a scroll box that stays at its end while new lines come, unless the reader scrolled up. */
function LogViewer({ log, running }: { log: LogView | null; running: boolean }) {
  const box = useRef<HTMLPreElement>(null);
  const atEnd = useRef(true);
  const text = log?.text ?? '';
  useLayoutEffect(() => {
    const el = box.current;
    if (el && atEnd.current) el.scrollTop = el.scrollHeight;
  }, [text]);
  return (
    <>
      <h3 id="env-log-title">Log</h3>
      {log?.truncated && <p className="muted small">The start of this long log is not shown.</p>}
      <pre
        ref={box}
        className="env-log"
        tabIndex={0}
        role="region"
        aria-labelledby="env-log-title"
        onScroll={(e) => {
          const el = e.currentTarget;
          atEnd.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {log === null ? 'Reading the log…' : text || (log.complete ? 'The log is empty.' : 'Nothing logged yet.')}
      </pre>
      {running && log && !log.error && <p className="muted small">The log follows the preparation and grows as it runs.</p>}
      <InlineError error={log?.error} />
    </>
  );
}
