import { spawnSync, type ChildProcess } from 'node:child_process';
import { containersOf, type Stack } from '../e2e/harness';

/** One event of `lemni -p … --output-format stream-json` (the WebSocket event types, then `result`). */
export interface Event {
  type: string;
  sessionId?: string;
  [key: string]: any;
}

export interface Run {
  child: ChildProcess;
  events: Event[];
  /** Everything the CLI printed, as printed. */
  stdout: string;
  stderr: string;
  sessionId: string;
  /** The CLI's exit code, once it has exited. */
  exited: Promise<number | null>;
  /** The first event (already seen or still to come) that matches; fails after `timeoutMs`. */
  until(match: (event: Event) => boolean, what: string, timeoutMs?: number): Promise<Event>;
}

const live = new Set<ChildProcess>();

/** Ends every CLI a test started that is still running (a failed test must not keep jest alive). */
export function endRuns(): void {
  for (const child of live) child.kill('SIGKILL');
  live.clear();
}

/**
 * Starts `lemni -p … --output-format stream-json --no-apply` and collects its events as they arrive.
 * `answer` approves or rejects each approval request through the API, as a person at the console
 * would; returning undefined leaves the request pending.
 */
export function startRun(stack: Stack, args: string[], options: { env?: Record<string, string>; waitForApprovals?: boolean; answer?: (event: Event) => 'approve' | 'reject' | undefined } = {}): Run {
  const child = stack.spawnCli(['--output-format', 'stream-json', '--no-apply', ...(options.waitForApprovals || options.answer ? ['--wait-for-approvals'] : []), ...args], { env: options.env });
  child.stdin!.end();
  live.add(child);
  child.once('close', () => live.delete(child));
  const waiters: { match: (e: Event) => boolean; resolve: (e: Event) => void }[] = [];
  const run: Run = {
    child,
    events: [],
    stdout: '',
    stderr: '',
    sessionId: '',
    exited: new Promise((resolve) => child.on('close', (code) => resolve(code))),
    until(match, what, timeoutMs = 60_000) {
      const seen = run.events.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`No ${what} within ${timeoutMs / 1000} s; events: ${run.events.map((e) => e.type).join(', ')}; stderr: ${run.stderr}`)), timeoutMs);
        waiters.push({
          match,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
      });
    },
  };
  let buffered = '';
  child.stderr!.on('data', (d) => (run.stderr += d));
  child.stdout!.on('data', (d: Buffer) => {
    run.stdout += d.toString();
    buffered += d.toString();
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!line.trim()) continue;
      const event = JSON.parse(line) as Event;
      run.events.push(event);
      if (!run.sessionId && event.sessionId) run.sessionId = event.sessionId;
      if (event.type === 'approval_requested' && options.answer) {
        const verdict = options.answer(event);
        if (verdict) void stack.api(stack.tokens.developer, 'POST', `/approvals/${event.approvalId}/${verdict}`, {});
      }
      for (const w of [...waiters]) {
        if (w.match(event)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(event);
        }
      }
    }
  });
  return run;
}

/** The `n`th proposal of a tool call the run shows (1-based), as a matcher for `until`. */
export function nthProposal(run: Run, n: number): (event: Event) => boolean {
  return (event) => event.type === 'tool_call_proposed' && run.events.filter((e) => e.type === 'tool_call_proposed').indexOf(event) === n - 1;
}

/** The session's terminal event: stream-json ends with it and then one `result` line (L4). */
export function terminal(run: Run): Event | undefined {
  return run.events.filter((e) => e.type !== 'result').at(-1);
}

export interface AuditEntry {
  seq: number;
  kind: string;
  actor: string;
  sessionId: string | null;
  payload: any;
}

/** Every audit entry of a session, oldest first (read as the project's security officer). */
export async function auditOf(stack: Stack, sessionId: string): Promise<AuditEntry[]> {
  const r = await stack.api(stack.tokens.security, 'GET', `/audit?sessionId=${sessionId}&order=asc&limit=1000`);
  if (r.status !== 200) throw new Error(`audit: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json as AuditEntry[];
}

/** The audit chain is intact (verify walks it from the first entry). */
export async function auditIntact(stack: Stack): Promise<boolean> {
  const r = await stack.api(stack.tokens.security, 'GET', '/audit/verify');
  if (r.status !== 200) throw new Error(`audit verify: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json.ok === true;
}

/** A session as the API reports it. */
export async function sessionOf(stack: Stack, sessionId: string): Promise<any> {
  const r = await stack.api(stack.tokens.developer, 'GET', `/sessions/${sessionId}`);
  if (r.status !== 200) throw new Error(`session: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json;
}

/** The session's approvals, oldest first. */
export async function approvalsOf(stack: Stack, sessionId: string): Promise<any[]> {
  const r = await stack.api(stack.tokens.developer, 'GET', `/approvals?sessionId=${sessionId}`);
  if (r.status !== 200) throw new Error(`approvals: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json as any[];
}

/** Polls `check` every 200 ms until it returns true; fails with `what` after `timeoutMs`. */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`Not within ${timeoutMs / 1000} s: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The command lines of the processes running in a container (`docker top`), empty once it is gone. */
export function processesIn(containerId: string): string[] {
  const r = spawnSync('docker', ['top', containerId, '-o', 'pid,args'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.split('\n').slice(1).filter(Boolean) : [];
}

/** Waits until a process whose command line matches runs in one of the session's containers. */
export async function untilRunning(sessionId: string, pattern: RegExp, timeoutMs = 60_000): Promise<string> {
  let found = '';
  await eventually(
    () => {
      for (const id of containersOf(sessionId)) {
        if (processesIn(id).some((p) => pattern.test(p))) found = id;
      }
      return found !== '';
    },
    `a process matching ${pattern} in a container of session ${sessionId}`,
    timeoutMs,
  );
  return found;
}
