// OpenSSH's server for the tests that fetch project repositories over ssh:// (test/support/git-servers.ts
// runs its own /usr/sbin/sshd on a free loopback port with its own configuration, host key and client key).
// The machine's own ssh service is never wanted: the package's postinst would start it on port 22 and
// enable it, so the install runs under a policy-rc.d that denies service starts, Debian's
// /etc/ssh/sshd_not_to_be_run keeps the init script and ssh.service from ever starting it, and under a
// running systemd the units are disabled and stopped.
import * as fs from 'node:fs';
import { run, has, isRoot, SetupError } from './sh.mjs';
import { aptInstall } from './engine.mjs';

export const SSHD = '/usr/sbin/sshd';
const POLICY_RC = '/usr/sbin/policy-rc.d';
const NOT_TO_BE_RUN = '/etc/ssh/sshd_not_to_be_run';

function executable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function ensureSshd({ log }) {
  if (executable(SSHD)) return `${SSHD} present`;
  if (!isRoot()) throw new SetupError(`The ssh:// repository tests need ${SSHD}: install Debian's openssh-server package (as root: apt-get install -y openssh-server).`);
  log('installing openssh-server from Debian (its system service stays off)');
  fs.mkdirSync('/etc/ssh', { recursive: true });
  fs.writeFileSync(NOT_TO_BE_RUN, "Lemniscate's test set-up installed openssh-server for its tests only; remove this file to run the system's sshd.\n");
  const ownPolicy = !fs.existsSync(POLICY_RC);
  if (ownPolicy) fs.writeFileSync(POLICY_RC, "#!/bin/sh\n# Lemniscate's test set-up: no service starts while it installs packages.\nexit 101\n", { mode: 0o755 });
  try {
    aptInstall(['openssh-server'], 'The ssh:// repository tests');
  } finally {
    if (ownPolicy) fs.rmSync(POLICY_RC, { force: true });
  }
  if (fs.existsSync('/run/systemd/system') && has('systemctl')) run('systemctl', ['disable', '--now', 'ssh.service', 'ssh.socket']);
  if (!executable(SSHD)) throw new SetupError(`openssh-server is installed but ${SSHD} is missing.`);
  return `installed openssh-server from Debian; its service is off (${NOT_TO_BE_RUN})`;
}
