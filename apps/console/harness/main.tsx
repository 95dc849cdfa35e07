import '../src/zod-config';
import { useState, type ReactNode } from 'react';
import { createRoot } from 'react-dom/client';
import { policyJsonSchema as policySchema } from '@lemniscate/policy/check';
import type { ApprovalView, EnvironmentStatus, ExecHostView, UserRole } from '@lemniscate/contracts';
import { ApiError } from '../src/api/client';
import { ROLE_LABELS, type PageKey } from '../src/auth/access';
import { DiffViewer } from '../src/components/diff/DiffViewer';
import { ready, type QueryState } from '../src/components/Query';
import { Layout } from '../src/layout/Layout';
import { cleanLogText } from '../src/environment/view-model';
import { commonFields, withPins } from '../src/policy/form-model';
import { diagnosePolicy } from '../src/policy/validate';
import { ApprovalsPageView } from '../src/pages/ApprovalsPageView';
import { AuditPageView } from '../src/pages/AuditPageView';
import { canDo } from '../src/auth/access';
import { AUDIT_KINDS } from '@lemniscate/contracts';
import { DashboardPageView } from '../src/pages/DashboardPageView';
import { EnvironmentPageView, type LogView } from '../src/pages/EnvironmentPageView';
import { ExecHostsPageView } from '../src/pages/ExecHostsPageView';
import { actorName, drainConsequence } from '../src/exec-hosts/view-model';
import { PoliciesPageView, type PolicyTab } from '../src/pages/PoliciesPageView';
import { ProjectsPageView } from '../src/pages/ProjectsPageView';
import { SessionPageView } from '../src/pages/SessionPageView';
import { filterFromSearch, searchFromFilter, SessionsPageView } from '../src/pages/SessionsPageView';
import { SignInPageView } from '../src/pages/SignInPageView';
import { UsersPageView } from '../src/pages/UsersPageView';
import * as f from './fixtures';
import '../src/styles.css';

/*
 * Renders one pure PageView with sample data so the browser tests can exercise it without a
 * gateway: ?view=approvals&state=ready|loading|error&role=developer. Every callback a view fires is
 * recorded in window.__calls for the tests to assert on.
 */
declare global {
  interface Window {
    __calls: { name: string; args: unknown[] }[];
  }
}
window.__calls = [];
const record =
  (name: string) =>
  (...args: unknown[]) => {
    window.__calls.push({ name, args });
  };

const params = new URLSearchParams(window.location.search);
const view = params.get('view') ?? 'dashboard';
const stateParam = params.get('state') ?? 'ready';
const role = (params.get('role') ?? 'admin') as UserRole;
const variant = params.get('variant') ?? '';

const serverError = new ApiError({ code: 'forbidden', status: 403, message: 'Your role does not allow publishing a policy for project demo.', requestId: 'req_7f3a9c' });

function q<T>(data: T): QueryState<T> {
  if (stateParam === 'loading') return { status: 'loading' };
  if (stateParam === 'error') return { status: 'error', error: serverError, retry: record('retry') };
  return ready(data);
}

const diagnose = diagnosePolicy;
const fields = commonFields(policySchema);

function Shell({ page, children }: { page: PageKey; children: ReactNode }) {
  const user = { admin: f.users[0]!, developer: f.users[1]!, security_officer: f.users[2]! }[role];
  return (
    <Layout
      user={user}
      current={page}
      onSignOut={record('signOut')}
      pendingApprovals={role !== 'security_officer' ? 3 : undefined}
      renderLink={(to, label, current) => (
        <a href={`?view=${to === '/' ? 'dashboard' : to.split('/').pop()}&role=${role}`} aria-current={current ? 'page' : undefined}>
          {label}
        </a>
      )}
    >
      {children}
    </Layout>
  );
}

