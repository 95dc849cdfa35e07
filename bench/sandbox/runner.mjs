// What one command costs the host, three ways (printed, not asserted), against the built exec-host
// (npx tsc -b apps/exec-host):
//   A. `echo hi` through the exec-host's API, started by the sandbox's runner (docs/decisions/0016;
//      runc only: under runsc the exec-host uses no runner), then the kill that follows every command;
//   B. the same through the API of an exec-host with LEMNISCATE_SANDBOX_RUNNER=off: an engine exec per
//      command (dockerd, containerd, the shim and the runtime start a process in the container);
//   C. the same command started by one shell that lives in a sandbox alike for the whole run, as the
//      sandbox user, fed one command at a time on its stdin: no output cap, no kill, no HTTP, no
//      per-command seccomp loader under runsc — a lower bound.
// All on hardened sandboxes made by exec-hosts alike, alternated in blocks, in one run; wall time per
// command (p50, p95) and the machine's CPU time per command (every process: /proc/stat), as ratios.
// Usage: node bench/sandbox/runner.mjs [--commands 60] [--runtimes runc,runsc] [--json]
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { arg, pct, sandboxDriver, SESSION_DEFAULT_PROFILE, startExecHost } from './support.mjs';

const { LABEL_SANDBOX, SANDBOX_UID, SANDBOX_GID } = sandboxDriver;
const COMMANDS = Number(arg('commands', '60'));
const RUNTIMES = arg('runtimes', 'runc,runsc').split(',');
const JSON_OUT = process.argv.includes('--json');
const BLOCK = 10;

const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-bench-repo-'));
const git = (...args) => execFileSync('git', ['-c', 'user.email=b@example.test', '-c', 'user.name=Bench', ...args], { cwd: repo, encoding: 'utf8' });
git('init', '-q', '-b', 'main');
fs.writeFileSync(path.join(repo, 'README.md'), 'bench\n');
git('add', '-A');
git('commit', '-q', '-m', 'bench');

const execHost = await startExecHost('runner');
const engineHost = await startExecHost('engine', { LEMNISCATE_SANDBOX_RUNNER: 'off' });
const { api } = execHost;

/** Busy and total jiffies of the whole machine (every process, every CPU). */
function machineTicks() {
  const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const idle = fields[3] + fields[4];
  return { busy: fields.reduce((a, b) => a + b, 0) - idle };
}
const TICK_MS = 1000 / 100;

/** One shell as the sandbox user in the container for the whole run; each command is a child of it. */
function longLivedShell(containerId) {
  const child = spawn('docker', ['exec', '-i', '-u', `${SANDBOX_UID}:${SANDBOX_GID}`, '-w', '/workspace', containerId, 'bash', '--noprofile', '--norc'], { stdio: ['pipe', 'pipe', 'inherit'] });
  let buffered = '';
  let waiting = null;
  const marker = `__bench_done_${process.pid}__`;
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text) => {
    buffered += text;
    const at = buffered.indexOf(marker);
    if (at >= 0 && waiting) {
      const output = buffered.slice(0, at);
      buffered = buffered.slice(buffered.indexOf('\n', at) + 1);
      const done = waiting;
      waiting = null;
      done(output);
    }
  });
  return {
    run: (command) =>
      new Promise((resolve) => {
        waiting = resolve;
        child.stdin.write(`bash -c ${JSON.stringify(command)}; echo ${marker} $?\n`);
      }),
    close: () => new Promise((resolve) => (child.stdin.end(), child.once('close', resolve))),
  };
}

