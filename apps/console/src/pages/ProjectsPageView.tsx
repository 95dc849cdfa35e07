import { useState } from 'react';
import { CreateProjectRequest, UpdateProjectRequest, type ProjectMemberView, type ProjectView, type UserView } from '@lemniscate/contracts';
import { ROLE_LABELS } from '../auth/access';
import { DataTable, When, type Column } from '../components/DataTable';
import { Query, type QueryState } from '../components/Query';
import { InlineError, Notice } from '../components/States';
import { RUNTIMES, type SandboxRuntime } from '../policy/text';

interface ProjectsPageViewProps {
  projects: QueryState<ProjectView[]>;
  selectedId: string | null;
  onSelect: (id: string | null) => void;
  /** The selected project's members (administrators read them). */
  members: QueryState<ProjectMemberView[]>;
  /** Everyone who could be added. */
  users: readonly UserView[];
  onCreate: (body: CreateProjectRequest, memberIds: string[]) => void;
  onUpdate: (projectId: string, body: UpdateProjectRequest) => void;
  onAddMember: (projectId: string, userId: string) => void;
  onRemoveMember: (projectId: string, userId: string) => void;
  /** Where a project's policy (runtime, commands, limits) is edited. */
  policyHref: (projectId: string) => string;
  /** The sandbox runtime the selected project's policy in force asks for, and that version (null: no policy yet). */
  runtime: QueryState<{ runtime: string; version: number | null }>;
  /** Publishes a policy version that differs from the one in force only by `sandbox.runtime`. */
  onRuntime: (projectId: string, runtime: SandboxRuntime) => void;
  busy: boolean;
  actionError: unknown;
  notice: string | null;
}

type Problems = Partial<Record<'name' | 'repositorySource' | 'defaultRef' | 'form', string>>;

/** The contract's sentence for each field, as the gateway would say it. */
function problemsOf(issues: readonly { path: readonly PropertyKey[]; message: string }[]): Problems {
  const out: Problems = {};
  for (const i of issues) {
    const key = (String(i.path[0] ?? 'form') as keyof Problems) ?? 'form';
    out[key] ??= i.message;
  }
  return out;
}

function Field({ id, label, value, onChange, problem, help }: { id: string; label: string; value: string; onChange: (v: string) => void; problem?: string; help?: string }) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        aria-invalid={!!problem}
        aria-describedby={[problem ? `${id}-err` : '', help ? `${id}-help` : ''].filter(Boolean).join(' ') || undefined}
      />
      {help && (
        <p className="help" id={`${id}-help`}>
          {help}
        </p>
      )}
      {problem && (
        <p className="field-error" id={`${id}-err`}>
          {problem}
        </p>
      )}
    </div>
  );
}

const SOURCE_HELP = 'A path on the gateway host, or an https:// or ssh:// URL; a private repository needs its access set with lemni repository.';

export function ProjectsPageView(p: ProjectsPageViewProps) {
  return (
    <div className="page">
      <div className="page-header">
        <h1>Projects</h1>
        {p.selectedId && (
          <button type="button" onClick={() => p.onSelect(null)}>
            New project
          </button>
        )}
      </div>
      <InlineError error={p.actionError} />
      <Notice text={p.notice} />
      <Query state={p.projects} what="the projects">
        {(projects) => {
          const selected = projects.find((x) => x.id === p.selectedId) ?? null;
          const columns: Column<ProjectView>[] = [
            {
              header: 'Name',
              cell: (x) => (
                <button type="button" className="link" aria-pressed={x.id === p.selectedId} onClick={() => p.onSelect(x.id === p.selectedId ? null : x.id)}>
                  {x.name}
                </button>
              ),
            },
            { header: 'Repository', className: 'truncate', cell: (x) => <code title={x.repositorySource}>{x.repositorySource}</code> },
            { header: 'Default ref', cell: (x) => <code>{x.defaultRef}</code> },
            { header: 'Created', cell: (x) => <When at={x.createdAt} /> },
          ];
          return (
            <div className="grid users">
              <section className="card flush span-2 scroll-x" aria-labelledby="projects-title">
                <h2 id="projects-title" className="pad">
                  Projects
                </h2>
                {projects.length === 0 ? (
                  <p className="pad muted">No project yet: create the first one here or with lemni projects create.</p>
                ) : (
                  <DataTable caption="Projects" columns={columns} rows={projects} rowKey={(x) => x.id} rowClassName={(x) => (x.id === p.selectedId ? 'selected' : undefined)} />
                )}
              </section>
              {selected ? <ProjectDetail key={selected.id} project={selected} {...p} /> : <NewProject key={p.notice ?? ''} {...p} />}
            </div>
          );
        }}
      </Query>
    </div>
  );
}

