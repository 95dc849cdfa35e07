// Warm pool benchmark (printed, not asserted), against the built exec-host (npx tsc -b apps/exec-host).
//   Session open → sandbox ready for its first command, from the warm pool vs. cold, runc and runsc,
//   p50/p95 over N sessions each, alternated in one run, and the ratio; plus → first command finished.
//   Three cases: the same repository at the same commit again (the warm sandbox was checked out ahead);
//   a repository with a new commit since its last session, made just before it opens (the sandbox checked
//   out ahead no longer fits: an empty warm sandbox is filled when taken, fetching the new commit; so is
//   a cold one); and a new commit made a pool pass before the session opens (the pass read the ref and
//   checked the new commit out ahead again).
//   Requests ask for the resources of a policy's defaults (SESSION_DEFAULT_PROFILE), as sessions do.
// Usage: node bench/sandbox/warm.mjs [--sessions 50] [--runtimes runc,runsc] [--files 20] [--json]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { arg, pct, SESSION_DEFAULT_PROFILE, startExecHost } from './support.mjs';

const SESSIONS = Number(arg('sessions', '50'));
const RUNTIMES = arg('runtimes', 'runc,runsc').split(',');
const FILES = Number(arg('files', '20'));
const JSON_OUT = process.argv.includes('--json');
const TARGET = { runc: 50, runsc: 100 };

const hosts = {};

function startHost(kind) {
  return startExecHost(kind, {
    LEMNISCATE_EXEC_HOST_WARM_POOL: kind === 'warm' ? '2' : '0',
    LEMNISCATE_EXEC_HOST_WARM_RUNTIMES: RUNTIMES.join(','),
    // The third case asks for a pass itself after each commit: the ref is read at every pass.
    LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS: '0.5',
  });
}

const api = (h, method, url, body) => h.api(method, url, body);

function git(cwd, ...args) {
  return execFileSync('git', ['-c', 'user.email=b@example.test', '-c', 'user.name=Bench', ...args], { cwd, encoding: 'utf8' });
}

function makeRepo(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-bench-repo-'));
  git(dir, 'init', '-q', '-b', 'main');
  for (let i = 0; i < files; i++) fs.writeFileSync(path.join(dir, `f${i}.txt`), `file ${i}\n`);
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'bench');
  return dir;
}

