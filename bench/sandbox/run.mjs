// Sandbox benchmarks (printed, not asserted), against the built exec-host (npx tsc -b apps/exec-host).
//   1. create → first command finished, cold, p50/p95 over N sessions, runc and runsc
//   2. exec through the exec-host API vs `docker exec` of the same command, paired, as a ratio
//   3. change detection after touching 1 file in a 20,000-file working copy
// Usage: node bench/sandbox/run.mjs [--sessions 20] [--pairs 30] [--files 20000] [--runtimes runc,runsc]
import { execFile, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { arg, pct, startExecHost } from './support.mjs';

const run = promisify(execFile);
const SESSIONS = Number(arg('sessions', '20'));
const PAIRS = Number(arg('pairs', '30'));
const FILES = Number(arg('files', '20000'));
const RUNTIMES = arg('runtimes', 'runc,runsc').split(',');

const execHost = await startExecHost('run');
const { api } = execHost;

function git(cwd, ...args) {
  return execFileSync('git', ['-c', 'user.email=b@example.test', '-c', 'user.name=Bench', ...args], { cwd, encoding: 'utf8', maxBuffer: 1 << 28 });
}

function makeRepo(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-bench-repo-'));
  git(dir, 'init', '-q', '-b', 'main');
  for (let i = 0; i < files; i++) {
    const sub = path.join(dir, `d${Math.floor(i / 500)}`);
    if (i % 500 === 0) fs.mkdirSync(sub, { recursive: true });
    fs.writeFileSync(path.join(sub, `f${i}.txt`), `file ${i}\n`);
  }
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'bench');
  return dir;
}

const ms = (x) => `${x.toFixed(0)} ms`;
const now = () => performance.now();
let n = 0;
const session = (tag) => `bench-${tag}-${process.pid}-${n++}`;

try {
  const small = makeRepo(20);
  console.log(`Sandbox benchmarks (${os.cpus().length} CPUs, Node ${process.version}, one run)\n`);

  // 1. cold create → first command finished
  for (const runtime of RUNTIMES) {
    const times = [];
    for (let i = 0; i < SESSIONS; i++) {
      const t0 = now();
      const sbx = await api('POST', '/v1/sandboxes', { sessionId: session(runtime), repository: { source: small }, runtime });
      await api('POST', `/v1/sandboxes/${sbx.sandboxId}/exec?stream=false`, { command: 'true' });
      times.push(now() - t0);
      await api('DELETE', `/v1/sandboxes/${sbx.sandboxId}`);
    }
    console.log(
      `1. create → first command (${runtime}, ${SESSIONS} sessions): p50 ${ms(pct(times, 50))}  p95 ${ms(pct(times, 95))}${runtime === 'runc' ? `  target p50 ≤ 1000 ms: ${pct(times, 50) <= 1000 ? 'met' : 'missed'}` : ''}`,
    );
  }

  // 2. exec through the API vs docker exec, paired
  for (const runtime of RUNTIMES) {
    const sbx = await api('POST', '/v1/sandboxes', { sessionId: session(`pair-${runtime}`), repository: { source: small }, runtime });
    const [containerId] = execFileSync('docker', ['ps', '-q', '--no-trunc', '--filter', `label=lemniscate.sandbox=${sbx.sandboxId}`], { encoding: 'utf8' }).split('\n');
    const command = 'echo hello';
    const viaApi = [];
    const viaDocker = [];
    for (let i = 0; i < PAIRS; i++) {
      // wait until the previous command's clean-up is over, so each sample measures one command
      await api('GET', `/v1/sandboxes/${sbx.sandboxId}/changes`);
      let t0 = now();
      await api('POST', `/v1/sandboxes/${sbx.sandboxId}/exec?stream=false`, { command });
      viaApi.push(now() - t0);
      await api('GET', `/v1/sandboxes/${sbx.sandboxId}/changes`);
      t0 = now();
      await run('docker', ['exec', '-u', '10001:10001', '-w', '/workspace', containerId, '/bin/bash', '-c', command]);
      viaDocker.push(now() - t0);
    }
    const ratio = pct(viaApi, 50) / pct(viaDocker, 50);
    console.log(
      `2. exec "${command}" (${runtime}, ${PAIRS} pairs): API p50 ${ms(pct(viaApi, 50))}, docker exec p50 ${ms(pct(viaDocker, 50))}, ratio ${ratio.toFixed(2)}  target ≤ 1.0: ${ratio <= 1 ? 'met' : 'missed'}`,
    );
    await api('DELETE', `/v1/sandboxes/${sbx.sandboxId}`);
  }

  // 3. change detection in a 20,000-file working copy
  const big = makeRepo(FILES);
  const sbx = await api('POST', '/v1/sandboxes', { sessionId: session('big'), repository: { source: big } });
  const detect = [];
  for (let i = 0; i < 7; i++) {
    await api('POST', `/v1/sandboxes/${sbx.sandboxId}/exec?stream=false`, { command: `echo touched >> d${i}/f${i * 500}.txt` });
    const t0 = now();
    const changes = await api('GET', `/v1/sandboxes/${sbx.sandboxId}/changes`);
    detect.push(now() - t0);
    if (changes.files.length !== 1) throw new Error(`expected 1 changed file, got ${changes.files.length}`);
    await api('POST', `/v1/sandboxes/${sbx.sandboxId}/changes/revert`, { paths: changes.files.map((f) => f.path) });
  }
  console.log(`3. change detection, 1 file touched among ${FILES}: p50 ${ms(pct(detect, 50))}  max ${ms(Math.max(...detect))}  target ≤ 300 ms: ${pct(detect, 50) <= 300 ? 'met' : 'missed'}`);
  await api('DELETE', `/v1/sandboxes/${sbx.sandboxId}`);
  fs.rmSync(small, { recursive: true, force: true });
  fs.rmSync(big, { recursive: true, force: true });
} finally {
  await execHost.close();
}