async function measure(runtime) {
  // Two sandboxes alike: the kill after each exec ends every process of the sandbox user, a
  // long-lived shell too, so the shell lives in a sandbox that the exec API is not used on.
  const make = (host, tag) => host.api('POST', '/v1/sandboxes', { sessionId: `bench-runner-${process.pid}-${runtime}-${tag}`, repository: { source: repo }, runtime, limits: SESSION_DEFAULT_PROFILE });
  const withRunner = runtime === 'runc';
  const run = withRunner ? await make(execHost, 'runner') : null;
  const sbx = await make(engineHost, 'engine');
  const other = await make(execHost, 'long-lived');
  const containerId = execFileSync('docker', ['ps', '-q', '--filter', `label=${LABEL_SANDBOX}=${other.sandboxId}`], { encoding: 'utf8' }).trim();
  if (!containerId) throw new Error(`no container for sandbox ${other.sandboxId}`);
  const shell = longLivedShell(containerId);
  const samples = { runner: [], engine: [], longLived: [] };
  const ticks = { runner: 0, engine: 0, longLived: 0 };
  const through = (host, sandboxId) => async () => {
    const out = await host.api('POST', `/v1/sandboxes/${sandboxId}/exec?stream=false`, { command: 'echo hi' });
    if (out.stdout !== 'hi\n') throw new Error(`exec answered ${JSON.stringify(out.stdout)}`);
  };
  try {
    const ways = {
      ...(run ? { runner: through(execHost, run.sandboxId) } : {}),
      engine: through(engineHost, sbx.sandboxId),
      longLived: async () => {
        const out = await shell.run('echo hi');
        if (out !== 'hi\n') throw new Error(`the long-lived shell answered ${JSON.stringify(out)}`);
      },
    };
    // One of each first, unmeasured (the first gVisor command compiles the seccomp filter).
    for (const way of Object.values(ways)) await way();
    // Alternated in blocks, so that every way sees the same machine; CPU counted per block.
    for (let done = 0; done < COMMANDS; done += BLOCK) {
      for (const way of Object.keys(ways)) {
        // The kill after an exec runs after its answer: let it end before the other way's block.
        await new Promise((r) => setTimeout(r, 200));
        const before = machineTicks();
        for (let i = 0; i < Math.min(BLOCK, COMMANDS - done); i++) {
          const t0 = performance.now();
          await ways[way]();
          samples[way].push(performance.now() - t0);
        }
        ticks[way] += machineTicks().busy - before.busy;
      }
    }
  } finally {
    await shell.close().catch(() => undefined);
    if (run) await api('DELETE', `/v1/sandboxes/${run.sandboxId}`).catch(() => undefined);
    await engineHost.api('DELETE', `/v1/sandboxes/${sbx.sandboxId}`).catch(() => undefined);
    await api('DELETE', `/v1/sandboxes/${other.sandboxId}`).catch(() => undefined);
  }
  const summary = (way) => ({ p50: +pct(samples[way], 50).toFixed(1), p95: +pct(samples[way], 95).toFixed(1), cpuMs: +((ticks[way] * TICK_MS) / samples[way].length).toFixed(1) });
  const engine = summary('engine');
  const longLived = summary('longLived');
  const runner = run ? summary('runner') : null;
  return {
    runtime,
    commands: COMMANDS,
    runner,
    engine,
    longLived,
    ...(runner ? { runnerWallRatio: +(runner.p50 / engine.p50).toFixed(2), runnerCpuRatio: +(runner.cpuMs / engine.cpuMs).toFixed(2) } : {}),
    wallRatio: +(longLived.p50 / engine.p50).toFixed(2),
    cpuRatio: +(longLived.cpuMs / engine.cpuMs).toFixed(2),
  };
}

const results = [];
try {
  if (!JSON_OUT)
    console.log(
      `One command's cost: the sandbox's runner vs. an engine exec per command vs. a bare long-lived shell (${os.cpus().length} CPUs, Node ${process.version}, ${COMMANDS} commands each, alternated in blocks of ${BLOCK}, one run)\n`,
    );
  for (const runtime of RUNTIMES) {
    const r = await measure(runtime);
    results.push(r);
    if (!JSON_OUT) {
      console.log(`${runtime}:`);
      if (r.runner) console.log(`  the sandbox's runner (the exec API)        wall p50 ${r.runner.p50} ms  p95 ${r.runner.p95} ms   machine CPU ${r.runner.cpuMs} ms/command`);
      else console.log(`  the sandbox's runner                       not used under ${runtime} (docs/decisions/0016)`);
      console.log(`  engine exec per command (the exec API)     wall p50 ${r.engine.p50} ms  p95 ${r.engine.p95} ms   machine CPU ${r.engine.cpuMs} ms/command`);
      console.log(`  bare long-lived shell in the sandbox       wall p50 ${r.longLived.p50} ms  p95 ${r.longLived.p95} ms   machine CPU ${r.longLived.cpuMs} ms/command`);
      if (r.runner) console.log(`  ratio (runner / engine)                    wall ${r.runnerWallRatio}   CPU ${r.runnerCpuRatio}`);
      console.log(`  ratio (bare shell / engine)                wall ${r.wallRatio}   CPU ${r.cpuRatio}`);
    }
  }
  if (JSON_OUT) console.log(JSON.stringify({ node: process.version, cpus: os.cpus().length, results }));
} finally {
  await execHost.close();
  await engineHost.close();
  fs.rmSync(repo, { recursive: true, force: true });
}
process.exit(0);
