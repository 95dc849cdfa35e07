/**
 * What the Kubernetes manifests promise beyond their schemas (deploy/kubernetes, docs/operator-guide.md),
 * checked over rendered objects: `checkPolicy` returns one sentence per broken promise.
 */
export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [key: string]: unknown };
type Json = Record<string, unknown>;

/** The sandbox node pool: its label (nodeSelector) and its taint (toleration). */
export const SANDBOX_POOL = { key: 'lemniscate.dev/sandbox', value: 'true', effect: 'NoSchedule' } as const;

/**
 * The one privileged container, and the host paths it mounts: everything it holds beyond an
 * ordinary container (deploy/kubernetes/base/exec-host.yaml says why each is needed).
 */
export const STATED_PRIVILEGES: Record<string, { privileged: true; hostPaths: Record<string, { mountPath: string; mountPropagation?: string }> }> = {
  'exec-host': {
    privileged: true,
    hostPaths: {
      '/var/run/docker.sock': { mountPath: '/var/run/docker.sock' },
      '/var/lib/lemniscate/exec-host': { mountPath: '/var/lib/lemniscate/exec-host', mountPropagation: 'Bidirectional' },
      '/dev': { mountPath: '/dev' },
    },
  },
};

const WORKLOAD_KINDS = new Set(['Deployment', 'DaemonSet', 'StatefulSet', 'Job', 'CronJob', 'ReplicaSet', 'Pod']);
const SECRET_NAMES = /(TOKEN|PASSWORD|SECRET|DATABASE_URL|API_KEY)$/;

