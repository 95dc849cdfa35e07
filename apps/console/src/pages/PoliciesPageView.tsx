import { useMemo, useState } from 'react';
import { createTwoFilesPatch } from 'diff';
import type { PolicyDiffResponse, PolicyVersionSummary, ProjectMcpView, ProjectView } from '@lemniscate/contracts';
import type { DryRunResponse } from '../api/console-contracts';
import { DiffViewer } from '../components/diff/DiffViewer';
import { DataTable, When, type Column } from '../components/DataTable';
import { InlineSelect } from '../components/PageHeader';
import { Query, type QueryState } from '../components/Query';
import { Empty, InlineError, Notice } from '../components/States';
import { YamlEditor } from '../components/YamlEditor';
import { readFields, ruleLines, withRuleLines, writeField, type FieldSpec } from '../policy/form-model';
import type { PolicyDiagnostic } from '../policy/validate';

export type PolicyTab = 'edit' | 'history' | 'dry-run' | 'mcp';

interface PoliciesPageViewProps {
  projects: ProjectView[];
  projectId: string;
  onProjectChange: (id: string) => void;
  tab: PolicyTab;
  onTabChange: (tab: PolicyTab) => void;

  draft: string;
  onDraftChange: (text: string) => void;
  diagnose: (text: string) => PolicyDiagnostic[];
  fields: FieldSpec[];
  onPublish: (comment: string) => void;
  /** The version in force and its text, which a publish replaces (null: none published yet). */
  inForce: { version: number; text: string } | null;
  publishing: boolean;
  publishError: unknown;
  notice: string | null;

  versions: QueryState<PolicyVersionSummary[]>;
  compare: { from: number; to: number } | null;
  onCompare: (from: number, to: number) => void;
  diff: QueryState<PolicyDiffResponse> | null;
  onLoadVersion: (version: number) => void;
  onRollback: (version: number) => void;
  rollingBack: number | null;
  rollbackError: unknown;

  /** True when the gateway says it has no dry run: a sentence replaces the tab. */
  dryRunUnavailable?: boolean;
  /** Null when the gateway does not offer dry runs. */
  dryRun: { result: QueryState<DryRunResponse> | null; onRun: (sessions: number) => void; running: boolean } | null;
  /**
   * Administrators publish, roll back and dry-run; the other roles read the policy in force and its
   * history (the role table: developers and security officers read policies, C1).
   */
  canPublish: boolean;

  /** The project's MCP servers as the policy in force declares them, with what each last listed (AG7). */
  mcp: QueryState<ProjectMcpView>;
  /** Writes these pins of a server's tool descriptions into the draft (administrators publish it). */
  onPin: (server: string, pins: Record<string, string>) => void;
}

export function PoliciesPageView(p: PoliciesPageViewProps) {
  const tabs: [PolicyTab, string][] = p.canPublish
    ? [['edit', 'Edit and publish'], ['history', 'History'], ...(p.dryRun ? ([['dry-run', 'Dry run']] as [PolicyTab, string][]) : []), ['mcp', 'MCP servers']]
    : [
        ['edit', 'Policy in force'],
        ['history', 'History'],
        ['mcp', 'MCP servers'],
      ];
  return (
    <div className="page">
      <div className="page-header">
        <h1>Policies</h1>
        <InlineSelect id="project" label="Project" value={p.projectId} options={p.projects.map((proj) => [proj.id, proj.name] as const)} onChange={p.onProjectChange} />
      </div>
      <div className="tabs" role="tablist" aria-label="Policy">
        {tabs.map(([key, label]) => (
          <button
            key={key}
            type="button"
            role="tab"
            id={`tab-${key}`}
            aria-selected={p.tab === key}
            aria-controls={`panel-${key}`}
            tabIndex={p.tab === key ? 0 : -1}
            onClick={() => p.onTabChange(key)}
            onKeyDown={(e) => onTabKey(e, tabs, p)}
          >
            {label}
          </button>
        ))}
      </div>
      {p.canPublish && p.dryRunUnavailable && p.tab === 'edit' && (
        <p className="muted small">
          This gateway does not offer dry runs of a draft policy yet; check a draft with the version history after publishing, or with <code>lemni policy explain</code>.
        </p>
      )}
      <div role="tabpanel" id={`panel-${p.tab}`} aria-labelledby={`tab-${p.tab}`}>
        {p.tab === 'edit' && (p.canPublish ? <EditTab {...p} /> : <ReadOnlyTab draft={p.draft} />)}
        {p.tab === 'history' && <HistoryTab {...p} />}
        {p.canPublish && p.tab === 'dry-run' && p.dryRun && <DryRunTab dryRun={p.dryRun} diagnose={p.diagnose} draft={p.draft} />}
        {p.tab === 'mcp' && <McpTab mcp={p.mcp} canPublish={p.canPublish} onPin={p.onPin} />}
      </div>
    </div>
  );
}

