// deploy/observability against the real tools: promtool checks the alert rules and runs their unit
// tests (prometheus-rules.test.yml); every metric the rules and the Grafana dashboard name is one the
// gateway or an exec-host exports; and a real Prometheus scraping a real gateway (with an audit sink
// that cannot take entries) and an exec-host's metrics evaluates every dashboard query and every
// rule, and holds the sink alert pending.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse } from 'yaml';
import { ExecHostMetrics } from '../../apps/exec-host/src/metrics';
import { MetricsService } from '../../apps/gateway/src/metrics/metrics.service';
import { withTestDatabases } from '../../apps/gateway/test/support/db';
import { startGateway, type Gateway } from '../../apps/gateway/test/support/harness';
import { freePort } from '../support/git-servers';

jest.setTimeout(120_000);

const DIR = path.resolve(__dirname, '../../deploy/observability');
const RULES = path.join(DIR, 'prometheus-rules.yml');
const RULE_TESTS = path.join(DIR, 'prometheus-rules.test.yml');
const DASHBOARD = path.join(DIR, 'grafana-dashboard.json');

interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type: string; uid: string };
  targets?: Array<{ expr: string; refId: string }>;
}

const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as { uid: string; title: string; panels: Panel[]; templating: { list: Array<{ name: string; type: string; query: string }> } };
const rules = parse(fs.readFileSync(RULES, 'utf8')) as {
  groups: Array<{ name: string; rules: Array<{ alert: string; expr: string; for?: string; labels: { severity: string }; annotations: { summary: string; description: string } }> }>;
};
const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
const alertExprs = rules.groups.flatMap((g) => g.rules.map((r) => ({ alert: r.alert, expr: r.expr })));

function metricNames(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\blemniscate_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|count|sum)$/, '')))];
}

async function exported(): Promise<Set<string>> {
  const gateway = new MetricsService();
  const execHost = new ExecHostMetrics({ sandboxes: () => 0, capacity: 1, warm: () => ({ ready: 0, target: 0, hits: 0, misses: 0 }) });
  const names = [...(await gateway.registry.getMetricsAsJSON()), ...(await execHost.registry.getMetricsAsJSON())].map((m) => m.name);
  return new Set(names);
}

describe('the alert rules and the dashboard (deploy/observability)', () => {
  it('promtool accepts the rules, and their unit tests pass: each alert fires when it should and not before', () => {
    const check = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(`${check.stdout}${check.stderr}`).toContain('SUCCESS: 8 rules found');
    expect(check.status).toBe(0);
    const test = spawnSync('promtool', ['test', 'rules', RULE_TESTS], { cwd: DIR, encoding: 'utf8' });
    expect(`${test.stdout}${test.stderr}`).toContain('SUCCESS');
    expect(test.status).toBe(0);
    // Every alert has a unit test.
    const tested = new Set([...fs.readFileSync(RULE_TESTS, 'utf8').matchAll(/alertname: (\w+)/g)].map((m) => m[1]));
    expect(alertExprs.map((a) => a.alert).filter((a) => !tested.has(a))).toEqual([]);
  });

  it('every rule says what happened and how bad it is', () => {
    for (const r of rules.groups.flatMap((g) => g.rules)) {
      expect([r.alert, ['warning', 'critical'].includes(r.labels.severity)]).toEqual([r.alert, true]);
      expect(r.annotations.summary.length).toBeGreaterThan(10);
      expect(r.annotations.description).toMatch(/\.$/);
    }
  });

  it('names only metrics the gateway or an exec-host exports', async () => {
    const known = await exported();
    const unknown = [...queries.map((q) => [q.panel, q.expr] as const), ...alertExprs.map((a) => [a.alert, a.expr] as const)].flatMap(([where, expr]) =>
      metricNames(expr)
        .filter((n) => !known.has(n))
        .map((n) => `${where}: ${n}`),
    );
    expect(unknown).toEqual([]);
    // The alerts the operator guide promises are there.
    for (const needed of [
      'lemniscate_audit_sink_failing',
      'lemniscate_audit_sink_lag_seconds',
      'lemniscate_audit_verify_failures_total',
      'lemniscate_approval_wait_seconds',
      'lemniscate_exec_host_sandbox_create_seconds',
    ]) {
      expect(alertExprs.some((a) => metricNames(a.expr).includes(needed))).toBe(true);
    }
  });

  it('the dashboard is a Grafana dashboard: a Prometheus data source variable, unique ids, panels on the 24-column grid without overlap', () => {
    expect(dashboard).toMatchObject({ uid: 'lemniscate-overview', title: 'Lemniscate' });
    expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const p of dashboard.panels) {
      const { x, y, w, h } = p.gridPos;
      expect([p.title, x >= 0 && w > 0 && x + w <= 24 && h > 0]).toEqual([p.title, true]);
      for (let i = x; i < x + w; i++)
        for (let j = y; j < y + h; j++) {
          expect([p.title, cells.has(`${i},${j}`)]).toEqual([p.title, false]);
          cells.add(`${i},${j}`);
        }
      if (p.type === 'row') continue;
      expect(p.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(p.targets?.length).toBeGreaterThan(0);
    }
  });
});