function NewProject({ users, onCreate, busy }: ProjectsPageViewProps) {
  const [form, setForm] = useState({ name: '', repositorySource: '', defaultRef: 'main' });
  const [memberIds, setMemberIds] = useState<string[]>([]);
  const [problems, setProblems] = useState<Problems>({});
  return (
    <section className="card" aria-labelledby="new-project-title">
      <h2 id="new-project-title">New project</h2>
      <form
        className="form"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const parsed = CreateProjectRequest.safeParse(form);
          if (!parsed.success) return setProblems(problemsOf(parsed.error.issues));
          setProblems({});
          onCreate(parsed.data, memberIds);
        }}
      >
        <Field
          id="np-name"
          label="Name"
          value={form.name}
          onChange={(name) => setForm({ ...form, name })}
          problem={problems.name}
          help="Letters, digits, dots, dashes and underscores: lemni -p uses it."
        />
        <Field
          id="np-source"
          label="Repository"
          value={form.repositorySource}
          onChange={(repositorySource) => setForm({ ...form, repositorySource })}
          problem={problems.repositorySource}
          help={SOURCE_HELP}
        />
        <Field id="np-ref" label="Default ref" value={form.defaultRef} onChange={(defaultRef) => setForm({ ...form, defaultRef })} problem={problems.defaultRef} />
        <fieldset className="field">
          <legend>Members</legend>
          <div className="checks">
            {users
              .filter((u) => !u.revokedAt)
              .map((u) => (
                <label key={u.id} className="checkbox">
                  <input type="checkbox" checked={memberIds.includes(u.id)} onChange={(e) => setMemberIds(e.target.checked ? [...memberIds, u.id] : memberIds.filter((x) => x !== u.id))} />
                  {u.displayName} <span className="muted small">{ROLE_LABELS[u.role]}</span>
                </label>
              ))}
          </div>
        </fieldset>
        <p className="help">Sessions run under runc until the project's policy says otherwise (sandbox.runtime, on the Policies page).</p>
        <button type="submit" className="primary" disabled={busy}>
          {busy ? 'Creating…' : 'Create project'}
        </button>
      </form>
    </section>
  );
}

