import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';
import { checkPolicy, containersOf, K8sObject, podTemplate, sandboxNodeWorkloads, STATED_PRIVILEGES } from '../support/kubernetes/policy';

/**
 * deploy/kubernetes, rendered by `kubectl kustomize` (scripts/setup.mjs --tests installs Debian's
 * kubernetes-client when no kubectl is present) and checked against the Kubernetes 1.34 API schemas
 * of the npm package kubernetes-models (strict: unknown fields are errors), then against what the
 * manifests promise (test/support/kubernetes/policy.ts). No cluster is involved: nothing here is
 * applied anywhere.
 */
const KUBERNETES_VERSION = '1.34';
const ROOT = path.resolve(__dirname, '../..');
const SOURCE = path.join(ROOT, 'deploy/kubernetes');
const VALIDATOR = path.join(ROOT, 'test/support/kubernetes/validate-schemas.mjs');
const overlays = fs.readdirSync(path.join(SOURCE, 'overlays')).sort();
const targets = ['base', ...overlays.map((o) => `overlays/${o}`)];

function kubectl(): string {
  const r = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  if (r.error) throw new Error("kubectl is missing: run `node scripts/setup.mjs --tests` (it installs Debian's kubernetes-client).");
  return 'kubectl';
}

/** A copy of deploy/kubernetes with each overlay's secrets/*.env made from its committed example. */
function workCopy(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemniscate-k8s-'));
  fs.cpSync(SOURCE, dir, { recursive: true, filter: (src) => !/\/secrets\/[^/]+\.env$/.test(src) });
  for (const overlay of overlays) {
    const secrets = path.join(dir, 'overlays', overlay, 'secrets');
    for (const example of fs.existsSync(secrets) ? fs.readdirSync(secrets).filter((f) => f.endsWith('.env.example')) : []) {
      fs.copyFileSync(path.join(secrets, example), path.join(secrets, example.replace(/\.example$/, '')));
    }
  }
  return dir;
}

function render(dir: string, target: string): K8sObject[] {
  const r = spawnSync(kubectl(), ['kustomize', path.join(dir, target)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`kubectl kustomize ${target} failed:\n${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

function schemaErrors(objects: unknown[], args: string[] = []): unknown {
  const r = spawnSync(process.execPath, [VALIDATOR, ...args], { input: JSON.stringify(objects), encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`the schema validator failed:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

const work = workCopy();
const rendered = new Map(targets.map((t) => [t, render(work, t)] as const));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** The first element, which the rendered manifests are known to have. */
function first<T>(items: T[]): T {
  if (items.length === 0) throw new Error('expected at least one element');
  return items[0] as T;
}
const clone = (objects: K8sObject[]) => structuredClone(objects);
const find = (objects: K8sObject[], o: K8sObject) => objects.find((x) => x.kind === o.kind && x.metadata.name === o.metadata.name && x.metadata.namespace === o.metadata.namespace) as K8sObject;

describe(`deploy/kubernetes rendered and validated against the Kubernetes ${KUBERNETES_VERSION} schemas`, () => {
  it(`the schemas are those of Kubernetes ${KUBERNETES_VERSION} (fields new in 1.34 present, none of 1.35)`, () => {
    expect(schemaErrors([], ['--version-facts'])).toEqual({ hostnameOverride: true, resourceV1: true, workloadRef: false });
  });

  it('the validator is strict: an unknown field, a wrong type and a missing required field are errors', () => {
    const objects = clone(rendered.get('base') as K8sObject[]);
    const ds = objects.find((o) => o.kind === 'DaemonSet') as K8sObject;
    const pod = podTemplate(ds)?.spec as { containers: Array<Record<string, unknown>>; volumes: Array<Record<string, Record<string, unknown>>> };
    first(pod.containers).hostNetwork = true; // a PodSpec field, misplaced on the container
    (pod.volumes.find((v) => v.hostPath)?.hostPath as Record<string, unknown>).readOnly = true;
    first(first(pod.containers).ports as Array<Record<string, unknown>>).containerPort = '7071';
    delete first((objects.find((o) => o.kind === 'Service')?.spec as { ports: Array<Record<string, unknown>> }).ports).port;
    const messages = (schemaErrors(objects) as Array<{ path: string; message: string }>).map((e) => `${e.path}: ${e.message}`);
    expect(messages).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/containers\/0\/hostNetwork: unknown field/),
        expect.stringMatching(/hostPath\/readOnly: unknown field/),
        expect.stringMatching(/containerPort: must be integer/),
        expect.stringMatching(/ports\/0: must have required property port/),
      ]),
    );
  });

  it.each(targets)('%s renders, and every object is valid', (target) => {
    const objects = rendered.get(target) as K8sObject[];
    expect(objects.length).toBeGreaterThan(10);
    expect(schemaErrors(objects)).toEqual([]);
  });

  it.each(targets)('%s keeps every promise of the manifests', (target) => {
    expect(checkPolicy(rendered.get(target) as K8sObject[])).toEqual([]);
  });

  it.each(overlays)('overlay %s pins the platform image and generates its Secrets from git-ignored env files', (overlay) => {
    const objects = rendered.get(`overlays/${overlay}`) as K8sObject[];
    const images = objects.flatMap((o) => containersOf(podTemplate(o)?.spec ?? {}).map((c) => String(c.image)));
    expect(images.length).toBeGreaterThan(0);
    for (const image of images) expect(image).toMatch(/^lemniscate\/platform:(?!latest$)[\w.-]+$/);
    expect(
      objects
        .filter((o) => o.kind === 'Secret')
        .map((s) => s.metadata.name.replace(/-[a-z0-9]{10}$/, ''))
        .sort(),
    ).toEqual(['exec-host-token', 'lemniscate-db', 'lemniscate-exec-host-token', 'lemniscate-secret-key']);
    const secrets = path.join(SOURCE, 'overlays', overlay, 'secrets');
    for (const example of fs.readdirSync(secrets).filter((f) => f.endsWith('.env.example'))) {
      const real = path.join('deploy/kubernetes/overlays', overlay, 'secrets', example.replace(/\.example$/, ''));
      expect(spawnSync('git', ['check-ignore', '-q', real], { cwd: ROOT }).status).toBe(0);
    }
  });

  it('no manifest under deploy/kubernetes writes a Secret or a RuntimeClass (kept for ADR 0011)', () => {
    const files = (function walk(dir: string): string[] {
      return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : /\.ya?ml$/.test(e.name) ? [path.join(dir, e.name)] : []));
    })(SOURCE);
    for (const file of files) expect([file, /^kind:\s*(Secret|RuntimeClass)\s*$/m.test(fs.readFileSync(file, 'utf8'))]).toEqual([file, false]);
  });
});