function onTabKey(e: React.KeyboardEvent, tabs: [PolicyTab, string][], p: PoliciesPageViewProps) {
  if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
  const i = tabs.findIndex(([k]) => k === p.tab);
  const next = tabs[(i + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length]![0];
  p.onTabChange(next);
  document.getElementById(`tab-${next}`)?.focus();
}

function EditTab({ draft, onDraftChange, diagnose, fields, onPublish, inForce, publishing, publishError, notice }: PoliciesPageViewProps) {
  const [comment, setComment] = useState('');
  const [confirming, setConfirming] = useState(false);
  const problems = useMemo(() => diagnose(draft), [draft, diagnose]);
  const withNewline = (t: string) => (t.endsWith('\n') ? t : `${t}\n`);
  // What publishing changes, against the version in force: shown before anything is sent.
  const patch = useMemo(
    () => (confirming ? createTwoFilesPatch(inForce ? `policy v${inForce.version}` : 'no policy (built-in default)', 'draft', inForce ? withNewline(inForce.text) : '', withNewline(draft)) : ''),
    [confirming, inForce, draft],
  );
  const unchanged = inForce !== null && withNewline(inForce.text) === withNewline(draft);
  const next = (inForce?.version ?? 0) + 1;
  return (
    <div className="grid policy-edit">
      <section className="card" aria-labelledby="common-title">
        <h2 id="common-title">Common settings</h2>
        <PolicyForm text={draft} fields={fields} onChange={onDraftChange} />
      </section>
      <section className="card span-2" aria-labelledby="yaml-title">
        <h2 id="yaml-title">Policy document (YAML)</h2>
        <YamlEditor value={draft} onChange={onDraftChange} diagnose={diagnose} labelId="yaml-title" describedBy="yaml-problems" />
        <div id="yaml-problems" aria-live="polite">
          {problems.length === 0 ? (
            <p className="ok small">The document is valid.</p>
          ) : (
            <ul className="problems">
              {problems.map((d, i) => (
                <li key={i}>
                  Line {d.line}
                  {d.path && (
                    <>
                      , <code>{d.path}</code>
                    </>
                  )}
                  : {d.message}
                </li>
              ))}
            </ul>
          )}
        </div>
        <form
          className="publish"
          onSubmit={(e) => {
            e.preventDefault();
            setConfirming(true);
          }}
        >
          <div className="field grow">
            <label htmlFor="publish-comment">What changed, and why (kept in the history)</label>
            <input id="publish-comment" value={comment} onChange={(e) => setComment(e.target.value)} maxLength={1000} />
          </div>
          <button type="submit" className="primary" disabled={publishing || confirming || problems.length > 0} aria-describedby={problems.length ? 'publish-blocked' : undefined}>
            Publish…
          </button>
        </form>
        {confirming && problems.length === 0 && (
          <section className="publish-confirm" role="region" aria-labelledby="confirm-title">
            <h3 id="confirm-title">
              Publish version {next}
              {inForce ? `, replacing version ${inForce.version} in force?` : '? Until now the built-in default applied.'}
            </h3>
            <p className="muted small">
              It applies from the next action of every session of this project.{' '}
              {comment.trim() ? (
                <>
                  Recorded with your comment: <q>{comment.trim()}</q>
                </>
              ) : (
                'No comment: the history will say only who published it and when.'
              )}
            </p>
            {unchanged ? (
              <p role="note">The draft is the same as version {inForce?.version} in force: publishing records a new version with the same content.</p>
            ) : (
              <DiffViewer patch={patch} initialMode="unified" label={`Changes against ${inForce ? `version ${inForce.version}` : 'no policy'}`} language="yaml" oneDocument />
            )}
            <div className="actions">
              <button type="button" onClick={() => setConfirming(false)} disabled={publishing}>
                Keep editing
              </button>
              <button
                type="button"
                className="primary"
                disabled={publishing}
                onClick={() => {
                  onPublish(comment);
                  setConfirming(false);
                }}
              >
                {publishing ? 'Publishing…' : `Publish version ${next}`}
              </button>
            </div>
          </section>
        )}
        {problems.length > 0 && (
          <p id="publish-blocked" className="muted small">
            Fix the problems above to publish.
          </p>
        )}
        <InlineError error={publishError} />
        <Notice text={notice} />
      </section>
    </div>
  );
}

function PolicyForm({ text, fields, onChange }: { text: string; fields: FieldSpec[]; onChange: (text: string) => void }) {
  const values = readFields(text, fields);
  if (!values) return <p className="muted">The YAML has a syntax error; fix it in the editor to use this form again.</p>;
  const set = (f: FieldSpec, v: unknown) => onChange(writeField(text, f, v));
  return (
    <div className="form">
      {fields.map((f) => {
        const key = f.path.join('.');
        const id = `f-${key.replace(/\./g, '-')}`;
        const value = values[key];
        const help = f.description ? (
          <p id={`${id}-help`} className="help">
            {f.description}
          </p>
        ) : null;
        const describedBy = f.description ? `${id}-help` : undefined;
        switch (f.kind) {
          case 'enum':
            return (
              <div className="field" key={key}>
                <label htmlFor={id}>{f.label}</label>
                <select id={id} value={String(value)} onChange={(e) => set(f, e.target.value)} aria-describedby={describedBy}>
                  {/* A value the schema does not allow stays visible instead of showing as the first option. */}
                  {!f.options.includes(String(value)) && <option value={String(value)}>{`${String(value)} (not allowed)`}</option>}
                  {f.options.map((o) => (
                    <option key={o}>{o}</option>
                  ))}
                </select>
                {help}
              </div>
            );
          case 'integer':
            return (
              <div className="field" key={key}>
                <label htmlFor={id}>{f.label}</label>
                <input id={id} type="number" min={1} max={f.max} value={Number(value)} onChange={(e) => e.target.value !== '' && set(f, Number(e.target.value))} aria-describedby={describedBy} />
                {help}
              </div>
            );
          case 'lines': {
            const { lines, labels } = ruleLines(value);
            const withOptions = labels.length > 0 ? <p className="help">{`Also free, with the options that keep them free (edit these in the YAML editor): ${labels.join(', ')}.`}</p> : null;
            return (
              <LinesField
                key={`${key}:${JSON.stringify(value)}`}
                id={id}
                label={f.label}
                value={lines}
                onCommit={(v) => set(f, withRuleLines(value, v))}
                describedBy={describedBy}
                help={
                  <>
                    {withOptions}
                    {help}
                  </>
                }
              />
            );
          }
          case 'tools':
            return (
              <fieldset className="field" key={key} aria-describedby={describedBy}>
                <legend>{f.label}</legend>
                <div className="checks">
                  {f.options.map((tool) => {
                    const list = Array.isArray(value) ? (value as string[]) : [];
                    return (
                      <label key={tool} className="checkbox">
                        <input type="checkbox" checked={list.includes(tool)} onChange={(e) => set(f, e.target.checked ? [...list, tool] : list.filter((t) => t !== tool))} />
                        {tool}
                      </label>
                    );
                  })}
                </div>
                {help}
              </fieldset>
            );
          default:
            return null;
        }
      })}
    </div>
  );
}

/** Edited freely as text and written to the document when the field loses focus. */
function LinesField({ id, label, value, onCommit, describedBy, help }: { id: string; label: string; value: string[]; onCommit: (v: string[]) => void; describedBy?: string; help: React.ReactNode }) {
  const [text, setText] = useState(value.join('\n'));
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        rows={Math.min(8, Math.max(3, value.length + 1))}
        value={text}
        onChange={(e) => setText(e.target.value)}
        onBlur={() => {
          const next = text
            .split('\n')
            .map((l) => l.trim())
            .filter(Boolean);
          if (next.join('\n') !== value.join('\n')) onCommit(next);
        }}
        aria-describedby={describedBy}
        spellCheck={false}
      />
      {help}
    </div>
  );
}

