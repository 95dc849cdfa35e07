import type { SessionEvent } from '@lemniscate/contracts';
import pc from 'picocolors';

function oneLine(text: string, max = 160): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** A tool call as a person reads it: the command for Bash, the path for file tools. */
export function describeCall(name: string, args: Record<string, unknown>): string {
  const pick = (k: string) => (typeof args[k] === 'string' ? (args[k] as string) : undefined);
  const subject = pick('command') ?? pick('path') ?? pick('pattern') ?? pick('agent') ?? pick('task_id') ?? pick('question');
  return subject === undefined ? name : `${name} ${oneLine(subject)}`;
}

/**
 * A coloured unified diff. Third-party files (CI configuration, build scripts, manifests…, P5) are
 * flagged on their header line so they cannot be missed in a long diff.
 */
export function colourDiff(diff: string, thirdParty: ReadonlySet<string> = new Set()): string {
  return diff
    .split('\n')
    .map((line) => {
      if (line.startsWith('diff --git ')) {
        const path = /^diff --git a\/(.+?) b\//.exec(line)?.[1];
        const flag = path && thirdParty.has(path) ? ` ${pc.bgRed(pc.white(' THIRD-PARTY FILE '))}` : '';
        return pc.bold(line) + flag;
      }
      if (line.startsWith('+++') || line.startsWith('---')) return pc.bold(line);
      if (line.startsWith('@@')) return pc.cyan(line);
      if (line.startsWith('+')) return pc.green(line);
      if (line.startsWith('-')) return pc.red(line);
      return line;
    })
    .join('\n');
}

function lastLines(text: string, n: number): string {
  return text.trim().split('\n').slice(-n).join('\n');
}

