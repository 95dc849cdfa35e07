#!/usr/bin/env node
// Everything `npm start` and `npm test` need on a fresh Debian machine with only Node.js present:
// npm dependencies, the Docker engine (Debian's docker.io with gVisor), the sandbox image, the build,
// and for tests PostgreSQL and Chromium. Each step is idempotent and says when it had nothing to do.
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { step } from './lib/steps.mjs';
import { ensureDeps } from './lib/deps.mjs';
import { ensureEngine } from './lib/engine.mjs';
import { ensureImage, ensureDockerfileImage } from './lib/image.mjs';
import { ensurePostgres } from './lib/postgres.mjs';
import { ensureChromium } from './lib/chromium.mjs';
import { ensureSshd } from './lib/sshd.mjs';
import { ensureConsoleBuild } from './lib/console.mjs';
import { has, mustRun, run } from './lib/sh.mjs';
import { aptInstall } from './lib/engine.mjs';
import { ensurePlatformImage } from './lib/platform-image.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** @param {{ forTests?: boolean }} opts */
export async function setup({ forTests = false } = {}) {
  const major = Number(process.versions.node.split('.')[0]);
  const minor = Number(process.versions.node.split('.')[1]);
  if (major < 20 || (major === 20 && minor < 19)) {
    process.stderr.write(`Lemniscate needs Node.js 20.19 or newer; this is ${process.version}.\n`);
    process.exit(1);
  }
  await step('npm dependencies', () => ensureDeps(ROOT));
  await step('container engine', (log) => ensureEngine({ log }));
  let image;
  let dockerfileImage;
  await step('sandbox image', (log) => {
    const r = ensureImage(ROOT, { log });
    image = r.tag;
    return r.note;
  });
  await step('build', () => {
    mustRun('npx', ['tsc', '-b', 'tsconfig.build.json'], 'The TypeScript build failed', { cwd: ROOT, quiet: true });
    return 'TypeScript projects up to date';
  });
  await step('console build', () => ensureConsoleBuild(ROOT));
  if (forTests) {
    // The attack battery runs on the sandbox image of each build route (S7): the offline one above,
    // and this one, built from images/sandbox/Dockerfile on a Debian base imported offline.
    await step('sandbox image, Dockerfile route (attack battery)', (log) => {
      const r = ensureDockerfileImage(ROOT, { log });
      dockerfileImage = r.tag;
      return r.note;
    });
    await step('PostgreSQL (tests)', (log) => ensurePostgres({ log }));
    await step('Chromium (browser tests)', (log) => ensureChromium({ log }));
    await step('tmux (terminal tests)', () => {
      if (has('tmux')) return 'present';
      aptInstall(['tmux'], 'The terminal tests of the CLI');
      return 'installed from Debian';
    });
    // apps/gateway/test/medium/audit-sinks-syslog.medium.ts streams the audit log to a real rsyslogd
    // over TCP and TLS (GnuTLS driver); the test starts it with a configuration of its own.
    await step('rsyslog (audit sink tests)', () => {
      const gnutls = run('sh', ['-c', 'ls /usr/lib/*/rsyslog/lmnsd_gtls.so']).ok;
      if (has('rsyslogd') && gnutls) return 'present';
      aptInstall(['rsyslog', 'rsyslog-gnutls'], 'The audit sink tests');
      return 'installed rsyslog and rsyslog-gnutls from Debian';
    });
    // test/medium/observability.medium.ts checks deploy/observability with promtool and a real Prometheus.
    await step('Prometheus and promtool (alert rule and dashboard tests)', () => {
      if (has('promtool') && has('prometheus')) return 'present';
      aptInstall(['prometheus'], 'The alert rule and dashboard tests');
      return 'installed prometheus from Debian';
    });
    // test/support/git-servers.ts serves repositories over ssh:// with its own sshd on a loopback port.
    await step('OpenSSH server (ssh:// repository tests)', (log) => ensureSshd({ log }));
    // test/unit/kubernetes.spec.ts renders deploy/kubernetes with `kubectl kustomize` (no cluster).
    await step('kubectl (Kubernetes manifest tests)', () => {
      if (has('kubectl') && run('kubectl', ['kustomize', '--help']).ok) return 'present';
      aptInstall(['kubernetes-client'], 'The Kubernetes manifest tests');
      return 'installed kubernetes-client from Debian';
    });
    // The environment tests' Python index is seeded with wheels built from Debian's Python packages
    // (test/support/mirrors): python3 builds them, apt-get downloads and dpkg-deb unpacks the packages.
    // The mirrors' medium test installs from that index into a virtual environment of Debian's python3.
    await step('Python and dpkg-deb (package mirrors of the environment tests)', () => {
      const venv = run('/usr/bin/python3', ['-c', 'import ensurepip, venv']).ok;
      const missing = [has('python3') ? null : 'python3', has('dpkg-deb') ? null : 'dpkg', venv ? null : 'python3-venv'].filter(Boolean);
      if (missing.length === 0) return 'present';
      aptInstall(missing, 'The package mirrors of the environment tests');
      return `installed ${missing.join(', ')} from Debian`;
    });
    // test/e2e/compose.e2e.ts brings deploy/compose up with Debian's docker-compose, from the platform
    // image built offline from this build (rebuilt only when the build output changed).
    await step('docker-compose (compose deployment test)', () => {
      if (has('docker-compose')) return 'present';
      aptInstall(['docker-compose'], 'The compose deployment test');
      return 'installed docker-compose from Debian';
    });
    await step('platform image (compose deployment test)', (log) => ensurePlatformImage(ROOT, { log }).note);
  }
  return { image, dockerfileImage };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await setup({ forTests: process.argv.includes('--tests') });
}