function Approvals() {
  // `not-exempt`: the policy asks again for every run of the command (P3), so nothing offers it.
  // `long-file`: the file change is one long file changed in two places, to expand around its hunks.
  const initial =
    variant === 'not-exempt'
      ? f.approvals.map((a) => ({ ...a, flags: { thirdParty: a.flags.thirdParty } }))
      : variant === 'long-file' || variant === 'context-moved'
        ? f.approvals.map((a) => (a.id === 'apr_2' ? { ...a, payload: { diff: f.longFilePatch, files: ['src/values.ts'] } } : a))
        : f.approvals;
  const [list, setList] = useState<ApprovalView[]>(variant === 'empty' ? [] : initial);
  const [selected, setSelected] = useState<string | null>(params.get('selected'));
  return (
    <Shell page="approvals">
      <ApprovalsPageView
        approvals={q(list)}
        selectedId={selected}
        onSelect={(id) => {
          record('select')(id);
          setSelected(id);
        }}
        onAnswer={(id, answer, opts) => {
          record('answer')(id, answer, opts);
          // As the server would: the answered request leaves the inbox.
          const i = list.findIndex((a) => a.id === id);
          const next = list.filter((a) => a.id !== id);
          setList(next);
          setSelected(next[i]?.id ?? next[i - 1]?.id ?? null);
        }}
        busyId={null}
        answerError={variant === 'answer-error' ? serverError : null}
        live={true}
        loadContext={async (id, path, from, to) => {
          record('context')(id, path, from, to);
          // `context-moved`: the sandbox's file changed since; the gateway's sentence is shown.
          if (variant === 'context-moved') {
            throw new ApiError({ code: 'conflict', status: 409, message: `${path} has changed in the sandbox since this change was proposed, so the lines around it cannot be shown as they were.` });
          }
          return { lines: f.longFileOld.slice(from - 1, to), totalLines: f.longFileOld.length };
        }}
      />
    </Shell>
  );
}

function Policies() {
  // Loading and error states belong to the version history, so those states open on it.
  const [tab, setTab] = useState<PolicyTab>((params.get('tab') as PolicyTab) ?? (stateParam === 'ready' ? 'edit' : 'history'));
  const drafts: Record<string, string> = {
    invalid: f.policyText.replace('default: ask', 'default: maybe').replace('  reapproval', '  reaproval'),
    mcp: f.policyTextWithMcp,
    // Valid for the JSON schema, refused by the policy library: a command both free and forbidden.
    overlap: f.policyText.replace('    - npm run lint\n', '    - npm run lint\n    - curl\n  forbidden:\n    - curl\n'),
  };
  const [draft, setDraft] = useState(drafts[variant] ?? f.policyText);
  const [compare, setCompare] = useState<{ from: number; to: number }>({ from: 2, to: 3 });
  const [dryRan, setDryRan] = useState(false);
  return (
    <Shell page="policies">
      <PoliciesPageView
        projects={f.projects}
        projectId="prj_demo"
        onProjectChange={record('project')}
        tab={tab}
        onTabChange={setTab}
        draft={draft}
        onDraftChange={(t) => {
          record('draft')(t);
          setDraft(t);
        }}
        diagnose={diagnose}
        fields={fields}
        onPublish={record('publish')}
        inForce={{ version: 3, text: f.policyText }}
        publishing={false}
        publishError={variant === 'publish-error' ? serverError : null}
        notice={null}
        versions={q(f.versions)}
        compare={compare}
        onCompare={(from, to) => {
          record('compare')(from, to);
          setCompare({ from, to });
        }}
        diff={ready({ from: compare.from, to: compare.to, patch: f.policyDiff })}
        onLoadVersion={record('load')}
        onRollback={record('rollback')}
        rollingBack={null}
        rollbackError={null}
        canPublish={canDo(role, 'publishPolicy')}
        mcp={q(variant === 'mcp-none' ? { ...f.projectMcp, servers: [] } : f.projectMcp)}
        onPin={(server, pins) => {
          record('pin')(server, pins);
          // As the page does: the pins go into the draft, and the editor shows it.
          setDraft(withPins(draft, server, pins));
          setTab('edit');
        }}
        dryRun={{
          result: dryRan ? ready(f.dryRun) : null,
          onRun: (n) => {
            record('dryRun')(n);
            setDryRan(true);
          },
          running: false,
        }}
      />
    </Shell>
  );
}