function ReadOnlyTab({ draft }: { draft: string }) {
  return (
    <section aria-label="Policy in force">
      <p className="muted small">You can read this project's policy and its history; only administrators publish or roll back.</p>
      <pre className="policy-source">{draft}</pre>
    </section>
  );
}

function versionColumns(
  current: number,
  { canPublish, onLoadVersion, onRollback, rollingBack }: Pick<PoliciesPageViewProps, 'canPublish' | 'onLoadVersion' | 'onRollback' | 'rollingBack'>,
): Column<PolicyVersionSummary>[] {
  return [
    {
      header: 'Version',
      cell: (v) => (
        <>
          v{v.version} {v.version === current && <span className="badge good">in force</span>}
        </>
      ),
    },
    { header: 'Comment', cell: (v) => v.comment || <span className="muted">no comment</span> },
    { header: 'Published by', cell: (v) => v.authorEmail ?? <span className="muted">{v.authorId ? 'a removed account' : 'the system'}</span> },
    { header: 'Published', cell: (v) => <When at={v.createdAt} /> },
    {
      header: <span className="visually-hidden">Actions</span>,
      className: 'row-actions',
      cell: (v) => (
        <>
          {canPublish && (
            <button type="button" className="ghost" onClick={() => onLoadVersion(v.version)}>
              Open in editor
            </button>
          )}
          {canPublish && v.version !== current && (
            <button type="button" onClick={() => onRollback(v.version)} disabled={rollingBack !== null}>
              {rollingBack === v.version ? 'Rolling back…' : `Roll back to v${v.version}`}
            </button>
          )}
        </>
      ),
    },
  ];
}

