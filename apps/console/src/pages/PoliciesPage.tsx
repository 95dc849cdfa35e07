import { useCallback, useEffect, useMemo, useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { policyJsonSchema as policySchema } from '@lemniscate/policy/check';
import { capabilitiesQuery } from '../api/queries/capabilities';
import { projectMcpQuery, projectsQuery } from '../api/queries/projects';
import { dryRunPolicy, policyDiffQuery, policyVersionQuery, policyVersionsQuery, publishPolicy, rollbackPolicy } from '../api/queries/policies';
import { fromQuery, Query, type QueryState } from '../components/Query';
import { Empty, ErrorPanel, Loading } from '../components/States';
import { useAuth } from '../auth/AuthContext';
import { canDo } from '../auth/access';
import { commonFields, withPins } from '../policy/form-model';
import { STARTER, textOf } from '../policy/text';
import { diagnosePolicy } from '../policy/validate';
import { PoliciesPageView, type PolicyTab } from './PoliciesPageView';
import type { DryRunResponse } from '../api/console-contracts';

const fields = commonFields(policySchema);
const diagnose = diagnosePolicy;

export function PoliciesPage() {
  const projects = useQuery(projectsQuery());
  return (
    <Query state={fromQuery(projects)} what="the projects">
      {(list) => (list.length === 0 ? <Empty>No project yet. Create one on the Projects page or with lemni projects create.</Empty> : <PoliciesForProjects projects={list} />)}
    </Query>
  );
}

function PoliciesForProjects({ projects }: { projects: { id: string; name: string; repositorySource: string; defaultRef: string; createdAt: string }[] }) {
  const qc = useQueryClient();
  const { me } = useAuth();
  // `/policies?project=ID` opens that project's policy (the Projects page links here).
  const asked = new URLSearchParams(window.location.search).get('project');
  const [projectId, setProjectId] = useState(projects.find((p) => p.id === asked)?.id ?? projects[0]!.id);
  const [tab, setTab] = useState<PolicyTab>('edit');
  const [draft, setDraft] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [compare, setCompare] = useState<{ from: number; to: number } | null>(null);

  const versions = useQuery(policyVersionsQuery(projectId));
  const mcp = useQuery(projectMcpQuery(projectId));
  const capabilities = useQuery(capabilitiesQuery());
  // Offered unless the gateway's OpenAPI document says it has no dry run; if that document cannot be
  // read, the tab stays and a failed run explains itself.
  const offersDryRun = capabilities.data?.offers('post', '/api/v1/projects/{projectId}/policy/dry-run') ?? !capabilities.isSuccess;
  const latest = useMemo(() => (versions.data?.length ? Math.max(...versions.data.map((v) => v.version)) : null), [versions.data]);
  const current = useQuery({ ...policyVersionQuery(projectId, latest ?? 0), enabled: latest !== null });

  // The editor starts from the version in force; later edits stay until published or the project changes.
  useEffect(() => {
    if (draft !== null) return;
    if (current.data) setDraft(textOf(current.data));
    else if (versions.isSuccess && latest === null) setDraft(STARTER);
  }, [draft, current.data, versions.isSuccess, latest]);

  // A draft that differs from what is in force is not lost without a word: leaving or reloading asks.
  const unsaved = draft !== null && draft !== (current.data ? textOf(current.data) : STARTER);
  useEffect(() => {
    if (!unsaved) return;
    const warn = (e: BeforeUnloadEvent) => {
      e.preventDefault();
      e.returnValue = '';
    };
    window.addEventListener('beforeunload', warn);
    return () => window.removeEventListener('beforeunload', warn);
  }, [unsaved]);

  const sorted = useMemo(() => [...(versions.data ?? [])].sort((a, b) => b.version - a.version), [versions.data]);
  const effectiveCompare = compare ?? (sorted.length > 1 ? { from: sorted[1]!.version, to: sorted[0]!.version } : null);
  const diff = useQuery({ ...policyDiffQuery(projectId, effectiveCompare?.from ?? 0, effectiveCompare?.to ?? 0), enabled: !!effectiveCompare && effectiveCompare.from !== effectiveCompare.to });

  const publish = useMutation({
    mutationFn: (comment: string) => publishPolicy(projectId, { sourceText: draft ?? '', comment }),
    onSuccess: async (v) => {
      setNotice(`Published version ${v.version}. It applies from the next action of every session of this project.`);
      qc.setQueryData(policyVersionQuery(projectId, v.version).queryKey, v);
      await qc.invalidateQueries({ queryKey: ['projects', projectId, 'policy'] });
      await qc.invalidateQueries({ queryKey: ['projects', projectId, 'mcp'] });
    },
  });
  const rollback = useMutation({
    mutationFn: (version: number) => rollbackPolicy(projectId, { version, comment: `Rollback to version ${version}` }),
    onSuccess: async (v) => {
      setNotice(`Version ${v.version} now applies; it restores an earlier version.`);
      setDraft(textOf(v));
      await qc.invalidateQueries({ queryKey: ['projects', projectId, 'policy'] });
    },
  });
  const dry = useMutation({ mutationFn: (sessions: number) => dryRunPolicy(projectId, { sourceText: draft ?? '', sessions }) });
  const dryState: QueryState<DryRunResponse> | null = dry.isPending
    ? { status: 'loading' }
    : dry.isError
      ? { status: 'error', error: dry.error }
      : dry.data
        ? { status: 'ready', data: dry.data }
        : null;

  const onLoadVersion = useCallback(
    async (version: number) => {
      const v = await qc.fetchQuery(policyVersionQuery(projectId, version));
      setDraft(textOf(v));
      setNotice(`Version ${version} loaded into the editor. Publishing it creates a new version.`);
      setTab('edit');
    },
    [qc, projectId],
  );

  if (draft === null) {
    const failed = versions.error ?? current.error;
    return failed ? <ErrorPanel title="Could not load the policy" error={failed} onRetry={() => void (versions.isError ? versions.refetch() : current.refetch())} /> : <Loading what="the policy" />;
  }

  return (
    <PoliciesPageView
      projects={projects}
      projectId={projectId}
      onProjectChange={(id) => {
        if (unsaved && !window.confirm('Your draft of this policy is not published. Switch project and discard it?')) return;
        setProjectId(id);
        setDraft(null);
        setCompare(null);
        setNotice(null);
        publish.reset();
        dry.reset();
      }}
      tab={tab}
      onTabChange={setTab}
      canPublish={canDo(me.user.role, 'publishPolicy')}
      dryRunUnavailable={!offersDryRun}
      draft={draft ?? ''}
      onDraftChange={setDraft}
      diagnose={diagnose}
      fields={fields}
      onPublish={(comment) => publish.mutate(comment)}
      inForce={current.data ? { version: current.data.version, text: textOf(current.data) } : null}
      publishing={publish.isPending}
      publishError={publish.error}
      notice={notice}
      versions={fromQuery(versions)}
      compare={effectiveCompare}
      onCompare={(from, to) => setCompare({ from, to })}
      diff={effectiveCompare && effectiveCompare.from !== effectiveCompare.to ? fromQuery(diff) : null}
      onLoadVersion={(v) => void onLoadVersion(v)}
      onRollback={(v) => rollback.mutate(v)}
      rollingBack={rollback.isPending ? (rollback.variables ?? null) : null}
      rollbackError={rollback.error}
      dryRun={offersDryRun ? { result: dryState, onRun: (n) => dry.mutate(n), running: dry.isPending } : null}
      mcp={fromQuery(mcp)}
      onPin={(server, pins) => {
        setDraft(withPins(draft ?? '', server, pins));
        const n = Object.keys(pins).length;
        setNotice(
          `${n === 1 ? 'One description' : `${n} descriptions`} of ${server} pinned in the draft. Publish it to approve ${n === 1 ? 'it' : 'them'}; until then the tool${n === 1 ? ' is' : 's are'} withheld.`,
        );
        setTab('edit');
      }}
    />
  );
}