function ProjectDetail({ project, members, users, onUpdate, onAddMember, onRemoveMember, policyHref, runtime, onRuntime, busy }: ProjectsPageViewProps & { project: ProjectView }) {
  const [form, setForm] = useState({ repositorySource: project.repositorySource, defaultRef: project.defaultRef });
  const [problems, setProblems] = useState<Problems>({});
  const [adding, setAdding] = useState('');
  const changed = form.repositorySource !== project.repositorySource || form.defaultRef !== project.defaultRef;
  return (
    <section className="card" aria-labelledby="project-title">
      <h2 id="project-title">{project.name}</h2>
      <form
        className="form"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const body = {
            ...(form.repositorySource !== project.repositorySource ? { repositorySource: form.repositorySource } : {}),
            ...(form.defaultRef !== project.defaultRef ? { defaultRef: form.defaultRef } : {}),
          };
          const parsed = UpdateProjectRequest.safeParse(body);
          if (!parsed.success) return setProblems(problemsOf(parsed.error.issues));
          setProblems({});
          onUpdate(project.id, parsed.data);
        }}
      >
        <Field
          id="pd-source"
          label="Repository"
          value={form.repositorySource}
          onChange={(repositorySource) => setForm({ ...form, repositorySource })}
          problem={problems.repositorySource}
          help={`${SOURCE_HELP} A new source is refused while repository access is set, so a credential never goes to another host.`}
        />
        <Field id="pd-ref" label="Default ref" value={form.defaultRef} onChange={(defaultRef) => setForm({ ...form, defaultRef })} problem={problems.defaultRef} />
        <InlineError error={problems.form ? new Error(problems.form) : null} />
        <button type="submit" disabled={busy || !changed}>
          Save changes
        </button>
      </form>
      <h3 id="pd-runtime-title">Sandbox runtime</h3>
      <Query state={runtime} what={`the policy of ${project.name}`}>
        {(r) => <RuntimeForm key={`${project.id}:${r.version ?? 0}`} project={project} current={r} onRuntime={onRuntime} busy={busy} />}
      </Query>
      <p className="help">
        Runtime, commands and limits are the project's policy: <a href={policyHref(project.id)}>edit it on the Policies page</a>.
      </p>
      <h3>Members</h3>
      <Query state={members} what={`the members of ${project.name}`}>
        {(list) => (
          <>
            {list.length === 0 ? (
              <p className="muted">No member yet: nobody can start a session here until someone is added, administrators included.</p>
            ) : (
              <ul className="members">
                {list.map((m) => (
                  <li key={m.userId}>
                    <span>
                      {m.displayName} <span className="muted small">{m.email}</span> <span className={`role-badge ${m.role}`}>{ROLE_LABELS[m.role]}</span>
                    </span>
                    <button type="button" className="danger outline small" disabled={busy} onClick={() => onRemoveMember(project.id, m.userId)}>
                      Remove <span className="visually-hidden">{m.displayName}</span>
                    </button>
                  </li>
                ))}
              </ul>
            )}
            <form
              className="field inline add-member"
              onSubmit={(e) => {
                e.preventDefault();
                if (adding) onAddMember(project.id, adding);
                setAdding('');
              }}
            >
              <label htmlFor="pd-add">Add a member</label>
              <select id="pd-add" value={adding} onChange={(e) => setAdding(e.target.value)}>
                <option value="">Choose a person…</option>
                {users
                  .filter((u) => !u.revokedAt && !list.some((m) => m.userId === u.id))
                  .map((u) => (
                    <option key={u.id} value={u.id}>
                      {u.displayName} ({u.email})
                    </option>
                  ))}
              </select>
              <button type="submit" disabled={busy || !adding}>
                Add
              </button>
            </form>
          </>
        )}
      </Query>
    </section>
  );
}

const RUNTIME_WORDS: Record<SandboxRuntime, { name: string; what: string }> = {
  runc: { name: 'runc', what: 'the standard container runtime: fastest to start' },
  runsc: { name: 'runsc (gVisor)', what: 'a kernel in user space between the agent and the host: stronger isolation, slower commands' },
};

/** The runtime in force and a choice that publishes the one-line change to the policy. */
function RuntimeForm({
  project,
  current,
  onRuntime,
  busy,
}: {
  project: ProjectView;
  current: { runtime: string; version: number | null };
  onRuntime: ProjectsPageViewProps['onRuntime'];
  busy: boolean;
}) {
  const known = (RUNTIMES as readonly string[]).includes(current.runtime);
  const [choice, setChoice] = useState<SandboxRuntime>(known ? (current.runtime as SandboxRuntime) : 'runc');
  const next = (current.version ?? 0) + 1;
  return (
    <form
      className="form"
      onSubmit={(e) => {
        e.preventDefault();
        onRuntime(project.id, choice);
      }}
    >
      <fieldset className="field">
        <legend>
          Sessions of {project.name} run under <strong>{current.runtime}</strong> ({current.version === null ? 'no policy published yet: the built-in default' : `policy version ${current.version}`}).
        </legend>
        {RUNTIMES.map((r) => (
          <label key={r} className="checkbox">
            <input type="radio" name={`runtime-${project.id}`} value={r} checked={choice === r} onChange={() => setChoice(r)} />
            {RUNTIME_WORDS[r].name} <span className="muted small">— {RUNTIME_WORDS[r].what}</span>
          </label>
        ))}
      </fieldset>
      <p className="help" id="pd-runtime-help">
        Publishing makes version {next} of the policy, the same as the one in force but for <code>sandbox.runtime</code>, and records it in the policy's history. Running sessions keep the runtime they
        started with.
      </p>
      <button type="submit" disabled={busy || choice === current.runtime} aria-describedby="pd-runtime-help">
        Publish version {next} with {choice}
      </button>
    </form>
  );
}