const CHANGE_COLUMNS: Column<DryRunResponse['changes'][number]>[] = [
  { header: 'Session', cell: (c) => <code>{c.sessionId}</code> },
  {
    header: 'Tool call',
    cell: (c) => (
      <>
        {c.tool} <code>{c.subject}</code>
      </>
    ),
  },
  { header: 'Now', cell: (c) => <span className={`badge effect-${c.before.effect}`}>{c.before.effect}</span> },
  {
    header: 'With the draft',
    cell: (c) => (
      <>
        <span className={`badge effect-${c.after.effect}`}>{c.after.effect}</span> <span className="muted small">{c.after.reason}</span>
      </>
    ),
  },
];

function HistoryTab({ versions, compare, onCompare, diff, onLoadVersion, onRollback, rollingBack, rollbackError, canPublish }: PoliciesPageViewProps) {
  return (
    <Query state={versions} what="the policy history">
      {(list) => {
        if (list.length === 0) return <Empty>No version has been published for this project yet: the default policy applies (every command asks).</Empty>;
        const sorted = [...list].sort((a, b) => b.version - a.version);
        const current = sorted[0]!.version;
        const from = compare?.from ?? sorted[1]?.version ?? current;
        const to = compare?.to ?? current;
        return (
          <div className="stack">
            <div className="card flush">
              <DataTable caption="Published versions" columns={versionColumns(current, { canPublish, onLoadVersion, onRollback, rollingBack })} rows={sorted} rowKey={(v) => v.id} />
            </div>
            <InlineError error={rollbackError} />
            <section className="card" aria-labelledby="compare-title">
              <div className="card-header">
                <h2 id="compare-title">Compare versions</h2>
                <div className="field inline">
                  <label htmlFor="cmp-from">From</label>
                  <select id="cmp-from" value={from} onChange={(e) => onCompare(Number(e.target.value), to)}>
                    {sorted.map((v) => (
                      <option key={v.id} value={v.version}>
                        v{v.version}
                      </option>
                    ))}
                  </select>
                  <label htmlFor="cmp-to">to</label>
                  <select id="cmp-to" value={to} onChange={(e) => onCompare(from, Number(e.target.value))}>
                    {sorted.map((v) => (
                      <option key={v.id} value={v.version}>
                        v{v.version}
                      </option>
                    ))}
                  </select>
                </div>
              </div>
              {from === to ? (
                <p className="muted">Pick two different versions.</p>
              ) : diff ? (
                <Query state={diff} what="the difference">
                  {(d) =>
                    d.patch.trim() ? (
                      <DiffViewer patch={d.patch} initialMode="split" label={`Policy v${d.from} to v${d.to}`} language="yaml" oneDocument />
                    ) : (
                      <p className="muted">These versions are identical.</p>
                    )
                  }
                </Query>
              ) : null}
            </section>
          </div>
        );
      }}
    </Query>
  );
}

