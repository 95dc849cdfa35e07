// Shared by the session benchmarks (bench/README.md, "Sessions"): percentiles, the CLI's stream-json
// lines with the time each arrived, and the CPU time of the processes that serve a run.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN;
}

export function ms(value: number): string {
  return Number.isFinite(value) ? `${value < 10 ? value.toFixed(1) : Math.round(value)} ms` : 'n/a';
}

/** One line of a CLI's `--output-format stream-json`, with when it arrived (performance.now()). */
export interface TimedEvent {
  at: number;
  event: { type: string; callId?: string; [key: string]: unknown };
}

export interface CliRun {
  code: number | null;
  events: TimedEvent[];
  stderr: string;
}

/** Reads a CLI's stream-json output line by line until it exits. */
export function collectCli(child: ChildProcess, onEvent?: (event: TimedEvent['event']) => void): Promise<CliRun> {
  const run: CliRun = { code: null, events: [], stderr: '' };
  let buffered = '';
  child.stderr!.on('data', (d: Buffer) => (run.stderr += d.toString()));
  child.stdout!.on('data', (d: Buffer) => {
    const at = performance.now();
    buffered += d.toString();
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!line.trim()) continue;
      const event = JSON.parse(line) as TimedEvent['event'];
      run.events.push({ at, event });
      onEvent?.(event);
    }
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ ...run, code })));
}

/**
 * The time of each call as the developer's terminal sees it: from its `tool_call_proposed` line to
 * the next call's (or, for the last call, to the next line after its result: the model's final text
 * or the session's end). That is the whole cycle of one call: the proposal recorded, policy, audit,
 * the command in its sandbox, the review of the working copy, the result recorded, the next model turn.
 */
export function callCycles(events: TimedEvent[]): { callId: string; ms: number; name: string }[] {
  const cycles: { callId: string; ms: number; name: string }[] = [];
  let open: { callId: string; at: number; name: string } | null = null;
  let resultSeen = false;
  for (const { at, event } of events) {
    if (event.type === 'tool_call_proposed') {
      if (open) cycles.push({ callId: open.callId, ms: at - open.at, name: open.name });
      open = { callId: String(event.callId), at, name: String(event['name']) };
      resultSeen = false;
    } else if (open && event.type === 'tool_result' && event.callId === open.callId) {
      resultSeen = true;
    } else if (open && resultSeen && (event.type === 'model_text' || event.type.startsWith('session_'))) {
      cycles.push({ callId: open.callId, ms: at - open.at, name: open.name });
      open = null;
    }
  }
  return cycles;
}

/** CPU time (user + system, children reaped included) of one process, in milliseconds; 0 once it is gone. */
export function processCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime, stime, cutime, cstime are fields 14–17 of the whole line: 12–15 after pid and comm.
    const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    return (ticks * 1000) / clockTicksPerSecond();
  } catch {
    return 0;
  }
}

/**
 * CPU time of a process and of every live process under it (each with its own reaped children): a
 * process that hands work to a helper of its own (the exec-host's process helper, which starts git) is
 * charged for it, before and after the helper reaps what it started.
 */
export function treeCpuMs(pid: number): number {
  let children: string[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  } catch {
    // gone, or a kernel without the children list: the process alone
  }
  return processCpuMs(pid) + children.reduce((sum, child) => sum + treeCpuMs(Number(child)), 0);
}

/** Every process whose command name is one of `names` (dockerd, containerd, the containers' shims). */
export function pidsNamed(names: RegExp): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (names.test(readFileSync(`/proc/${entry}/comm`, 'utf8').trim())) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** A shim's container id, from its command line (`containerd-shim-runc-v2 -namespace moby -id <id> …`). */
export function shimContainer(pid: number): string | null {
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const i = args.indexOf('-id');
    return i >= 0 ? (args[i + 1] ?? null) : null;
  } catch {
    return null;
  }
}

let ticks: number | undefined;
/** The kernel's clock ticks per second, the unit of /proc/<pid>/stat's CPU times. */
function clockTicksPerSecond(): number {
  ticks ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  return ticks;
}
