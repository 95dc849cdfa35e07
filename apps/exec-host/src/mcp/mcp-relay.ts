import { randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { ExecExit, McpExit, McpMessage, McpMessageResponse, McpOpenRequest } from '@lemniscate/contracts';
import { ExecHostError } from '../errors';

/** The longest line a server may write: one JSON-RPC message. Past it the server is ended. */
export const MAX_MCP_LINE_BYTES = 8 * 1024 * 1024;
/** How much of the server's stderr is kept, from its end, for the report of how it ended. */
const STDERR_TAIL_CHARS = 4096;
/** After its stdin closes, a server has this long to end on its own before it is killed. */
const CLOSE_GRACE_MS = 2_000;
/** An ended process is kept this long for the gateway to read how it ended, then forgotten. */
const KEEP_ENDED_MS = 60_000;

type Exit = Omit<ExecExit, 'type'>;

/** How the relay runs a command with stdin attached: the sandbox service's exec, as every command runs. */
export interface McpCommandRunner {
  /** How much a command of this sandbox may write (stdout and stderr together) before its output is cut. */
  outputCap(sandboxId: string): number;
  run(sandboxId: string, command: string, timeoutMs: number, io: { stdin: NodeJS.ReadableStream; onOutput(stream: 'stdout' | 'stderr', text: string): void }, signal: AbortSignal): Promise<Exit>;
}

/** Quoted for bash: the argv the administrator wrote reaches the server exactly, never re-parsed. */
export function shellQuote(arg: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * The command that starts a server: its data segment capped (RLIMIT_DATA, which the sandbox user
 * cannot raise; the sandbox's own memory cap still holds above it), then the argv in place of the shell.
 */
export function mcpCommand(argv: readonly string[], memoryMb: number): string {
  return `ulimit -d ${memoryMb * 1024}\nexec ${argv.map(shellQuote).join(' ')}`;
}

function isResponse(m: McpMessage): boolean {
  return m.id !== undefined && m.method === undefined;
}

function isRequest(m: McpMessage): boolean {
  return m.id !== undefined && typeof m.method === 'string';
}

/** One server process: its stdin, what it wrote that nobody has read yet, and how it ended. */
class McpProcess {
  readonly stdin = new PassThrough();
  readonly abort = new AbortController();
  exit: McpExit | null = null;
  done: Promise<McpExit> = Promise.resolve({ exitCode: null, class: null, stderr: '', dropped: 0 });
  private inbox: McpMessage[] = [];
  /** Ids of the responses received, read or not: a waiter whose answer another request took still wakes. */
  private readonly answered = new Set<string | number>();
  private partial = '';
  private stderr = '';
  private dropped = 0;
  private written = 0;
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly id: string,
    readonly sandboxId: string,
    readonly server: string,
    private readonly outputCap: number,
  ) {}

  /**
   * Past the sandbox's output cap the exec stops passing what the server writes, so no answer could
   * arrive any more: the server is ended at once and says why, rather than waiting for its time limit.
   */
  private count(text: string): void {
    this.written += Buffer.byteLength(text);
    if (this.written >= this.outputCap && !this.abort.signal.aborted) {
      this.stderr = `${this.stderr}\n[the server wrote more than the sandbox's output cap of ${this.outputCap} bytes and was ended]`.slice(-STDERR_TAIL_CHARS);
      this.abort.abort();
    }
  }

  onStdout(text: string): void {
    this.count(text);
    this.partial += text;
    let nl: number;
    while ((nl = this.partial.indexOf('\n')) >= 0) {
      const line = this.partial.slice(0, nl).replace(/\r$/, '');
      this.partial = this.partial.slice(nl + 1);
      if (line.trim() !== '') this.take(line);
    }
    if (Buffer.byteLength(this.partial) > MAX_MCP_LINE_BYTES) {
      this.partial = '';
      this.stderr = `${this.stderr}\n[the server wrote a line over ${MAX_MCP_LINE_BYTES / 1024 / 1024} MiB on stdout and was ended]`.slice(-STDERR_TAIL_CHARS);
      this.abort.abort();
    }
  }

  onStderr(text: string): void {
    this.count(text);
    this.stderr = (this.stderr + text).slice(-STDERR_TAIL_CHARS);
  }

  ended(exit: Exit | null, error?: ExecHostError): void {
    this.exit = {
      exitCode: exit?.exitCode ?? null,
      class: exit?.class ?? null,
      stderr: this.stderr,
      dropped: this.dropped,
      ...(error ? { message: error.message } : exit?.message ? { message: exit.message } : {}),
    };
    this.stdin.destroy();
    this.notify();
  }

  /** Writes a message, then answers what arrived: at once, or when `waitFor` is answered, the server asks something, or it ends. */
  async exchange(message: McpMessage | undefined, waitFor: string | number | undefined): Promise<McpMessageResponse> {
    if (message && !this.exit) this.stdin.write(`${JSON.stringify(message)}\n`);
    if (waitFor !== undefined) {
      await new Promise<void>((resolve) => {
        const check = () => {
          if (this.exit || this.answered.has(waitFor) || this.inbox.some(isRequest)) {
            this.waiters.delete(check);
            resolve();
          }
        };
        this.waiters.add(check);
        check();
      });
    }
    const messages = this.inbox;
    this.inbox = [];
    return { messages, exited: this.exit };
  }

  /** Closes the server's stdin, gives it a moment to end on its own, then kills it. */
  async close(): Promise<McpExit> {
    if (!this.exit) {
      this.stdin.end();
      const timer = setTimeout(() => this.abort.abort(), CLOSE_GRACE_MS);
      timer.unref();
      // How it ended is in `exit` either way (a failure of the exec is recorded there too).
      await this.done.catch(() => undefined);
      clearTimeout(timer);
    }
    return this.exit as McpExit;
  }

  private take(line: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      this.dropped++;
      return;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || (parsed as McpMessage).jsonrpc !== '2.0') {
      this.dropped++;
      return;
    }
    const m = parsed as McpMessage;
    if (isResponse(m)) this.answered.add(m.id as string | number);
    this.inbox.push(m);
    this.notify();
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }
}

/**
 * Local MCP servers (AG7): each started inside its session's sandbox as a command with stdin, for one
 * call of the session or one listing of its tools, and relayed message by message to the gateway,
 * which speaks the protocol. While it runs no other command does (one at a time, S1), and when it
 * ends every process of the sandbox user goes with it, as after any command: nothing of a server runs
 * between the agent's actions, and what it wrote in the working copy is reviewed like a command's.
 */
export class McpRelay {
  private readonly processes = new Map<string, McpProcess>();

  constructor(private readonly runner: McpCommandRunner) {}

  open(sandboxId: string, req: McpOpenRequest): Promise<{ processId: string }> {
    const proc = new McpProcess(randomUUID(), sandboxId, req.server, this.runner.outputCap(sandboxId));
    const started = this.runner.run(
      sandboxId,
      mcpCommand(req.command, req.memoryMb),
      req.timeoutMs,
      {
        stdin: proc.stdin,
        onOutput: (stream, text) => (stream === 'stdout' ? proc.onStdout(text) : proc.onStderr(text)),
      },
      proc.abort.signal,
    );
    proc.done = started.then(
      (exit) => {
        proc.ended(exit);
        return proc.exit as McpExit;
      },
      (err: unknown) => {
        proc.ended(null, err instanceof ExecHostError ? err : new ExecHostError('internal', (err as Error).message));
        throw err;
      },
    );
    // A refusal before the server ran (an unknown sandbox, another command running, a lost sandbox)
    // comes before the exec's first wait, so within this turn: it is the answer to the start itself.
    // Once the server runs, how it ends is read through its messages.
    return new Promise((resolve, reject) => {
      let refused = false;
      proc.done.catch((err: unknown) => {
        refused = true;
        reject(err);
      });
      setImmediate(() => {
        if (refused) return;
        this.processes.set(proc.id, proc);
        void proc.done.catch(() => undefined).finally(() => setTimeout(() => this.processes.delete(proc.id), KEEP_ENDED_MS).unref());
        resolve({ processId: proc.id });
      });
    });
  }

  exchange(sandboxId: string, processId: string, message: McpMessage | undefined, waitFor: string | number | undefined): Promise<McpMessageResponse> {
    return this.find(sandboxId, processId).exchange(message, waitFor);
  }

  async close(sandboxId: string, processId: string): Promise<McpExit> {
    const proc = this.find(sandboxId, processId);
    const exit = await proc.close();
    this.processes.delete(processId);
    return exit;
  }

  /** Running server processes (metrics, tests). */
  running(): number {
    return [...this.processes.values()].filter((p) => !p.exit).length;
  }

  private find(sandboxId: string, processId: string): McpProcess {
    const proc = this.processes.get(processId);
    if (!proc || proc.sandboxId !== sandboxId)
      throw new ExecHostError('mcp_process_not_found', `No MCP server process ${processId} in sandbox ${sandboxId}: it was never started here, or it ended more than a minute ago.`);
    return proc;
  }
}
