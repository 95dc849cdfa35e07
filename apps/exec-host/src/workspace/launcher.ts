import { spawn, type ChildProcess } from 'node:child_process';

/**
 * Where the exec-host's own processes (git, on every change read, accept and patch) are started.
 *
 * Starting a process from Node forks the whole exec-host first, and a fork costs in proportion to the
 * memory it maps: about 5 ms of the exec-host's one thread per git process once it serves a few dozen
 * sandboxes, against under 1 ms from a process of a few dozen MiB. So the exec-host hands each start to
 * a small helper of its own (a Node process holding nothing but this loop), which starts the process,
 * gathers its output and sends it back over an IPC channel. The helper gets the exact environment,
 * directory, input and time limit of each request and has no environment of its own beyond `PATH`:
 * nothing of the exec-host (its token, its keys) reaches it or the processes it starts.
 */
export interface LaunchRequest {
  file: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  input: string | Buffer;
  /** Killed with SIGKILL once this is over. */
  timeoutMs: number;
}

export interface LaunchResult {
  /** The exit code; -1 when the process was killed by a signal. */
  code: number;
  stdout: Buffer;
  stderr: Buffer;
}

/** The process could not be started (ENOENT, EACCES…): `code` is the system's. */
export class LaunchError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

export interface Launcher {
  run(req: LaunchRequest): Promise<LaunchResult>;
}

/** Starts the process from this one: what every caller did before, and the fallback. */
export function launchHere(req: LaunchRequest): Promise<LaunchResult> {
  return new Promise((resolve, reject) => {
    let child: ChildProcess;
    try {
      child = spawn(req.file, req.args, { env: req.env, cwd: req.cwd, stdio: ['pipe', 'pipe', 'pipe'], timeout: req.timeoutMs, killSignal: 'SIGKILL' });
    } catch (e) {
      reject(new LaunchError((e as Error).message, (e as NodeJS.ErrnoException).code));
      return;
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let failed = false;
    child.stdout!.on('data', (b: Buffer) => out.push(b));
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e: NodeJS.ErrnoException) => {
      failed = true;
      reject(new LaunchError(e.message, e.code));
    });
    child.stdin!.on('error', () => undefined);
    child.on('close', (code) => {
      if (!failed) resolve({ code: code ?? -1, stdout: Buffer.concat(out), stderr: Buffer.concat(err) });
    });
    child.stdin!.end(req.input);
  });
}

/**
 * The helper's whole program (plain JavaScript, run with `node -e`, so it needs no file of its own
 * beside the compiled exec-host nor a loader under the test runner). It ends when its parent goes:
 * the IPC channel closes with it.
 */
const HELPER = `
'use strict';
const { spawn } = require('node:child_process');
// Its own mask, whatever the exec-host's was at the moment it was started (it sets 0177 around the
// creation of its socket): what git creates in a working copy must be readable by the sandbox user.
process.umask(0o022);
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  const reply = (r) => { if (process.connected) process.send(r); };
  let child;
  try {
    child = spawn(m.file, m.args, { env: m.env, cwd: m.cwd, stdio: ['pipe', 'pipe', 'pipe'], timeout: m.timeoutMs, killSignal: 'SIGKILL' });
  } catch (e) {
    reply({ id: m.id, error: { message: String((e && e.message) || e), code: e && e.code } });
    return;
  }
  const out = [];
  const err = [];
  let failed = false;
  child.stdout.on('data', (b) => out.push(b));
  child.stderr.on('data', (b) => err.push(b));
  child.on('error', (e) => { failed = true; reply({ id: m.id, error: { message: e.message, code: e.code } }); });
  child.stdin.on('error', () => {});
  child.on('close', (code) => { if (!failed) reply({ id: m.id, code: code === null ? -1 : code, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }); });
  child.stdin.end(m.input);
});
`;