/** The pool is full again (nothing being made): each warm sample finds a warm sandbox, and no refill runs beside a sample. */
async function poolFull(h) {
  for (;;) {
    await h.host.sandboxes.pool.settled();
    const s = h.host.sandboxes.poolStats();
    if (s.making === 0 && s.ready >= s.target) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

const now = () => performance.now();
let n = 0;
const results = [];
const repo = makeRepo(FILES);

async function sample(h, runtime, expectPooled, source = repo) {
  const t0 = now();
  const sbx = await api(h, 'POST', '/v1/sandboxes', { sessionId: `bench-${process.pid}-${n++}`, repository: { source }, runtime, limits: SESSION_DEFAULT_PROFILE });
  const ready = now() - t0;
  await api(h, 'POST', `/v1/sandboxes/${sbx.sandboxId}/exec?stream=false`, { command: 'true' });
  const first = now() - t0;
  if (Boolean(sbx.pooled) !== expectPooled) throw new Error(`sandbox ${sbx.sandboxId} pooled=${sbx.pooled}, expected ${expectPooled}`);
  await api(h, 'DELETE', `/v1/sandboxes/${sbx.sandboxId}`);
  return { ready, first };
}

const stop = async () => {
  for (const h of Object.values(hosts)) await h.close();
  for (const r of [repo, moving]) fs.rmSync(r, { recursive: true, force: true });
};
const moving = makeRepo(FILES);
let commits = 0;
function commit(dir) {
  fs.writeFileSync(path.join(dir, 'f0.txt'), `change ${++commits}\n`);
  git(dir, 'commit', '-q', '-am', `change ${commits}`);
}
process.once('SIGINT', () => void stop().finally(() => process.exit(130)));

try {
  hosts.cold = await startHost('cold');
  hosts.warm = await startHost('warm');
  if (!JSON_OUT) console.log(`Warm pool vs. cold (${os.cpus().length} CPUs, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${SESSIONS} sessions each, alternated, one run)\n`);
  const f = (xs, k, p) =>
    Math.round(
      pct(
        xs.map((x) => x[k]),
        p,
      ),
    );
  const summary = (cold, warm) => ({
    cold: { readyP50: f(cold, 'ready', 50), readyP95: f(cold, 'ready', 95), firstP50: f(cold, 'first', 50), firstP95: f(cold, 'first', 95) },
    warm: { readyP50: f(warm, 'ready', 50), readyP95: f(warm, 'ready', 95), firstP50: f(warm, 'first', 50), firstP95: f(warm, 'first', 95) },
  });
  for (const runtime of RUNTIMES) {
    const cold = [];
    const warm = [];
    const coldNew = [];
    const warmNew = [];
    const warmPushed = [];
    // One of each first, unmeasured: the first gVisor command compiles the seccomp filter.
    await poolFull(hosts.warm);
    await sample(hosts.cold, runtime, false);
    await sample(hosts.warm, runtime, true);
    for (let i = 0; i < SESSIONS; i++) {
      await poolFull(hosts.warm);
      cold.push(await sample(hosts.cold, runtime, false));
      await poolFull(hosts.warm);
      warm.push(await sample(hosts.warm, runtime, true));
      // A new commit before each of these sessions: each host fetches it when the session opens.
      await poolFull(hosts.warm);
      commit(moving);
      coldNew.push(await sample(hosts.cold, runtime, false, moving));
      await poolFull(hosts.warm);
      commit(moving);
      warmNew.push(await sample(hosts.warm, runtime, true, moving));
      // A commit pushed a pass before the session opens: the pool has read the ref since and checked
      // the new commit out ahead (a pass every 10 s by default; asked for here, the ref's reading due).
      commit(moving);
      await new Promise((r) => setTimeout(r, 600));
      hosts.warm.host.sandboxes.pool.refill();
      await poolFull(hosts.warm);
      warmPushed.push(await sample(hosts.warm, runtime, true, moving));
    }
    const r = {
      runtime,
      sessions: SESSIONS,
      targetMs: TARGET[runtime],
      sameRepository: summary(cold, warm),
      newCommit: summary(coldNew, warmNew),
      newCommitBeforePass: summary(coldNew, warmPushed),
    };
    for (const c of [r.sameRepository, r.newCommit, r.newCommitBeforePass]) {
      c.ratio = +(c.warm.readyP50 / c.cold.readyP50).toFixed(2);
      c.met = c.warm.readyP50 <= r.targetMs;
    }
    results.push(r);
    if (!JSON_OUT) {
      for (const [label, c] of [
        ['same repository (checked out ahead)', r.sameRepository],
        ['same repository, a new commit since (empty warm sandbox filled when taken)', r.newCommit],
        ['same repository, a new commit a pass before the session (checked out ahead again; cold as above)', r.newCommitBeforePass],
      ]) {
        console.log(`${runtime}, ${label}:`);
        console.log(
          `  open → ready                   cold p50 ${c.cold.readyP50} ms p95 ${c.cold.readyP95} ms   warm p50 ${c.warm.readyP50} ms p95 ${c.warm.readyP95} ms   ratio ${c.ratio}   target warm p50 ≤ ${r.targetMs} ms: ${c.met ? 'met' : 'missed'}`,
        );
        console.log(`  open → first command finished  cold p50 ${c.cold.firstP50} ms p95 ${c.cold.firstP95} ms   warm p50 ${c.warm.firstP50} ms p95 ${c.warm.firstP95} ms`);
      }
    }
  }
  if (JSON_OUT) console.log(JSON.stringify({ node: process.version, cpus: os.cpus().length, results }));
} finally {
  await stop();
}
// Exit explicitly: a handle of the in-process exec-hosts' clients may outlive their close.
process.exit(results.every((r) => r.sameRepository.met && r.newCommit.met) ? 0 : 1);