function DryRunTab({ dryRun, diagnose, draft }: { dryRun: NonNullable<PoliciesPageViewProps['dryRun']>; diagnose: PoliciesPageViewProps['diagnose']; draft: string }) {
  const [n, setN] = useState(10);
  const invalid = diagnose(draft).length > 0;
  return (
    <section className="card" aria-labelledby="dry-title">
      <h2 id="dry-title">Dry run of the draft</h2>
      <p className="muted">Replays the tool calls of the project's last sessions against the draft in the editor and lists the decisions that would change. Nothing is published.</p>
      <form
        className="publish"
        onSubmit={(e) => {
          e.preventDefault();
          dryRun.onRun(n);
        }}
      >
        <div className="field">
          <label htmlFor="dry-n">Sessions to replay</label>
          <input id="dry-n" type="number" min={1} max={100} value={n} onChange={(e) => setN(Math.max(1, Math.min(100, Number(e.target.value) || 1)))} />
        </div>
        <button type="submit" className="primary" disabled={dryRun.running || invalid}>
          {dryRun.running ? 'Replaying…' : 'Run'}
        </button>
      </form>
      {invalid && <p className="muted small">The draft has problems; fix them in the editor first.</p>}
      {dryRun.result && (
        <Query state={dryRun.result} what="the dry run">
          {(r) => (
            <div className="stack">
              <p>
                {r.toolCallsReplayed} tool calls from {r.sessionsReplayed} sessions replayed:{' '}
                <strong>{r.changes.length === 0 ? 'no decision would change.' : `${r.changes.length} decisions would change.`}</strong>
              </p>
              {r.changes.length > 0 && <DataTable caption="Decisions that would change" columns={CHANGE_COLUMNS} rows={r.changes} rowKey={(c) => c.toolCallId} />}
            </div>
          )}
        </Query>
      )}
    </section>
  );
}

const MCP_STATUS = { pinned: ['pinned', 'good'], unpinned: ['not pinned yet', 'warn'], changed: ['changed since pinned', 'danger'] } as const;

/**
 * AG7: the project's MCP servers under the policy in force — where each runs, the credential the
 * gateway holds for it (never its value), how its tools are decided — and what each listed the last
 * time a session started it. No tool is offered until its description is pinned; an administrator
 * pins what was listed into the draft and publishes it. Descriptions are the servers' words, shown
 * as text.
 */