function Environment() {
  const statuses: Record<string, EnvironmentStatus> = {
    preparing: f.environmentPreparing,
    failed: f.environmentFailed,
    'not-prepared': f.environmentNotPrepared,
    'prepare-error': f.environmentNotPrepared,
    base: f.environmentBase,
  };
  const logs: Record<string, LogView> = {
    ready: { text: cleanLogText(f.environmentLogParts.join('')), complete: true, truncated: false, error: null },
    preparing: { text: cleanLogText(f.environmentLogParts.slice(0, 3).join('')), complete: false, truncated: false, error: null },
    failed: { text: cleanLogText(f.environmentFailedLog), complete: true, truncated: false, error: null },
  };
  const [status, setStatus] = useState<EnvironmentStatus>(statuses[variant] ?? f.environmentReady);
  const refusal = new ApiError({ code: 'environment_preparing', status: 409, message: 'A preparation of these inputs is already running; wait for it to finish.', requestId: 'req_env409' });
  return (
    <Shell page="environment">
      <EnvironmentPageView
        projects={f.projects}
        projectId="prj_demo"
        onProjectChange={record('project')}
        status={q(status)}
        log={status.job ? (logs[status.state] ?? null) : null}
        canPrepare={canDo(role, 'prepareEnvironment')}
        onPrepare={(force) => {
          record('prepare')(force);
          if (variant !== 'prepare-error') setStatus(f.environmentPreparing);
        }}
        requesting={false}
        prepareError={variant === 'prepare-error' ? refusal : null}
        notice={null}
        // The sample times are fixed: a running job has run for 90 s.
        now={Date.parse(f.environmentPreparing.job!.startedAt) + 90_000}
      />
    </Shell>
  );
}

function Users() {
  const [selected, setSelected] = useState<string | null>(params.get('selected'));
  const [created, setCreated] = useState<string | null>(null);
  return (
    <Shell page="users">
      <UsersPageView
        users={q(f.users)}
        projects={f.projects}
        myUserId="usr_ada"
        selectedUserId={selected}
        onSelectUser={(id) => setSelected((c) => (c === id ? null : id))}
        tokens={ready(f.tokens)}
        onChangeRole={record('changeRole')}
        onCreateUser={record('createUser')}
        creating={false}
        onRevokeUser={record('revokeUser')}
        onSetMembership={record('membership')}
        onRevokeToken={record('revokeToken')}
        onCreateToken={(name, days) => {
          record('createToken')(name, days);
          setCreated('lmn_4f2a_secret_shown_once');
        }}
        createdToken={created}
        actionError={null}
        notice={null}
      />
    </Shell>
  );
}

function Projects() {
  const [selected, setSelected] = useState<string | null>(params.get('selected'));
  return (
    <Shell page="projects">
      <ProjectsPageView
        projects={q(f.projects)}
        selectedId={selected}
        onSelect={setSelected}
        members={ready(f.members)}
        users={f.users}
        onCreate={record('create')}
        onUpdate={record('update')}
        onAddMember={record('addMember')}
        onRemoveMember={record('removeMember')}
        policyHref={(id) => `?view=policies&project=${id}`}
        // `no-policy`: nothing published yet, so the built-in default (runc) applies.
        runtime={variant === 'no-policy' ? ready({ runtime: 'runc', version: null }) : ready({ runtime: 'runsc', version: 3 })}
        onRuntime={record('runtime')}
        busy={false}
        actionError={null}
        notice={null}
      />
    </Shell>
  );
}

function Audit() {
  const [filter, setFilter] = useState({});
  return (
    <Shell page="audit">
      <AuditPageView
        projects={f.projects}
        filter={filter}
        onFilter={(x) => {
          record('filter')(x);
          setFilter(x);
        }}
        entries={q(f.auditEntries)}
        verification={q(variant === 'broken' ? f.broken : f.verified)}
        onVerify={record('verify')}
        onExport={record('export')}
        exporting={null}
        exportError={null}
        verifiedAt="2026-11-29T13:59:00.000Z"
        kinds={AUDIT_KINDS}
        total={variant === 'paged' ? 1234 : f.auditEntries.length}
        paging={variant === 'paged' ? { offset: 50, pageSize: 50, newer: true, older: true } : { offset: 0, pageSize: 50, newer: false, older: false }}
        onOlder={record('older')}
        onNewer={record('newer')}
        onNewest={record('newest')}
        sinks={variant === 'sinks' ? f.sinksHealthy : variant === 'sinks-failing' ? f.sinksFailing : variant === 'sinks-none' ? f.sinksNone : null}
      />
    </Shell>
  );
}

