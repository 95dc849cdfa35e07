// Idle density benchmark (printed, not asserted), against the built exec-host (npx tsc -b apps/exec-host).
// Creates idle sandboxes (a 20-file repository, default limits) one after another until the exec-host
// refuses, a creation fails, the host has less than 10 % of its memory available, or --max is reached;
// samples the host's memory, the exec-host's RSS and descriptors, host processes and loop devices; checks
// a few sandboxes still run a command at that density; then destroys them all and checks nothing is left
// (no container, no mount, no loop device). Cleans up on Ctrl-C and on any error as well.
// Usage: node bench/sandbox/density.mjs [--runtime runc|runsc] [--max N] [--cap N|default] [--floor 10] [--command CMD]
//   --runtime   one runtime (default: runc, then runsc)
//   --max       the bench's own bound (default 320 for runc, 120 for runsc): a shared machine stays usable
//   --cap       LEMNISCATE_EXEC_HOST_MAX_SANDBOXES given to the exec-host (default: one above --max, so the
//               exec-host's memory floor, a failure or --max ends the run; "default": the exec-host's own cap)
//   --floor     stop when MemAvailable falls below this percentage of MemTotal (default 10)
//   --command   run this command once in each sandbox after its creation (default: none, the sandbox
//               stays as created), to measure sandboxes that have done some work and then idle
import { execFile, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { arg, createExecHost, DockerSandboxDriver, loadConfig, pct } from './support.mjs';

if (typeof process.getuid === 'function' && process.getuid() !== 0) {
  console.error('Run the density benchmark as root: the exec-host mounts each sandbox disk image on a loop device.');
  process.exit(1);
}
const run = promisify(execFile);

const RUNTIMES = arg('runtime', 'runc,runsc').split(',');
for (const r of RUNTIMES) {
  if (r !== 'runc' && r !== 'runsc') {
    console.error(`--runtime must be runc or runsc, not "${r}".`);
    process.exit(1);
  }
}
const MAX_DEFAULT = { runc: 320, runsc: 120 };
const TARGET = { runc: 300, runsc: 100 };
const maxOf = (runtime) => Number(arg('max', String(MAX_DEFAULT[runtime])));
const CAP = arg('cap', '');
const FLOOR_PERCENT = Number(arg('floor', '10'));
const COMMAND = arg('command', '');
if (!(FLOOR_PERCENT >= 0 && FLOOR_PERCENT < 100)) {
  console.error(`--floor must be a percentage between 0 and 100, not "${arg('floor')}".`);
  process.exit(1);
}
for (const r of RUNTIMES) {
  if (!Number.isInteger(maxOf(r)) || maxOf(r) < 1) {
    console.error(`--max must be a positive whole number, not "${arg('max')}".`);
    process.exit(1);
  }
}

// ---------------------------------------------------------------------------------------------------
// What the host has: memory, processes, loop devices, mounts

function meminfo() {
  const out = {};
  for (const line of fs.readFileSync('/proc/meminfo', 'utf8').split('\n')) {
    const m = /^(\w+(?:\(\w+\))?):\s+(\d+)/.exec(line);
    if (m) out[m[1]] = Number(m[2]) * 1024;
  }
  return out;
}

const MiB = 1024 * 1024;
const mib = (bytes) => `${(bytes / MiB).toFixed(1)} MiB`;
const gib = (bytes) => `${(bytes / 1024 / MiB).toFixed(2)} GiB`;

/** Every host process, classified by what it is for a sandbox. */
function processes() {
  const list = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' ');
      const ppid = Number(fields[1]);
      const threads = Number(fields[17]);
      const cmdline = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').filter(Boolean);
      list.push({ pid: Number(name), ppid, comm, threads, cmdline, kind: classify(comm, ppid, cmdline) });
    } catch {
      // gone meanwhile
    }
  }
  return list;
}