/** Lines that mark where a test run or a build says what failed. */
const FAILURE_LINE = /(^|\s)(FAIL|FAILED|ERROR|Error:|error:|error\[|✕|✗|×|●|not ok|AssertionError|Traceback|panic:|Expected|expected)/;

/**
 * What a failed command said about its failure: from the first line that reads like one (a failing
 * test's name, an error), up to 15 lines; otherwise the end of its error output. The last three lines
 * of a test run are its summary ("Tests: 1 failed"), which says that it failed, not why.
 */
export function failureExcerpt(stdout: string, stderr: string, max = 15): string {
  for (const text of [stderr, stdout]) {
    const lines = text.replace(/\r/g, '').split('\n');
    const first = lines.findIndex((l) => FAILURE_LINE.test(l));
    if (first >= 0) {
      const shown = lines.slice(first, first + max);
      while (shown.length > 0 && (shown.at(-1) as string).trim() === '') shown.pop();
      return shown.join('\n') + (lines.length > first + max && lines.slice(first + max).some((l) => l.trim() !== '') ? '\n…' : '');
    }
  }
  return lastLines(stderr || stdout, 10);
}

/**
 * One line describing an event for a person, or null for events that need no line. `calls` and
 * `subagents` are the follower's memory of the stream: proposed calls and subagent names, learnt here.
 */
export function describeEvent(event: SessionEvent, calls: Map<string, string>, subagents?: Map<string, string>): string | null {
  if (event.type === 'subagent_started') subagents?.set(event.childSessionId, event.agent);
  // A subagent's events carry its session id; its name is known from the `subagent_started` before them.
  const agent = 'agent' in event && typeof event.agent === 'string' ? event.agent : event.subSessionId ? (subagents?.get(event.subSessionId) ?? 'subagent') : null;
  const who = agent && agent !== 'main' && event.type !== 'subagent_started' && event.type !== 'subagent_refused' && event.type !== 'subagent_finished' ? pc.dim(`[${agent}] `) : '';
  switch (event.type) {
    case 'session_started':
      return pc.dim(
        `Session ${event.sessionId} started on ${event.project} (agent ${event.agent ?? 'default'}, model ${event.model}, base ${event.workingCopy.baseCommit.slice(0, 12)}${event.workingCopy.includesUncommitted ? ', with your uncommitted changes' : ''}).`,
      );
    case 'instruction':
      return null;
    case 'tool_call_proposed':
      calls.set(event.callId, describeCall(event.name, event.arguments));
      return `${who}${pc.bold('→')} ${describeCall(event.name, event.arguments)}`;
    case 'decision': {
      const call = calls.get(event.callId) ?? event.callId;
      if (event.effect === 'allow') return pc.dim(`  allowed by ${event.rule}`);
      if (event.effect === 'deny') return pc.red(`  refused: ${event.reason} (${event.rule})`);
      return pc.yellow(`  ${call}: needs approval (${event.reason})`);
    }
    case 'approval_requested':
      return null;
    case 'approval_answered':
      if (event.class === 'approval_refused_headless') return pc.yellow(`  refused: nobody can approve in a headless run (approval ${event.approvalId}).`);
      return event.answer === 'approved'
        ? pc.green(`  approved${event.by.kind === 'user' ? ` by ${event.by.email ?? event.by.userId}` : ''}`)
        : pc.red(`  rejected${event.by.kind === 'user' ? ` by ${event.by.email ?? event.by.userId}` : ''}`);
    case 'tool_result': {
      const status = event.exitCode === 0 ? pc.green('ok') : event.exitCode === null ? pc.yellow('no exit code') : pc.red(`exit ${event.exitCode}`);
      const cls = event.class ? pc.red(` [${event.class}]`) : '';
      const shown = event.exitCode === 0 ? pc.dim(lastLines(event.stderr || event.stdout, 3)) : failureExcerpt(event.stdout, event.stderr);
      return `  ${status}${cls} ${pc.dim(`${event.durationMs} ms`)}${shown ? `\n    ${shown.split('\n').join('\n    ')}` : ''}`;
    }
    case 'changes_detected':
      return `  changed: ${event.files.map((f) => `${f.path} (${f.change}${f.thirdParty ? ', third-party' : ''})`).join(', ')}`;
    case 'change_reverted':
      return pc.yellow(`  reverted (${event.because}): ${event.paths.join(', ')}`);
    case 'limit_reached':
      return pc.yellow(`Limit reached: ${event.class === 'limit_actions' ? `${event.actionsUsed} actions` : `${Math.round(event.minutesUsed)} minutes`}.`);
    case 'extension_granted':
      return pc.green(`Extension granted: +${event.amount} ${event.kind} (${event.extensionsUsed} used).`);
    case 'extension_refused':
      return pc.yellow(`Extension refused: ${event.reason}`);
    case 'loop_blocked':
      return pc.red(`  blocked for repetition: ${describeCall(event.name, event.arguments)} came ${event.repetitions} times in a row.`);
    case 'subagent_started':
      return pc.dim(`Subagent ${event.agent} started (${event.childSessionId}${event.background ? ', background' : ''}).`);
    case 'subagent_refused':
      return pc.yellow(`Subagent ${event.agent} refused: ${event.reason}`);
    case 'subagent_finished':
      return pc.dim(`Subagent ${event.agent} ${event.report.replace('_', ' ')} (${event.childSessionId}).`);
    case 'question':
      if (event.class === 'question_default_headless') return pc.yellow(`Question answered with its default in a headless run: ${event.question} → ${event.answer ?? ''}`);
      if (event.class === 'question_declined') return pc.yellow(`Question declined: ${event.question} → the agent states its assumption and continues.`);
      if (event.answer !== null) return pc.dim(`Answered: ${event.question} → ${event.answer}`);
      return pc.bold(`Question: ${event.question}${event.options.length > 0 ? ` (${event.options.join(' / ')})` : ''}`);
    case 'model_text':
      return event.text.trim() === '' ? null : `${who}${event.text.trim()}`;
    case 'compaction':
      return pc.dim(`Context compacted (${event.tokensBefore} → ${event.tokensAfter} tokens).`);
    case 'stalled':
      return pc.yellow(`Stalled (${event.class}): nothing for ${Math.round(event.idleMs / 1000)} s.`);
    case 'session_completed':
      return pc.green('Session completed.');
    case 'session_stopped':
      return pc.yellow(`Session stopped: ${stopSentence(event.stopReason)}`);
    case 'session_failed':
      return pc.red(`Session failed (${event.class}): ${event.message}`);
  }
}

export function stopSentence(reason: string | null): string {
  switch (reason) {
    case 'limit_actions':
      return 'the action limit was reached; this is a limit, not the end of the task.';
    case 'limit_minutes':
      return 'the time limit was reached; this is a limit, not the end of the task.';
    case 'loop':
      return 'the same call kept repeating, so it was blocked and the session handed back.';
    case 'revoked':
      return 'an administrator revoked it.';
    case 'stopped':
      return 'it was stopped.';
    case 'refused':
      return 'it needed something that was refused.';
    default:
      return reason ?? 'unknown reason.';
  }
}