type Reply = { id: number; error: { message: string; code?: string } } | { id: number; code: number; stdout: Uint8Array; stderr: Uint8Array };

const asBuffer = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));

/**
 * Starts processes through the helper, started on first use and again after it is lost. Requests in
 * flight when the helper stops are refused with a sentence (their process may or may not have run to
 * its end; the callers' operations fail as any failed git does); when the helper cannot be started at
 * all, processes are started from this one.
 */
export class HelperLauncher implements Launcher {
  private helper: ChildProcess | null = null;
  private readonly inFlight = new Map<number, { resolve: (r: LaunchResult) => void; reject: (e: Error) => void; file: string }>();
  private nextId = 1;
  private closed = false;

  /** The helper's pid while it runs (tests). */
  get pid(): number | undefined {
    return this.helper?.pid;
  }

  run(req: LaunchRequest): Promise<LaunchResult> {
    const helper = this.closed ? null : (this.helper ?? this.start());
    if (!helper) return launchHere(req);
    const id = this.nextId++;
    return new Promise<LaunchResult>((resolve, reject) => {
      // The channel keeps this process running only while an answer is awaited.
      if (this.inFlight.size === 0) channelOf(helper)?.ref();
      this.inFlight.set(id, { resolve, reject, file: req.file });
      helper.send({ id, ...req }, (err) => {
        if (!err) return;
        this.inFlight.delete(id);
        if (this.inFlight.size === 0) channelOf(helper)?.unref();
        reject(new LaunchError(`The exec-host could not hand ${req.file} to its process helper: ${err.message}.`));
      });
    });
  }

  close(): void {
    this.closed = true;
    this.helper?.kill('SIGKILL');
    this.helper = null;
  }

  private start(): ChildProcess | null {
    let helper: ChildProcess;
    try {
      helper = spawn(process.execPath, ['--max-old-space-size=64', '--max-semi-space-size=1', '-e', HELPER], {
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
        serialization: 'advanced',
        env: { PATH: process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin' },
      });
    } catch {
      return null;
    }
    if (helper.pid === undefined) return null;
    this.helper = helper;
    helper.on('message', (m: Reply) => {
      const waiting = this.inFlight.get(m.id);
      if (!waiting) return;
      this.inFlight.delete(m.id);
      if (this.inFlight.size === 0) channelOf(helper)?.unref();
      if ('error' in m) waiting.reject(new LaunchError(m.error.message, m.error.code));
      else waiting.resolve({ code: m.code, stdout: asBuffer(m.stdout), stderr: asBuffer(m.stderr) });
    });
    helper.on('error', () => undefined);
    helper.on('exit', (code, signal) => {
      if (this.helper === helper) this.helper = null;
      for (const [id, waiting] of this.inFlight) {
        this.inFlight.delete(id);
        waiting.reject(new LaunchError(`The exec-host's process helper stopped (${signal ?? `exit ${code}`}) while ${waiting.file} ran; it was not finished.`));
      }
    });
    // Neither the helper nor its channel keeps the exec-host (or a test) running.
    helper.unref();
    channelOf(helper)?.unref();
    return helper;
  }
}

function channelOf(helper: ChildProcess): { ref(): void; unref(): void } | undefined {
  return helper.channel as { ref(): void; unref(): void } | undefined;
}

let shared: { launcher: HelperLauncher; holders: number } | null = null;

/** The launcher git goes through: the shared helper while an exec-host holds it, else this process. */
export function currentLauncher(): Launcher {
  return shared?.launcher ?? { run: launchHere };
}

/**
 * Holds the shared helper for one exec-host (several may run in one process: tests); the last to let
 * go stops it. Answers the release.
 */
export function holdLauncher(): () => void {
  shared ??= { launcher: new HelperLauncher(), holders: 0 };
  const held = shared;
  held.holders++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    held.holders--;
    if (held.holders === 0 && shared === held) {
      held.launcher.close();
      shared = null;
    }
  };
}
