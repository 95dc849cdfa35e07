// Project environment benchmarks (printed, not asserted), against the built exec-host (npx tsc -b apps/exec-host).
//   1. preparation of the Node fixture (73 locked packages, npm ci through the egress proxy): cold, then
//      asked again with unchanged inputs (cached)
//   2. session start (create → first command finished) from the prepared environment vs. from the
//      sandbox image, same repository without its devcontainer; p50 of each and their ratio
// The mirror is the npm registry this machine uses (through the host's CA bundle), or --registry URL.
// Usage: node bench/sandbox/environment.mjs [--sessions 10] [--runtime runc] [--registry https://registry.npmjs.org/]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { arg, pct, root, startExecHost } from './support.mjs';

const SESSIONS = Number(arg('sessions', '10'));
const RUNTIME = arg('runtime', 'runc');
const REGISTRY = arg('registry', 'https://registry.npmjs.org/');

const caBundle = ['/etc/ssl/certs/ca-certificates.crt'].find((f) => fs.existsSync(f));
const execHost = await startExecHost('env', caBundle ? { LEMNISCATE_EGRESS_CA_BUNDLE: caBundle } : {});
const { api } = execHost;

function git(cwd, ...args) {
  return execFileSync('git', ['-c', 'user.email=b@example.test', '-c', 'user.name=Bench', ...args], { cwd, encoding: 'utf8' });
}

/** The Node fixture as a repository, with or without its devcontainer. */
function fixtureRepo(withDevcontainer) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-bench-env-repo-'));
  fs.cpSync(path.join(root, 'test/fixtures/environments/node-project'), dir, { recursive: true });
  const dc = path.join(dir, '.devcontainer/devcontainer.json');
  if (withDevcontainer) fs.writeFileSync(dc, fs.readFileSync(dc, 'utf8').replaceAll('__NPM_MIRROR__', REGISTRY));
  else fs.rmSync(path.join(dir, '.devcontainer'), { recursive: true });
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'bench');
  return dir;
}

const ms = (x) => `${x.toFixed(0)} ms`;
const now = () => performance.now();
let n = 0;

async function untilSettled(req) {
  for (;;) {
    const s = await api('POST', '/v1/environments/status', req);
    if (s.state !== 'preparing' && s.state !== 'not_prepared') return s;
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function starts(repo, environment) {
  const times = [];
  for (let i = 0; i < SESSIONS; i++) {
    const t0 = now();
    const sbx = await api('POST', '/v1/sandboxes', { sessionId: `bench-env-${process.pid}-${n++}`, repository: { source: repo }, runtime: RUNTIME, ...(environment ? { environment } : {}) });
    await api('POST', `/v1/sandboxes/${sbx.sandboxId}/exec?stream=false`, { command: 'true' });
    times.push(now() - t0);
    await api('DELETE', `/v1/sandboxes/${sbx.sandboxId}`);
  }
  return times;
}

const repos = [];
try {
  console.log(`Environment benchmarks (${os.cpus().length} CPUs, Node ${process.version}, ${RUNTIME}, mirror ${REGISTRY}, one run)\n`);
  const plain = fixtureRepo(false);
  const withEnv = fixtureRepo(true);
  repos.push(plain, withEnv);
  const req = { projectId: 'bench', repository: { source: withEnv, ref: 'main' }, runtime: RUNTIME, mirrors: [REGISTRY], setupTimeoutSeconds: 1800 };

  let t0 = now();
  await api('POST', '/v1/environments/prepare', req);
  const prepared = await untilSettled(req);
  const cold = now() - t0;
  if (prepared.state !== 'ready') throw new Error(`the preparation failed: ${prepared.message}`);
  t0 = now();
  const again = await api('POST', '/v1/environments/prepare', req);
  const cached = now() - t0;
  if (again.state !== 'ready' || again.job.jobId !== prepared.job.jobId) throw new Error('unchanged inputs were prepared again');
  console.log(`1. preparation of the Node fixture (npm ci, 73 packages): cold ${ms(cold)}, cached ${ms(cached)} (ratio cold/cached ${(cold / cached).toFixed(0)})`);

  // Warm both paths once (image layers in the page cache), then measure.
  await starts(plain, null);
  await starts(withEnv, req);
  const fromImage = await starts(plain, null);
  const fromEnv = await starts(withEnv, req);
  const ratio = pct(fromEnv, 50) / pct(fromImage, 50);
  console.log(
    `2. session start → first command (${SESSIONS} sessions each): sandbox image p50 ${ms(pct(fromImage, 50))} p95 ${ms(pct(fromImage, 95))}; prepared environment p50 ${ms(pct(fromEnv, 50))} p95 ${ms(pct(fromEnv, 95))}; ratio ${ratio.toFixed(2)}`,
  );
} finally {
  await execHost.close();
  for (const r of repos) fs.rmSync(r, { recursive: true, force: true });
  execFileSync('sh', ['-c', 'docker images -q --filter label=lemniscate.environment | xargs -r docker rmi -f >/dev/null 2>&1 || true']);
}