function classify(comm, ppid, cmdline) {
  if (ppid === 2) return 'kernel thread';
  // gVisor's ptrace platform: one host stub process per address space inside the sandbox.
  if (cmdline.length === 0 && comm === 'exe') return 'runsc ptrace stub';
  if (cmdline.length === 0) return 'kernel thread';
  if (comm.startsWith('containerd-shim')) return 'containerd-shim';
  const joined = cmdline.join(' ');
  if (/runsc/.test(cmdline[0] ?? '') || comm === 'runsc' || comm.startsWith('runsc-')) {
    if (cmdline.includes('boot') || comm === 'runsc-sandbox') return 'runsc sandbox (sentry)';
    if (cmdline.includes('gofer') || comm === 'runsc-gofer') return 'runsc gofer';
    return 'runsc (other)';
  }
  if (comm === 'exe' && /\bboot\b/.test(joined)) return 'runsc sandbox (sentry)';
  if (comm === 'exe' && /\bgofer\b/.test(joined)) return 'runsc gofer';
  if (/^lemniscate-keep/.test(comm) || /while :; do sleep/.test(joined) || /^\/\.lemniscate\/keeper/.test(joined)) return 'container pid 1 (keeper)';
  if (comm === 'sleep' && cmdline[1] === '3600') return "keeper's sleep";
  return 'other';
}

function countBy(list, key) {
  const out = new Map();
  for (const p of list) out.set(p[key], (out.get(p[key]) ?? 0) + 1);
  return out;
}