type Mutation = { name: string; apply: (objects: K8sObject[]) => void };

/** Every way a sandbox-node object could lose its isolation, generated from the rendered objects. */
function mutations(objects: K8sObject[]): Mutation[] {
  const out: Mutation[] = [];
  const pod = (objects2: K8sObject[], w: K8sObject) => podTemplate(find(objects2, w))?.spec as Record<string, unknown>;
  for (const w of sandboxNodeWorkloads(objects)) {
    const at = `${w.kind} ${w.metadata.name}`;
    out.push({ name: `${at}: toleration removed`, apply: (o) => void delete pod(o, w).tolerations });
    out.push({ name: `${at}: nodeSelector removed`, apply: (o) => void delete pod(o, w).nodeSelector });
    for (const field of ['hostNetwork', 'hostPID', 'hostIPC']) out.push({ name: `${at}: ${field} added`, apply: (o) => void (pod(o, w)[field] = true) });
    out.push({ name: `${at}: service account token mounted`, apply: (o) => void (pod(o, w).automountServiceAccountToken = true) });
    out.push({
      name: `${at}: a host path not stated`,
      apply: (o) => {
        const p = pod(o, w);
        (p.volumes as unknown[]).push({ name: 'etc', hostPath: { path: '/etc' } });
        first(p.containers as Array<{ volumeMounts: unknown[] }>).volumeMounts.push({ name: 'etc', mountPath: '/host-etc' });
      },
    });
    out.push({
      name: `${at}: state dir mounted at another path`,
      apply: (o) => {
        const mounts = first(pod(o, w).containers as Array<{ volumeMounts: Array<{ mountPath: string; mountPropagation?: string }> }>).volumeMounts;
        (mounts.find((m) => m.mountPropagation === 'Bidirectional') as { mountPath: string }).mountPath = '/state';
      },
    });
    out.push({ name: `${at}: a host port`, apply: (o) => void (first(first(pod(o, w).containers as Array<{ ports: Array<Record<string, unknown>> }>).ports).hostPort = 7071) });
    out.push({
      name: `${at}: a second container, privileged`,
      apply: (o) => {
        const containers = pod(o, w).containers as Array<Record<string, unknown>>;
        containers.push({ ...structuredClone(first(containers)), name: 'helper', volumeMounts: [] });
      },
    });
    // The policies that say who may reach it: the namespace's default-deny and its own ingress rules
    // (removing a policy that only allows some egress narrows what it may do, and is no loss).
    for (const np of objects.filter(
      (p) => p.kind === 'NetworkPolicy' && p.metadata.namespace === w.metadata.namespace && ((p.spec as { policyTypes: string[] }).policyTypes ?? []).includes('Ingress'),
    )) {
      out.push({ name: `${at}: NetworkPolicy ${np.metadata.name} removed`, apply: (o) => void o.splice(o.indexOf(find(o, np)), 1) });
    }
    for (const s of objects.filter((x) => x.kind === 'Service' && x.metadata.namespace === w.metadata.namespace)) {
      out.push({ name: `${at}: Service ${s.metadata.name} given a cluster IP`, apply: (o) => void delete (find(o, s).spec as Record<string, unknown>).clusterIP });
    }
    out.push({
      name: `${at}: advertises a Service name`,
      apply: (o) => {
        const env = first(pod(o, w).containers as Array<{ env: Array<{ name: string; value?: string }> }>).env;
        (env.find((e) => e.name === 'LEMNISCATE_EXEC_HOST_ADVERTISE_URL') as { value: string }).value = 'https://exec-host.lemniscate-exec.svc:7071';
      },
    });
  }
  // Every other container, made privileged.
  for (const w of objects.filter((o) => podTemplate(o))) {
    for (const c of containersOf(podTemplate(w)?.spec ?? {})) {
      if (STATED_PRIVILEGES[String(c.name)]) continue;
      out.push({
        name: `${w.kind} ${w.metadata.name} container ${String(c.name)}: privileged`,
        apply: (o) => {
          const target = containersOf(podTemplate(find(o, w))?.spec ?? {}).find((x) => x.name === c.name) as { securityContext: Record<string, unknown> };
          target.securityContext = { ...target.securityContext, privileged: true };
        },
      });
      for (const field of ['readinessProbe', 'livenessProbe', 'resources'] as const) {
        out.push({
          name: `${w.kind} ${w.metadata.name} container ${String(c.name)}: ${field} removed`,
          apply: (o) => void delete (containersOf(podTemplate(find(o, w))?.spec ?? {}).find((x) => x.name === c.name) as Record<string, unknown>)[field],
        });
      }
    }
  }
  const gateway = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'gateway') as K8sObject;
  const gatewayEnv = (o: K8sObject[]) => first((podTemplate(find(o, gateway))?.spec as { containers: Array<{ env: Array<Record<string, unknown>> }> }).containers).env;
  out.push({ name: 'gateway: a fixed exec-host URL', apply: (o) => void gatewayEnv(o).push({ name: 'LEMNISCATE_EXEC_HOST_URL', value: 'https://exec-host.lemniscate-exec.svc:7071' }) });
  out.push({
    name: 'gateway: pool mode off',
    apply: (o) =>
      void gatewayEnv(o).splice(
        gatewayEnv(o).findIndex((e) => e.name === 'LEMNISCATE_EXEC_HOST_POOL'),
        1,
      ),
  });
  out.push({
    name: 'gateway: the database URL as a literal',
    apply: (o) => void Object.assign(gatewayEnv(o).find((e) => e.name === 'DATABASE_URL') as object, { value: 'postgres://u:p@h/db', valueFrom: undefined }),
  });
  out.push({
    name: 'gateway: a written Secret',
    apply: (o) => void o.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'lemniscate-db', namespace: 'lemniscate' }, stringData: { DATABASE_URL: 'x' } } as K8sObject),
  });
  out.push({
    name: 'gateway: PodDisruptionBudget removed',
    apply: (o) =>
      void o.splice(
        o.findIndex((x) => x.kind === 'PodDisruptionBudget'),
        1,
      ),
  });
  out.push({
    name: 'gateway: tolerates the sandbox taint',
    apply: (o) => void ((podTemplate(find(o, gateway))?.spec as Record<string, unknown>).tolerations = [{ key: 'lemniscate.dev/sandbox', operator: 'Exists', effect: 'NoSchedule' }]),
  });
  return out;
}

describe.each(targets)('the checker fails every mutation of %s', (target) => {
  const objects = rendered.get(target) as K8sObject[];
  const all = mutations(objects);

  it('generates mutations for each sandbox-node object (DaemonSet and its pod template)', () => {
    expect(sandboxNodeWorkloads(objects).map((o) => `${o.kind} ${o.metadata.name}`)).toEqual(['DaemonSet exec-host']);
    expect(all.length).toBeGreaterThan(20);
  });

  it.each(all.map((m) => [m.name, m] as const))('%s', (_, m) => {
    const mutated = clone(objects);
    m.apply(mutated);
    expect(checkPolicy(mutated)).not.toEqual([]);
  });
});