async function promGet<T>(base: string, p: string): Promise<T> {
  const res = await fetch(`${base}${p}`);
  const body = (await res.json()) as { status: string; data: T; error?: string };
  if (body.status !== 'success') throw new Error(`${p}: ${body.error ?? res.status}`);
  return body.data;
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  while (Date.now() < deadline) {
    last = await probe().catch((e: Error) => e.message);
    if (last && typeof last !== 'string') return last as T;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what}: not within ${ms} ms (last: ${JSON.stringify(last)})`);
}

withTestDatabases(
  (db) => {
    let dir: string;
    let gw: Gateway;
    let execHost: http.Server;
    let prometheus: ChildProcess;
    let base: string;
    let output = '';
    beforeAll(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-prom-'));
      // A sink nobody listens on: it fails, so its metrics and its alert have something to say.
      const dead = await freePort();
      fs.writeFileSync(path.join(dir, 'sinks.json'), JSON.stringify({ sinks: [{ name: 'siem', type: 'syslog', url: `tcp://127.0.0.1:${dead}` }] }));
      gw = await startGateway(db(), { LEMNISCATE_AUDIT_SINKS_FILE: path.join(dir, 'sinks.json') }, undefined, {
        auditSinkTiming: { leaseMs: 1_500, idlePollMs: 100, statusPollMs: 200, backoffFirstMs: 100, backoffMaxMs: 400 },
      });
      const metrics = new ExecHostMetrics({ sandboxes: () => 3, capacity: 10, warm: () => ({ ready: 1, target: 2, hits: 4, misses: 1 }) });
      metrics.observeCreate(0.2, 'ok');
      metrics.observeCreate(1.5, 'engine_unavailable');
      metrics.observeExec(0.05, 'ok');
      execHost = http.createServer((_req, res) => void metrics.text().then((t) => res.writeHead(200, { 'content-type': metrics.contentType }).end(t)));
      await new Promise<void>((resolve) => execHost.listen(0, '127.0.0.1', resolve));
      const execHostPort = (execHost.address() as net.AddressInfo).port;
      const promPort = await freePort();
      fs.writeFileSync(
        path.join(dir, 'prometheus.yml'),
        [
          'global: { scrape_interval: 1s, evaluation_interval: 1s }',
          `rule_files: [${JSON.stringify(RULES)}]`,
          'scrape_configs:',
          `  - { job_name: gateway, static_configs: [{ targets: ['${new URL(gw.baseUrl).host}'] }] }`,
          `  - { job_name: exec-host, static_configs: [{ targets: ['127.0.0.1:${execHostPort}'] }] }`,
          '',
        ].join('\n'),
      );
      prometheus = spawn('prometheus', [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      prometheus.stdout?.on('data', (b: Buffer) => (output += b.toString()));
      prometheus.stderr?.on('data', (b: Buffer) => (output += b.toString()));
      base = `http://127.0.0.1:${promPort}`;
      await until('both targets scraped', async () => {
        if (prometheus.exitCode !== null) throw new Error(`prometheus exited: ${output.slice(-2000)}`);
        const up = await promGet<{ result: Array<{ metric: { job: string }; value: [number, string] }> }>(base, '/api/v1/query?query=up');
        return up.result.length === 2 && up.result.every((r) => r.value[1] === '1') ? up : undefined;
      });
    });
    afterAll(async () => {
      prometheus?.kill('SIGTERM');
      await new Promise<void>((resolve) => (prometheus && prometheus.exitCode === null ? prometheus.once('exit', () => resolve()) : resolve()));
      await new Promise<void>((resolve) => (execHost ? execHost.close(() => resolve()) : resolve()));
      await gw?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('a real Prometheus evaluates every dashboard query and every rule without error, and finds every metric they name in the scrapes', async () => {
      for (const q of queries) {
        await expect(
          promGet(base, `/api/v1/query?query=${encodeURIComponent(q.expr)}`).then(
            () => 'ok',
            (e: Error) => `${q.panel}: ${e.message}`,
          ),
        ).resolves.toBe('ok');
      }
      for (const name of new Set([...queries, ...alertExprs].flatMap((q) => metricNames(q.expr)))) {
        const meta = await promGet<Array<unknown>>(base, `/api/v1/targets/metadata?metric=${name}`);
        expect([name, meta.length > 0]).toEqual([name, true]);
      }
      const loaded = await until('every rule evaluated', async () => {
        const data = await promGet<{ groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string; state?: string }> }> }>(base, '/api/v1/rules');
        const all = data.groups.flatMap((g) => g.rules);
        return all.length === 8 && all.every((r) => r.health === 'ok') ? all : undefined;
      });
      expect(loaded.map((r) => r.name).sort()).toEqual(alertExprs.map((a) => a.alert).sort());
    });

    it('the failing sink holds LemniscateAuditSinkFailing pending (it fires after 5 minutes)', async () => {
      const alert = await until('the sink alert pending', async () => {
        const data = await promGet<{ alerts: Array<{ labels: Record<string, string>; state: string }> }>(base, '/api/v1/alerts');
        return data.alerts.find((a) => a.labels.alertname === 'LemniscateAuditSinkFailing' && a.labels.sink === 'siem');
      });
      expect(alert.state).toBe('pending');
    });
  },
  ['pglite'],
);
