// Small process helpers for the setup scripts. Plain Node, no dependencies: these run before `npm ci`.
import { spawnSync, spawn } from 'node:child_process';
import * as nodeFs from 'node:fs';

/** Runs a command, returns { ok, code, stdout, stderr } without throwing. */
export function run(cmd, args = [], opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  return { ok: r.status === 0, code: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', error: r.error };
}

/** Runs a command with inherited output; throws a SetupError with `sentence` when it fails. */
export function mustRun(cmd, args, sentence, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: opts.quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit', encoding: 'utf8', ...opts });
  if (r.status !== 0) {
    const tail = opts.quiet ? `\n${(r.stderr || r.stdout || '').split('\n').slice(-15).join('\n')}` : '';
    throw new SetupError(`${sentence} (\`${cmd} ${args.join(' ')}\` exited with ${r.status ?? r.error?.message})${tail}`);
  }
  return r;
}

export function has(cmd) {
  return run('sh', ['-c', `command -v ${cmd}`]).ok;
}

export function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

export class SetupError extends Error {}

export async function waitFor(check, { timeoutMs, intervalMs = 250, what }) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new SetupError(`${what} did not become ready within ${Math.round(timeoutMs / 1000)} s.`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Starts a long-lived daemon fully detached from this process (own session, output to a log file). */
export function startDaemon(cmd, args, logFile, opts = {}) {
  const fs = nodeFs;
  const fd = fs.openSync(logFile, 'a');
  const child = spawn(cmd, args, { detached: true, stdio: ['ignore', fd, fd], ...opts });
  child.unref();
  fs.closeSync(fd);
  return child.pid;
}