function McpTab({ mcp, canPublish, onPin }: { mcp: QueryState<ProjectMcpView>; canPublish: boolean; onPin: (server: string, pins: Record<string, string>) => void }) {
  return (
    <Query state={mcp} what="the MCP servers">
      {(view) =>
        view.servers.length === 0 ? (
          <Empty>
            The policy in force enables no MCP server, so sessions of this project are offered no MCP tool. An administrator declares one under <code>mcp.servers</code> in the policy document.
          </Empty>
        ) : (
          <div className="mcp-servers">
            {view.servers.map((s) => (
              <McpServerCard key={s.name} server={s} canPublish={canPublish} onPin={onPin} />
            ))}
          </div>
        )
      }
    </Query>
  );
}

function McpServerCard({ server: s, canPublish, onPin }: { server: ProjectMcpView['servers'][number]; canPublish: boolean; onPin: (server: string, pins: Record<string, string>) => void }) {
  const id = `mcp-${s.name}`;
  const toPin = (s.lastListing?.tools ?? []).filter((t) => t.status !== 'pinned');
  const list = (tools: string[]) => (tools.length ? tools.join(', ') : 'none');
  return (
    <section className="card" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>
        {s.name} <span className="badge">{s.kind === 'local' ? 'local, in the sandbox' : 'remote, through the gateway'}</span>
      </h2>
      <dl className="facts">
        <dt>{s.kind === 'local' ? 'Command' : 'URL'}</dt>
        <dd>
          <code>{s.kind === 'local' ? (s.command ?? []).join(' ') : s.url}</code>
        </dd>
        {s.credential && (
          <>
            <dt>Credential</dt>
            <dd>
              <code>{s.credential.name}</code>{' '}
              {s.credential.held ? <span className="badge good">held by the gateway</span> : <span className="bad">not held by the gateway: the server cannot be reached</span>}
            </dd>
          </>
        )}
        <dt>Free</dt>
        <dd>{list(s.tools.free)}</dd>
        <dt>Forbidden</dt>
        <dd>{list(s.tools.forbidden)}</dd>
        <dt>Read-only</dt>
        <dd>{list(s.tools.readOnly)}</dd>
        <dt>Any other tool</dt>
        <dd>{s.tools.default}</dd>
      </dl>
      {s.lastError && (
        <p className="notice warn" role="note">
          The last start failed ({new Date(s.lastError.at).toLocaleString()}): {s.lastError.message}
        </p>
      )}
      {!s.lastListing ? (
        <p className="muted">No session has listed this server's tools yet. Start a session in this project: its tools are listed (and withheld until pinned), then shown here to approve.</p>
      ) : (
        <>
          <p className="muted small">
            Listed {new Date(s.lastListing.at).toLocaleString()}
            {s.lastListing.sessionId ? ` by session ${s.lastListing.sessionId.slice(0, 8)}` : ''}. A tool is offered to the model only under the description pinned here.
          </p>
          <div className="table-scroll">
            <table className="data mcp-tools">
              <caption className="visually-hidden">Tools of {s.name}</caption>
              <thead>
                <tr>
                  <th scope="col">Tool and status</th>
                  <th scope="col">Description (the server's words)</th>
                  {canPublish && <th scope="col">Approve</th>}
                </tr>
              </thead>
              <tbody>
                {s.lastListing.tools.map((t) => (
                  <tr key={t.name}>
                    <td>
                      <div className="mcp-tool">
                        <code>{t.name}</code>
                        <span className={`badge ${MCP_STATUS[t.status][1]}`}>{MCP_STATUS[t.status][0]}</span>
                      </div>
                    </td>
                    <td className="wrap">{t.description || <span className="muted">(no description)</span>}</td>
                    {canPublish && (
                      <td>
                        {t.status !== 'pinned' && (
                          <button type="button" onClick={() => onPin(s.name, { [t.name]: t.pin })} aria-label={`Pin in draft: ${s.name}/${t.name}`}>
                            Pin in draft
                          </button>
                        )}
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {canPublish && toPin.length > 1 && (
            <div className="actions">
              <button type="button" onClick={() => onPin(s.name, Object.fromEntries(toPin.map((t) => [t.name, t.pin])))}>
                Pin the {toPin.length} descriptions not pinned in the draft
              </button>
            </div>
          )}
        </>
      )}
    </section>
  );
}