const obj = (v: unknown): Json => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {});
const arr = (v: unknown): Json[] => (Array.isArray(v) ? (v as Json[]) : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const id = (o: K8sObject) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`;

export function podTemplate(o: K8sObject): { labels: Record<string, string>; spec: Json } | null {
  if (!WORKLOAD_KINDS.has(o.kind)) return null;
  if (o.kind === 'Pod') return { labels: o.metadata.labels ?? {}, spec: obj(o.spec) };
  const spec = o.kind === 'CronJob' ? obj(obj(obj(obj(o.spec).jobTemplate).spec)) : obj(o.spec);
  const template = obj(spec.template);
  return { labels: obj(obj(template.metadata).labels) as Record<string, string>, spec: obj(template.spec) };
}

export const containersOf = (pod: Json) => [...arr(pod.initContainers), ...arr(pod.containers)];

function selects(selector: Json, labels: Record<string, string>): boolean {
  if (Object.keys(selector).length === 0) return true;
  const match = obj(selector.matchLabels) as Record<string, string>;
  if (Object.entries(match).some(([k, v]) => labels[k] !== v)) return false;
  return arr(selector.matchExpressions).every((e) => {
    const values = (e.values as string[] | undefined) ?? [];
    const key = str(e.key) ?? '';
    switch (e.operator) {
      case 'In':
        return values.includes(labels[key] ?? '\0');
      case 'NotIn':
        return !values.includes(labels[key] ?? '\0');
      case 'Exists':
        return key in labels;
      case 'DoesNotExist':
        return !(key in labels);
      default:
        return false;
    }
  });
}

/** A workload runs on the sandbox pool when it selects the pool's nodes or tolerates its taint. */
export function isSandboxNodeWorkload(pod: Json): boolean {
  const selector = obj(pod.nodeSelector);
  return selector[SANDBOX_POOL.key] === SANDBOX_POOL.value || arr(pod.tolerations).some((t) => t.key === SANDBOX_POOL.key || (t.operator === 'Exists' && !t.key));
}

/** The workloads on the sandbox pool: every DaemonSet (it exists for those nodes) and whatever selects or tolerates them. */
export function sandboxNodeWorkloads(objects: K8sObject[]): K8sObject[] {
  return objects.filter((o) => {
    const t = podTemplate(o);
    return t !== null && (o.kind === 'DaemonSet' || isSandboxNodeWorkload(t.spec));
  });
}

export function checkPolicy(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  const policies = objects.filter((o) => o.kind === 'NetworkPolicy');
  const services = objects.filter((o) => o.kind === 'Service');
  const sourceSecrets = objects.filter((o) => o.kind === 'Secret');

  for (const o of objects) {
    const t = podTemplate(o);
    if (!t) continue;
    const ns = o.metadata.namespace ?? '';
    const pod = t.spec;
    const where = id(o);

    // Every namespace with pods denies by default, and a policy of its own selects every workload
    // for both directions.
    const inNs = policies.filter((p) => (p.metadata.namespace ?? '') === ns);
    const defaultDeny = inNs.some(
      (p) =>
        Object.keys(obj(obj(p.spec).podSelector)).length === 0 && ['Ingress', 'Egress'].every((d) => arr(obj(p.spec).policyTypes).includes(d as never)) && !obj(p.spec).ingress && !obj(p.spec).egress,
    );
    if (!defaultDeny) problems.push(`${where}: its namespace "${ns}" has no default-deny NetworkPolicy (ingress and egress)`);
    const own = inNs.filter((p) => Object.keys(obj(obj(p.spec).podSelector)).length > 0 && selects(obj(obj(p.spec).podSelector), t.labels));
    for (const direction of ['Ingress', 'Egress']) {
      if (!own.some((p) => arr(obj(p.spec).policyTypes).includes(direction as never))) problems.push(`${where}: no NetworkPolicy of its own governs its ${direction.toLowerCase()}`);
    }

    // No workload shares the node's namespaces or ports.
    for (const field of ['hostNetwork', 'hostPID', 'hostIPC'] as const) if (pod[field] === true) problems.push(`${where}: ${field} is set`);
    if (pod.automountServiceAccountToken !== false) problems.push(`${where}: it mounts a service account token (automountServiceAccountToken is not false)`);

    const isSandboxNode = o.kind === 'DaemonSet' || isSandboxNodeWorkload(pod);
    if (isSandboxNode) {
      if (obj(pod.nodeSelector)[SANDBOX_POOL.key] !== SANDBOX_POOL.value) problems.push(`${where}: runs on sandbox nodes but has no nodeSelector ${SANDBOX_POOL.key}=${SANDBOX_POOL.value}`);
      const tolerates = arr(pod.tolerations).some((x) => x.key === SANDBOX_POOL.key && x.effect === SANDBOX_POOL.effect && (x.operator === 'Exists' || x.value === SANDBOX_POOL.value));
      if (!tolerates) problems.push(`${where}: runs on sandbox nodes but does not tolerate the taint ${SANDBOX_POOL.key}=${SANDBOX_POOL.value}:${SANDBOX_POOL.effect}`);
      if (arr(pod.tolerations).some((x) => !x.key && x.operator === 'Exists')) problems.push(`${where}: tolerates every taint`);
    } else if (arr(pod.tolerations).some((x) => x.key === SANDBOX_POOL.key)) {
      problems.push(`${where}: tolerates the sandbox pool's taint without being a sandbox-node workload`);
    }

    const hostPathVolumes = new Map(
      arr(pod.volumes)
        .filter((v) => v.hostPath)
        .map((v) => [str(v.name) ?? '', str(obj(v.hostPath).path) ?? ''] as const),
    );
    for (const c of containersOf(pod)) {
      const name = str(c.name) ?? '';
      const stated = STATED_PRIVILEGES[name];
      const sc = obj(c.securityContext);
      const at = `${where} container ${name}`;
      if (sc.privileged === true && !(stated && isSandboxNode)) problems.push(`${at}: privileged, which only the stated exec-host container on sandbox nodes may be`);
      if (sc.privileged !== true) {
        if (sc.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation is not false`);
        if (!arr(obj(sc.capabilities).drop).includes('ALL' as never)) problems.push(`${at}: does not drop all capabilities`);
        if (arr(obj(sc.capabilities).add).length) problems.push(`${at}: adds capabilities`);
        if (sc.runAsNonRoot !== true && obj(pod.securityContext).runAsNonRoot !== true) problems.push(`${at}: may run as root`);
      }
      if (arr(c.ports).some((p) => p.hostPort !== undefined)) problems.push(`${at}: binds a host port`);
      for (const m of arr(c.volumeMounts)) {
        const hostPath = hostPathVolumes.get(str(m.name) ?? '');
        if (m.mountPropagation === 'Bidirectional' && !(hostPath !== undefined && stated?.hostPaths[hostPath]?.mountPropagation === 'Bidirectional'))
          problems.push(`${at}: Bidirectional mount propagation on ${String(m.mountPath)}, not a stated one`);
        if (hostPath === undefined) continue;
        const allowed = stated && isSandboxNode ? stated.hostPaths[hostPath] : undefined;
        if (!allowed) problems.push(`${at}: mounts the host path ${hostPath}, which is not one it is stated to need`);
        else if (allowed.mountPath !== m.mountPath) problems.push(`${at}: mounts ${hostPath} at ${String(m.mountPath)}, not at the same path`);
      }
      // Probes and requests.
      for (const probe of ['readinessProbe', 'livenessProbe'] as const) if (!c[probe] && !arr(pod.initContainers).includes(c)) problems.push(`${at}: no ${probe}`);
      const requests = obj(obj(c.resources).requests);
      if (!requests.cpu || !requests.memory) problems.push(`${at}: no CPU and memory requests`);
      if (!obj(obj(c.resources).limits).memory) problems.push(`${at}: no memory limit`);
      // Secrets come from Secrets.
      for (const e of arr(c.env)) {
        const envName = str(e.name) ?? '';
        if (SECRET_NAMES.test(envName) && e.value !== undefined) problems.push(`${at}: ${envName} is a literal value, not a secretKeyRef`);
      }
    }
  }

  // The gateway addresses exec-hosts only at the address each registered: pool mode, no fixed URL,
  // no Service in front of them that balances.
  const gateway = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'gateway');
  const gatewayEnv = new Map(
    containersOf(podTemplate(gateway as K8sObject)?.spec ?? {})
      .flatMap((c) => arr(c.env))
      .map((e) => [str(e.name) ?? '', e] as const),
  );
  if (!gateway) problems.push('no gateway Deployment');
  else {
    if (gatewayEnv.get('LEMNISCATE_EXEC_HOST_POOL')?.value !== 'true') problems.push('gateway: LEMNISCATE_EXEC_HOST_POOL is not "true"');
    if (gatewayEnv.has('LEMNISCATE_EXEC_HOST_URL')) problems.push('gateway: LEMNISCATE_EXEC_HOST_URL is set, so it would call one address for every exec-host');
    if (((gateway.spec as Json).replicas as number) < 2) problems.push('gateway: fewer than 2 replicas');
    if (!objects.some((o) => o.kind === 'PodDisruptionBudget' && o.metadata.namespace === gateway.metadata.namespace && selects(obj(obj(o.spec).selector), podTemplate(gateway)?.labels ?? {})))
      problems.push('gateway: no PodDisruptionBudget');
  }
  for (const w of sandboxNodeWorkloads(objects)) {
    const labels = podTemplate(w)?.labels ?? {};
    for (const s of services) {
      const spec = obj(s.spec);
      if (s.metadata.namespace === w.metadata.namespace && Object.keys(obj(spec.selector)).length && selects({ matchLabels: spec.selector }, labels) && spec.clusterIP !== 'None') {
        problems.push(`${id(s)}: balances over ${id(w)}'s pods; exec-hosts are called at the address each registered, so only a headless Service may select them`);
      }
      for (const [name, e] of gatewayEnv) {
        if (typeof e.value === 'string' && s.metadata.namespace === w.metadata.namespace && new RegExp(`\\b${s.metadata.name}\\.${s.metadata.namespace}\\b`).test(e.value))
          problems.push(`gateway: ${name} addresses exec-hosts through the Service ${s.metadata.name}`);
      }
    }
    const env = new Map(
      containersOf(podTemplate(w)?.spec ?? {})
        .flatMap((c) => arr(c.env))
        .map((e) => [str(e.name) ?? '', e] as const),
    );
    const address = str(env.get('LEMNISCATE_EXEC_HOST_ADVERTISE_URL')?.value) ?? '';
    if (!/^https:\/\/\$\(POD_NAME\)\./.test(address)) problems.push(`${id(w)}: LEMNISCATE_EXEC_HOST_ADVERTISE_URL is not the pod's own https name ("${address}")`);
  }
  // Secret objects are generated from git-ignored env files; none is written in the manifests.
  for (const s of sourceSecrets) if (!/-[a-z0-9]{10}$/.test(s.metadata.name)) problems.push(`${id(s)}: not a generated Secret (no content hash): secrets are never written into the manifests`);
  return problems;
}