/** Proportional set size of a process (its share of shared pages), in bytes; 0 when unreadable. */
function pss(pid) {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Page tables of a process (VmPTE), in bytes; 0 when unreadable. */
function pageTables(pid) {
  try {
    const m = /^VmPTE:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** A kernel stack per thread (x86-64: 16 KiB). */
const KERNEL_STACK_BYTES = 16 * 1024;

/**
 * The host processes of these containers: each one's containerd-shim (found by the container id on its
 * command line) and everything below it (runc: pid 1 and its sleep; runsc: gofer, sentry, ptrace stubs).
 * Other work on the machine (other engines' containers, test suites) is left out.
 */
function processesOf(list, containerIds) {
  const children = new Map();
  for (const p of list) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const out = [];
  const visit = (p) => {
    out.push(p);
    for (const c of children.get(p.pid) ?? []) visit(c);
  };
  for (const p of list) {
    if (p.kind !== 'containerd-shim') continue;
    const i = p.cmdline.indexOf('-id');
    if (i >= 0 && containerIds.has(p.cmdline[i + 1])) visit(p);
  }
  return out;
}

function rssOf(pid) {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

const pidOf = (comm) => processes().find((p) => p.comm === comm)?.pid ?? null;

/** Loop devices bound to a file now, and those bound to a file under `dir`. */
function loopDevices(dir) {
  let bound = 0;
  let ours = 0;
  for (const name of fs.readdirSync('/sys/block')) {
    if (!name.startsWith('loop')) continue;
    try {
      const backing = fs.readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim();
      bound++;
      if (dir && backing.startsWith(dir)) ours++;
    } catch {
      // not bound
    }
  }
  const nodes = fs.readdirSync('/dev').filter((n) => /^loop\d+$/.test(n)).length;
  return { bound, ours, nodes };
}

function mountsUnder(dir) {
  return fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .filter((l) => (l.split(' ')[1] ?? '').startsWith(dir)).length;
}

const openFds = () => fs.readdirSync('/proc/self/fd').length;

function fdCount(pid) {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

/** inotify instances held by all host processes (fs.inotify.max_user_instances is per user). */
function inotifyInstances() {
  let n = 0;
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let fds = [];
    try {
      fds = fs.readdirSync(`/proc/${name}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (fs.readlinkSync(`/proc/${name}/fd/${fd}`) === 'anon_inode:inotify') n++;
      } catch {
        // closed meanwhile
      }
    }
  }
  return n;
}

const readNumber = (file) => Number(fs.readFileSync(file, 'utf8').trim());
/** Threads on the host now (every task takes a process id): the 4th field of /proc/loadavg. */
const hostThreads = () => Number(fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[3].split('/')[1]);

function slope(xs, ys) {
  const n = xs.length;
  if (n < 2) return NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return num / den;
}

function git(cwd, ...args) {
  return execFileSync('git', ['-c', 'user.email=b@example.test', '-c', 'user.name=Bench', ...args], { cwd, encoding: 'utf8' });
}

function makeRepo(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-density-repo-'));
  git(dir, 'init', '-q', '-b', 'main');
  for (let i = 0; i < files; i++) fs.writeFileSync(path.join(dir, `f${i}.txt`), `file ${i}\n`);
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'bench');
  return dir;
}

// ---------------------------------------------------------------------------------------------------
// Clean-up on every path: a normal end, an error, Ctrl-C or SIGTERM

let stopRequested = null;
const cleanups = [];
let cleaning = null;
function cleanupAll() {
  cleaning ??= (async () => {
    while (cleanups.length) {
      const fn = cleanups.pop();
      await fn().catch((e) => console.error(`clean-up step failed: ${e.message}`));
    }
  })();
  return cleaning;
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    if (stopRequested) {
      console.error(`${sig} again: still destroying the sandboxes this run created; wait for it to finish.`);
      return;
    }
    stopRequested = sig;
    console.error(`\n${sig}: no new sandbox; destroying those this run created…`);
  });
}
process.on('uncaughtException', (e) => {
  console.error(`density benchmark failed: ${e.stack ?? e.message}`);
  void cleanupAll().finally(() => process.exit(1));
});

// ---------------------------------------------------------------------------------------------------

async function engineInfo() {
  const { stdout } = await run('docker', ['info', '--format', '{{json .}}']);
  return JSON.parse(stdout);
}

async function density(runtime, repo) {
  const max = maxOf(runtime);
  const token = `bench-${Math.random().toString(36).slice(2)}-token`;
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-density-'));
  const env = { LEMNISCATE_EXEC_HOST_TOKEN: token, LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir, LEMNISCATE_EXEC_HOST_PORT: '1' };
  if (CAP !== 'default') env.LEMNISCATE_EXEC_HOST_MAX_SANDBOXES = CAP || String(max + 1);
  const config = loadConfig(env);
  const defaults = loadConfig({ ...env, LEMNISCATE_EXEC_HOST_MAX_SANDBOXES: undefined });
  const host = await createExecHost(config, new DockerSandboxDriver({ cgroupLayout: config.cgroupLayout }), { logger: false });
  let hostClosed = false;
  const closeHost = async () => {
    if (hostClosed) return;
    hostClosed = true;
    await host.close();
  };
  cleanups.push(async () => {
    await closeHost();
    fs.rmSync(stateDir, { recursive: true, force: true });
  });
  const server = host.app.getHttpServer();
  server.keepAliveTimeout = 65_000;
  await host.app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${server.address().port}`;
  const api = async (method, url, body) => {
    const res = await fetch(base + url, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
    const json = await res.json();
    return { status: res.status, ok: res.ok, json };
  };

  const dockerd = pidOf('dockerd');
  const containerd = pidOf('containerd');
  const engineRss = () => (dockerd ? rssOf(dockerd) : 0) + (containerd ? rssOf(containerd) : 0);
  const engineFds = () => (dockerd ? fdCount(dockerd) : 0) + (containerd ? fdCount(containerd) : 0);
  const snapshot = () => ({
    mem: meminfo(),
    procs: processes(),
    loops: loopDevices(stateDir),
    fds: openFds(),
    rss: process.memoryUsage().rss,
    engine: engineRss(),
    engineFds: engineFds(),
    inotify: inotifyInstances(),
    threads: hostThreads(),
  });
  const before = snapshot();
  const pidLimit = Math.min(readNumber('/proc/sys/kernel/pid_max'), readNumber('/proc/sys/kernel/threads-max'));
  const memTotal = before.mem.MemTotal;
  const floorBytes = (memTotal * FLOOR_PERCENT) / 100;
  const label = `${runtime}`;
  console.log(
    `\n[${label}] exec-host cap ${config.maxSandboxes} (its default on this host: ${defaults.maxSandboxes}, from its ${defaults.maxSandboxesFrom}; memory floor ${config.memoryFloorPercent} %); bench bound --max ${max}; stop below ${FLOOR_PERCENT} % available (${gib(floorBytes)})`,
  );
  console.log(
    `[${label}] before: MemAvailable ${gib(before.mem.MemAvailable)} of ${gib(memTotal)}, ${before.procs.length} host processes, ${before.loops.bound} loop devices bound (${before.loops.nodes} in /dev), exec-host ${before.fds} fds`,
  );

  const ids = [];
  const createMs = [];
  const samples = []; // { n, avail, rss, fds }
  let limit = null;
  try {
    for (let i = 0; ; i++) {
      if (stopRequested) {
        limit = { what: 'interrupted', message: `${stopRequested} received: the run was stopped by hand.` };
        break;
      }
      if (ids.length >= max) {
        limit = { what: 'bench bound', message: `--max ${max} reached; the exec-host did not refuse and memory stayed above the floor.` };
        break;
      }
      const avail = meminfo().MemAvailable;
      if (avail < floorBytes) {
        limit = { what: 'host memory', message: `MemAvailable ${gib(avail)} is below ${FLOOR_PERCENT} % of ${gib(memTotal)}.` };
        break;
      }
      const t0 = performance.now();
      const res = await api('POST', '/v1/sandboxes', { sessionId: `density-${runtime}-${process.pid}-${i}`, repository: { source: repo }, runtime });
      if (!res.ok) {
        limit = { what: res.json.code === 'sandbox_limit_reached' ? 'exec-host refused' : 'creation failed', message: `${res.status} ${res.json.code}: ${res.json.message}` };
        break;
      }
      createMs.push(performance.now() - t0);
      ids.push(res.json.sandboxId);
      if (COMMAND) {
        const r = await api('POST', `/v1/sandboxes/${res.json.sandboxId}/exec?stream=false`, { command: COMMAND });
        if (!r.ok || r.json.exitCode !== 0) {
          limit = {
            what: 'command failed',
            message: `"${COMMAND}" in sandbox #${ids.length}: ${r.ok ? `exit ${r.json.exitCode} ${r.json.class ?? ''}` : `${r.status} ${r.json.code}: ${r.json.message}`}`,
          };
          break;
        }
      }
      const n = ids.length;
      samples.push({ n, avail: meminfo().MemAvailable, rss: process.memoryUsage().rss, fds: openFds() });
      if (n % 20 === 0) {
        const s = samples[samples.length - 1];
        const l = loopDevices(stateDir);
        console.log(
          `[${label}] ${String(n).padStart(4)} idle: MemAvailable ${gib(s.avail)} (${mib((s.avail - before.mem.MemAvailable) / n)}/sandbox), exec-host RSS ${mib(s.rss)} ${s.fds} fds, loop devices ${l.ours} ours / ${l.bound} bound, create p50 ${pct(createMs.slice(-20), 50).toFixed(0)} ms`,
        );
      }
    }

    // At the peak: what each sandbox costs, and whether they still work.
    const n = ids.length;
    // Let the last command's clean-up finish before measuring.
    if (COMMAND && n > 0) await api('GET', `/v1/sandboxes/${ids[n - 1]}/changes`);
    const peak = snapshot();
    const listed = (await api('GET', '/v1/sandboxes')).json;
    const lost = Array.isArray(listed.sandboxes) ? listed.sandboxes.filter((s) => s.state === 'lost').length : NaN;
    const probes = [...new Set([0, Math.floor(n / 2), n - 1])].filter((i) => i >= 0 && i < n);
    let probesOk = 0;
    const probeMs = [];
    for (const i of probes) {
      const t0 = performance.now();
      const r = await api('POST', `/v1/sandboxes/${ids[i]}/exec?stream=false`, { command: 'echo ok' });
      probeMs.push(performance.now() - t0);
      if (r.ok && r.json.exitCode === 0) probesOk++;
    }

    const drop = before.mem.MemAvailable - peak.mem.MemAvailable;
    const fitted = -slope(
      samples.map((s) => s.n),
      samples.map((s) => s.avail),
    );
    const byKindBefore = countBy(before.procs, 'kind');
    const byKindPeak = countBy(peak.procs, 'kind');
    const kinds = [...new Set([...byKindPeak.keys(), ...byKindBefore.keys()])].filter((k) => k !== 'other');
    const perKind = kinds
      .map((k) => [k, ((byKindPeak.get(k) ?? 0) - (byKindBefore.get(k) ?? 0)) / Math.max(1, n)])
      .filter(([, d]) => Math.abs(d) >= 0.05)
      .map(([k, d]) => `${k} ${d.toFixed(2)}`);
    // What these sandboxes hold themselves, whatever else runs on the machine meanwhile.
    const { stdout: psOut } = await run('docker', ['ps', '-q', '--no-trunc', '--filter', `label=lemniscate.exec-host=${config.instance}`]);
    const ours = processesOf(peak.procs, new Set(psOut.split('\n').filter(Boolean)));
    const pssBy = new Map();
    const oursBy = new Map();
    let attributed = 0;
    let ourThreads = 0;
    for (const p of ours) {
      const bytes = pss(p.pid);
      pssBy.set(p.kind, (pssBy.get(p.kind) ?? 0) + bytes);
      oursBy.set(p.kind, (oursBy.get(p.kind) ?? 0) + 1);
      attributed += bytes + pageTables(p.pid) + p.threads * KERNEL_STACK_BYTES;
      ourThreads += p.threads;
    }
    // The disk of each sandbox adds kernel threads (ext4's rsv-conversion rescuer): counted host-wide.
    const kernelThreads = ((byKindPeak.get('kernel thread') ?? 0) - (byKindBefore.get('kernel thread') ?? 0)) / Math.max(1, n);
    const perSandboxIds = ourThreads / Math.max(1, n) + Math.max(0, kernelThreads);
    const memKeys = ['Slab', 'SUnreclaim', 'KernelStack', 'PageTables', 'Shmem', 'Buffers', 'Cached'];
    const memDelta = memKeys.map((k) => `${k} ${mib(((peak.mem[k] ?? 0) - (before.mem[k] ?? 0)) / Math.max(1, n))}`).join(', ');

    console.log(`[${label}] count: ${n} idle sandboxes; limiting: ${limit.what} — ${limit.message}`);
    if (n > 0) {
      console.log(
        `[${label}] memory per idle sandbox: ${mib(attributed / n)} held by its own processes (PSS, page tables, kernel stacks); host MemAvailable ${gib(before.mem.MemAvailable)} → ${gib(peak.mem.MemAvailable)}, ${mib(drop / n)} per sandbox (fitted slope ${mib(fitted)}; moves with whatever else runs on the machine)`,
      );
      console.log(
        `[${label}]   by process, per sandbox: ${[...pssBy].map(([k, b]) => `${k} PSS ${mib(b / n)}`).join(', ') || 'none found'}; dockerd+containerd RSS ${mib((peak.engine - before.engine) / n)}`,
      );
      console.log(`[${label}]   host-wide change, per sandbox: ${memDelta}`);
      console.log(
        `[${label}] host processes per sandbox: ${(ours.length / n).toFixed(2)} of its own (${[...oursBy].map(([k, c]) => `${k} ${(c / n).toFixed(2)}`).join(', ')}) + ${kernelThreads.toFixed(2)} kernel threads (host-wide change); all kinds host-wide: ${perKind.join(', ')}`,
      );
      console.log(
        `[${label}] process ids per sandbox: ${perSandboxIds.toFixed(1)} (${(ourThreads / n).toFixed(1)} threads of its own processes + kernel threads); host tasks ${before.threads} → ${peak.threads} of ${pidLimit}`,
      );
      console.log(`[${label}] loop devices: ${peak.loops.ours} bound to this run's disks (${peak.loops.bound} bound in all, ${peak.loops.nodes} in /dev)`);
      console.log(
        `[${label}] descriptors: dockerd+containerd ${before.engineFds} → ${peak.engineFds} (${((peak.engineFds - before.engineFds) / n).toFixed(2)}/sandbox); inotify instances ${before.inotify} → ${peak.inotify}`,
      );
      console.log(
        `[${label}] exec-host: RSS ${mib(before.rss)} → ${mib(peak.rss)} (${mib((peak.rss - before.rss) / n)}/sandbox), open fds ${before.fds} → ${peak.fds} (${((peak.fds - before.fds) / n).toFixed(2)}/sandbox)`,
      );
      console.log(`[${label}] create p50 ${pct(createMs, 50).toFixed(0)} ms, p95 ${pct(createMs, 95).toFixed(0)} ms, last 20 p50 ${pct(createMs.slice(-20), 50).toFixed(0)} ms`);
      console.log(
        `[${label}] at this density: ${lost} lost; "echo ok" in sandboxes #${probes.map((i) => i + 1).join(', #')}: ${probesOk} of ${probes.length} ran (${probeMs.map((x) => x.toFixed(0)).join(', ')} ms)`,
      );
      if (limit.what === 'bench bound' && attributed > 0 && perSandboxIds > 0) {
        // Beyond the bound, at the costs just measured: which runs out first?
        const byMemory = n + Math.floor((peak.mem.MemAvailable - floorBytes) / (attributed / n));
        const byPids = n + Math.floor((pidLimit * 0.9 - peak.threads) / perSandboxIds);
        console.log(
          `[${label}] projected at these costs: the ${FLOOR_PERCENT} % memory floor at about ${byMemory} sandboxes, 90 % of the ${pidLimit} process ids at about ${byPids}: ${byPids < byMemory ? 'process ids' : 'memory'} would limit first`,
        );
      }
    }
    const bounded = limit.what === 'bench bound' && n < TARGET[runtime] ? ` (this run stopped at --max ${max})` : '';
    console.log(`[${label}] target ≥ ${TARGET[runtime]} idle ${runtime} sandboxes: ${n >= TARGET[runtime] ? 'met' : 'missed'}${bounded}`);
  } finally {
    // Destroy through the API (a few at a time), then whatever is left with the exec-host, and check.
    const t0 = performance.now();
    let next = 0;
    let failures = 0;
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (next < ids.length) {
          const id = ids[next++];
          const r = await api('DELETE', `/v1/sandboxes/${id}`).catch((e) => ({ ok: false, json: { message: e.message } }));
          if (!r.ok) failures++;
        }
      }),
    );
    const destroyS = (performance.now() - t0) / 1000;
    await closeHost();
    const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=lemniscate.exec-host=${config.instance}`]);
    const containers = stdout.split('\n').filter(Boolean).length;
    const mounts = mountsUnder(stateDir);
    const loops = loopDevices(stateDir).ours;
    const dirs = fs.existsSync(path.join(stateDir, 'sandboxes')) ? fs.readdirSync(path.join(stateDir, 'sandboxes')).length : 0;
    console.log(
      `[${label}] destroyed ${ids.length} in ${destroyS.toFixed(1)} s (${failures} refused); left behind: ${containers} containers, ${mounts} mounts, ${loops} loop devices, ${dirs} directories — ${containers + mounts + loops + dirs === 0 ? 'nothing' : 'NOT CLEAN'}`,
    );
    const after = meminfo();
    console.log(`[${label}] after: MemAvailable ${gib(after.MemAvailable)} (${gib(before.mem.MemAvailable)} before)`);
  }
}

try {
  const info = await engineInfo();
  const mem = meminfo();
  let runscVersion = 'absent';
  try {
    runscVersion = execFileSync('runsc', ['--version'], { encoding: 'utf8' }).split('\n')[0];
  } catch {
    // not installed
  }
  console.log(
    `Idle density (${os.cpus().length} CPUs, ${gib(mem.MemTotal)} memory, kernel ${os.release()}, Docker ${info.ServerVersion}, cgroup v${info.CgroupVersion} (${info.CgroupDriver}), ${runscVersion}, Node ${process.version}, one run)`,
  );
  const repo = makeRepo(20);
  cleanups.push(async () => fs.rmSync(repo, { recursive: true, force: true }));
  for (const runtime of RUNTIMES) {
    if (stopRequested) break;
    if (!Object.keys(info.Runtimes ?? {}).includes(runtime)) {
      console.log(`\n[${runtime}] skipped: the engine has no ${runtime} runtime.`);
      continue;
    }
    await density(runtime, repo);
  }
} finally {
  await cleanupAll();
}
if (stopRequested) process.exit(130);
