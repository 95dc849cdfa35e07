// The container engine: use a running Docker engine as it is; otherwise, as root on Debian, install
// Debian's docker.io (with gVisor's runsc and debootstrap for the offline image) and start dockerd.
import * as fs from 'node:fs';
import { run, mustRun, has, isRoot, SetupError, waitFor, startDaemon } from './sh.mjs';

const DAEMON_JSON = '/etc/docker/daemon.json';
const DOCKERD_LOG = '/var/log/lemniscate-dockerd.log';
const APT_PACKAGES = ['docker.io', 'runsc', 'debootstrap'];

export function engineRunning() {
  return run('docker', ['info', '--format', '{{json .Runtimes}}'], { timeout: 15000 }).ok;
}

export function runtimes() {
  const r = run('docker', ['info', '--format', '{{json .Runtimes}}'], { timeout: 15000 });
  if (!r.ok) return [];
  try {
    return Object.keys(JSON.parse(r.stdout));
  } catch {
    return [];
  }
}

let aptUpdated = false;
export function aptInstall(packages, why) {
  if (!isRoot() || !has('apt-get')) {
    throw new SetupError(`${why} needs the Debian packages ${packages.join(', ')}; install them (as root: apt-get install -y ${packages.join(' ')}) and run this again.`);
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!aptUpdated) {
    mustRun('apt-get', ['update', '-q'], 'Could not refresh the Debian package lists', { env, quiet: true });
    aptUpdated = true;
  }
  mustRun('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages], `Could not install ${packages.join(', ')} from Debian`, { env, quiet: true });
}

function missingPackages() {
  const need = [];
  if (!has('dockerd')) need.push('docker.io');
  if (!has('runsc')) need.push('runsc');
  if (!has('debootstrap')) need.push('debootstrap');
  return need;
}

/** Registers runsc with the engine (network off at the runtime level too). Returns true when the file changed. */
function ensureDaemonJson() {
  let cfg = {};
  if (fs.existsSync(DAEMON_JSON)) {
    try {
      cfg = JSON.parse(fs.readFileSync(DAEMON_JSON, 'utf8'));
    } catch {
      throw new SetupError(`${DAEMON_JSON} is not valid JSON; fix it so the runsc runtime can be registered.`);
    }
  }
  const runsc = has('runsc') ? run('sh', ['-c', 'command -v runsc']).stdout.trim() : '/usr/bin/runsc';
  const want = { path: runsc, runtimeArgs: ['--network=none', '--oci-seccomp'] };
  // A gVisor project's environment set-up reaches its egress proxy through a host unix socket.
  const setup = { path: runsc, runtimeArgs: ['--network=none', '--oci-seccomp', '--host-uds=open'] };
  const same = (a, b) => a && JSON.stringify(a) === JSON.stringify(b);
  if (same(cfg.runtimes?.runsc, want) && same(cfg.runtimes?.['runsc-setup'], setup)) return false;
  cfg.runtimes = { ...(cfg.runtimes ?? {}), runsc: want, 'runsc-setup': setup };
  fs.mkdirSync('/etc/docker', { recursive: true });
  fs.writeFileSync(DAEMON_JSON, JSON.stringify(cfg, null, 2) + '\n');
  return true;
}

/** runsc for sessions and runsc-setup for environment set-ups are both known to the engine. */
function gvisorRegistered() {
  const names = runtimes();
  return names.includes('runsc') && names.includes('runsc-setup');
}

function dockerdPid() {
  const r = run('pgrep', ['-x', 'dockerd']);
  return r.ok ? Number(r.stdout.trim().split('\n')[0]) : null;
}

/**
 * Makes sure a Docker engine answers, with runsc registered where this script manages the engine.
 * Returns a sentence describing what was done (or that nothing was needed).
 */
export async function ensureEngine({ log }) {
  const missing = missingPackages();
  if (engineRunning() && missing.length === 0 && isRoot() && dockerdPid() && ensureDaemonJson()) {
    log('reloading dockerd: the runsc runtime settings changed');
    process.kill(dockerdPid(), 'SIGHUP');
    await new Promise((r) => setTimeout(r, 1500));
    await waitFor(() => engineRunning() && gvisorRegistered(), { timeoutMs: 20000, what: 'The Docker engine (runsc registration)' });
    return 'already running; runsc settings reloaded';
  }
  if (engineRunning() && missing.length === 0 && gvisorRegistered()) {
    return 'already running (runc and runsc available)';
  }
  if (engineRunning() && !isRoot()) {
    return `already running (runtimes: ${runtimes().join(', ')}); gVisor tests need runsc registered`;
  }
  if (!isRoot()) {
    throw new SetupError('No Docker engine is running and this user is not root: start Docker (with runsc registered) yourself, or run as root so Lemniscate can install Debian\'s docker.io.');
  }
  if (missing.length) {
    log(`installing ${missing.join(', ')} from Debian`);
    aptInstall(missing, 'The sandbox');
  }
  const changed = ensureDaemonJson();
  const pid = dockerdPid();
  if (pid && changed) {
    log('reloading dockerd to register runsc');
    process.kill(pid, 'SIGHUP');
    await waitFor(() => gvisorRegistered(), { timeoutMs: 20000, what: 'The Docker engine (runsc registration)' });
  }
  if (!dockerdPid()) {
    // containerd comes with docker.io; dockerd starts its own when none is running.
    log(`starting dockerd (log: ${DOCKERD_LOG})`);
    startDaemon('dockerd', [], DOCKERD_LOG);
  }
  await waitFor(() => engineRunning(), { timeoutMs: 60000, what: `The Docker engine (see ${DOCKERD_LOG})` });
  if (!gvisorRegistered()) {
    throw new SetupError(`The Docker engine runs but does not list the runsc runtime; check ${DAEMON_JSON} and ${DOCKERD_LOG}.`);
  }
  return missing.length ? `installed ${missing.join(', ')} and started` : 'started';
}

export { APT_PACKAGES };