function ExecHosts() {
  const initial: Record<string, ExecHostView[]> = { empty: [], fixed: [f.fixedExecHost] };
  const [hosts, setHosts] = useState<ExecHostView[]>(initial[variant] ?? f.execHosts);
  const [notice, setNotice] = useState<string | null>(null);
  const refusal = new ApiError({ code: 'forbidden', status: 403, message: 'As a security officer you may not update exec-hosts.', requestId: 'req_eh403' });
  const names = new Map(f.users.map((u) => [u.id, u.displayName]));
  return (
    <Shell page="execHosts">
      <ExecHostsPageView
        hosts={q(hosts)}
        canDrain={canDo(role, 'drainExecHost')}
        onDrain={(hostId, reason) => {
          record('drain')(hostId, reason);
          // As the gateway answers: the host's view, drained by the signed-in administrator.
          const next = hosts.map((h) => (h.id === hostId ? { ...h, state: h.state === 'active' ? ('draining' as const) : h.state, drainedBy: 'user:usr_ada', drainReason: reason ?? null } : h));
          setHosts(next);
          setNotice(`Drained. ${drainConsequence(next.find((h) => h.id === hostId)!)}`);
        }}
        onUndrain={(hostId) => {
          record('undrain')(hostId);
          setHosts(hosts.map((h) => (h.id === hostId ? { ...h, state: h.state === 'draining' ? ('active' as const) : h.state, drainedBy: null, drainReason: null } : h)));
          setNotice(`Sessions may be placed on ${hostId} again.`);
        }}
        busyId={null}
        actionError={variant === 'drain-error' ? refusal : null}
        notice={notice}
        nameOf={(actor) => actorName(actor, names, role === 'admin' ? 'usr_nobody' : '')}
        now={f.execHostsNow}
        refreshSeconds={5}
      />
    </Shell>
  );
}

function Harness() {
  switch (view) {
    case 'signin':
      return (
        <SignInPageView
          onSubmit={record('signIn')}
          pending={false}
          error={variant === 'error' ? new ApiError({ code: 'invalid_credentials', status: 401, message: 'This e-mail and password do not match an account.', requestId: 'req_01' }) : null}
          sso={variant.startsWith('sso') ? { label: 'Sign in with Corp SSO', href: '/api/v1/auth/oidc/start?returnTo=%2F' } : null}
          passwordSignIn={variant !== 'sso-only'}
          ssoError={variant === 'sso-error' ? 'Your account at the identity provider is in no group this deployment gives a role to (your groups: marketing); ask an administrator.' : null}
        />
      );
    case 'dashboard':
      return (
        <Shell page="dashboard">
          <DashboardPageView
            stats={q(f.stats)}
            days={14}
            onDaysChange={record('days')}
            approvalsHref={role === 'security_officer' ? undefined : '?view=approvals'}
            sessionsHref={(filter) => `?view=sessions&role=${role}&${searchFromFilter(filter).toString()}`}
          />
        </Shell>
      );
    case 'approvals':
      return <Approvals />;
    case 'sessions':
      return (
        <Shell page="sessions">
          <SessionsPageView
            sessions={q(variant === 'empty' ? [] : f.sessions)}
            filter={filterFromSearch(params)}
            onFilter={record('filter')}
            projects={f.projects}
            me={role === 'admin' ? { id: 'usr_ada', email: 'ada@example.org' } : { id: 'usr_dev', email: 'dev@example.org' }}
            seesOthers={role !== 'developer'}
            now={Date.parse('2026-11-29T14:00:00Z')}
            live={true}
            renderSessionLink={(id, children) => <a href={`?view=session&id=${id}&role=${role}`}>{children}</a>}
          />
        </Shell>
      );
    case 'session':
      return (
        <Shell page="sessions">
          <SessionPageView
            session={q(variant === 'completed' ? f.completedSession : (f.sessions.find((x) => x.id === params.get('id')) ?? f.sessions[0]!))}
            events={f.events}
            live={true}
            canStop={role !== 'security_officer'}
            canRevoke={role === 'admin'}
            onStop={record('stop')}
            onRevoke={record('revoke')}
            onDownloadPatch={record('downloadPatch')}
            busy={null}
            actionError={null}
            notice={null}
          />
        </Shell>
      );
    case 'policies':
      return <Policies />;
    case 'environment':
      return <Environment />;
    case 'users':
      return <Users />;
    case 'projects':
      return <Projects />;
    case 'audit':
      return <Audit />;
    case 'exec-hosts':
      return <ExecHosts />;
    case 'diff':
      return (
        <main id="main" className="page">
          <h1>Diff viewer</h1>
          <DiffViewer
            patch={variant === 'third-party' ? f.thirdPartyPatch : variant === 'large' ? f.largePatch : f.sourcePatch + f.thirdPartyPatch}
            thirdParty={[
              { path: 'package.json', class: 'dependencies' },
              { path: '.github/workflows/ci.yml', class: 'ci' },
            ]}
          />
        </main>
      );
    default:
      return (
        <p>
          Unknown view {view}. Roles: {Object.values(ROLE_LABELS).join(', ')}
        </p>
      );
  }
}

createRoot(document.getElementById('root')!).render(<Harness />);
