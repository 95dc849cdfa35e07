import type Docker from 'dockerode';
import { EventEmitter } from 'node:events';
import { PassThrough, type Duplex } from 'node:stream';
import { toExecOptions } from './seccomp-launcher';

/**
 * The sandbox's runner (images/sandbox/sandbox-runner.c, docs/decisions/0016): one process per
 * sandbox, started by one engine exec as the sandbox user, that starts every later command with a
 * fork and an exec and kills what a command left with kill(-1). This file is the exec-host's side of
 * its frames: one type byte, the payload's length (4 bytes, big-endian), the payload.
 */
export const SANDBOX_RUNNER = '/usr/local/lib/lemniscate/sandbox-runner';

/** The longest frame the runner takes (its MAX_FRAME); a longer command is run the engine's way. */
export const RUNNER_MAX_FRAME = 4 * 1024 * 1024;

/** How long a runner may take to say it is ready, and a kill to be over, before the engine's way is taken. */
const READY_MS = 10_000;
const KILL_MS = 10_000;

export function encodeFrame(type: 'C' | 'K', payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

export interface Frame {
  type: string;
  payload: Buffer;
}

/** Splits the runner's output into frames, however the engine's stream cut it. */
export class FrameReader {
  private buffered: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const frames: Frame[] = [];
    while (this.buffered.length >= 5) {
      const length = this.buffered.readUInt32BE(1);
      if (this.buffered.length < 5 + length) break;
      frames.push({ type: String.fromCharCode(this.buffered[0]!), payload: this.buffered.subarray(5, 5 + length) });
      this.buffered = this.buffered.subarray(5 + length);
    }
    return frames;
  }
}

/**
 * How the runner is started (under runc only, docs/decisions/0016): the same user, working directory
 * and environment as an engine exec of one command (toExecOptions), the same `bash -c` in front of
 * each command, and stdin attached for the frames.
 */
export function runnerExecOptions(runnerPath = SANDBOX_RUNNER): Docker.ExecCreateOptions {
  const one = toExecOptions('', 'runc', null, null, true);
  const program = (one.Cmd ?? []).slice(0, -1);
  return { ...one, Cmd: [runnerPath, ...program] };
}

export class RunnerLost extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunnerLost';
  }
}

interface Running {
  onStdout: (chunk: Buffer) => void;
  onStderr: (chunk: Buffer) => void;
  resolve: (exitCode: number) => void;
  reject: (e: Error) => void;
}

/** One sandbox's runner, seen from the exec-host: one command at a time, and the kill. */
export class SandboxRunner {
  private readonly reader = new FrameReader();
  private readonly events = new EventEmitter();
  private running: Running | null = null;
  private kills: { resolve: (left: boolean) => void; reject: (e: Error) => void }[] = [];
  private lostReason: string | null = null;
  private stderr = '';

  private constructor(private readonly stream: Duplex) {
    stream.on('error', () => this.lose('its connection failed'));
    stream.on('close', () => this.lose('its connection closed'));
    stream.on('end', () => this.lose('its connection ended'));
  }

  /**
   * Starts the runner in a running container; null when the image has none (or it does not start):
   * that sandbox's commands then go the engine's way.
   */
  static async start(docker: Docker, containerId: string, options: Docker.ExecCreateOptions): Promise<SandboxRunner | null> {
    const exec = await docker.getContainer(containerId).exec(options);
    const stream = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
    const runner = new SandboxRunner(stream);
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    stdout.on('data', (b: Buffer) => runner.take(b));
    stderr.on('data', (b: Buffer) => {
      if (runner.stderr.length < 4096) runner.stderr += b.toString('utf8');
    });
    docker.modem.demuxStream(stream, stdout, stderr);
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), READY_MS);
      runner.events.once('ready', () => {
        clearTimeout(timer);
        resolve(true);
      });
      runner.events.once('lost', () => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    if (!ready) {
      runner.close();
      return null;
    }
    return runner;
  }

  get alive(): boolean {
    return this.lostReason === null;
  }

  /** Why the runner is gone, with what it said last, for the exec-host's log. */
  get reason(): string {
    const said = this.stderr.trim();
    return `${this.lostReason ?? 'it is running'}${said ? ` (it said: ${said.slice(0, 300)})` : ''}`;
  }

  /** Runs one command; resolves with its exit code (128 + signal when a signal ended it). */
  run(command: string, onStdout: (chunk: Buffer) => void, onStderr: (chunk: Buffer) => void): Promise<number> {
    if (!this.alive) return Promise.reject(new RunnerLost(this.reason));
    if (this.running) return Promise.reject(new Error('The runner is already running a command.'));
    return new Promise<number>((resolve, reject) => {
      this.running = { onStdout, onStderr, resolve, reject };
      this.stream.write(encodeFrame('C', Buffer.from(command, 'utf8')));
    });
  }

  /**
   * Kills every process of the sandbox user but the runner; resolves once none is left. Rejects when
   * something was still left after every round, when the runner is gone, or when it does not answer
   * in time (stopped by a command): the caller then kills the engine's way.
   */
  kill(): Promise<void> {
    if (!this.alive) return Promise.reject(new RunnerLost(this.reason));
    return new Promise<void>((resolve, reject) => {
      // Closing it rejects this kill, and any command waiting, with the reason.
      const timer = setTimeout(() => this.close('it did not answer the kill in time'), KILL_MS);
      this.kills.push({
        resolve: (left) => {
          clearTimeout(timer);
          if (left) reject(new Error('A process of the sandbox user was still there after every kill round.'));
          else resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.stream.write(encodeFrame('K'));
    });
  }

  /** Closes its stdin: the runner kills what is left and exits. */
  close(reason = 'the exec-host closed it'): void {
    this.lose(reason);
    this.stream.destroy();
  }

  private take(chunk: Buffer): void {
    for (const frame of this.reader.push(chunk)) {
      switch (frame.type) {
        case 'R':
          this.events.emit('ready');
          break;
        case 'O':
          this.running?.onStdout(Buffer.from(frame.payload));
          break;
        case 'E':
          this.running?.onStderr(Buffer.from(frame.payload));
          break;
        case 'X': {
          const running = this.running;
          this.running = null;
          running?.resolve(frame.payload.readUInt32BE(0));
          break;
        }
        case 'F': {
          const running = this.running;
          this.running = null;
          running?.reject(new Error(frame.payload.toString('utf8')));
          break;
        }
        case 'k':
          this.kills.shift()?.resolve(frame.payload[0] !== 0);
          break;
        default:
          this.lose(`it sent a frame of unknown type ${JSON.stringify(frame.type)}`);
          this.stream.destroy();
      }
    }
  }

  private lose(reason: string): void {
    if (this.lostReason !== null) return;
    this.lostReason = reason;
    this.events.emit('lost');
    const error = new RunnerLost(this.reason);
    const running = this.running;
    this.running = null;
    running?.reject(error);
    for (const k of this.kills.splice(0)) k.reject(error);
  }
}
