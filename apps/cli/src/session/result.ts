import { SessionEvent, type GatewayEvent, type SessionView } from '@lemniscate/contracts';

/** Bounded output in the JSON result: enough to debug, never megabytes of build log. */
const OUTPUT_LIMIT = 4000;

export function truncate(text: string, limit = OUTPUT_LIMIT): { text: string; truncated: boolean } {
  if (text.length <= limit) return { text, truncated: false };
  return { text: `${text.slice(0, limit)}\n…[truncated: ${text.length - limit} more characters]`, truncated: true };
}

interface ToolCallRecord {
  call_id: string;
  agent: string;
  name: string;
  arguments: Record<string, unknown>;
  decision: { effect: 'allow' | 'ask' | 'deny'; rule: string; reason: string; third_party: boolean; class: string | null } | null;
  approval: { id: string; answer: 'approved' | 'rejected' | null; class: string | null } | null;
  result: { exit_code: number | null; stdout: string; stderr: string; truncated: boolean; duration_ms: number; class: string | null } | null;
  blocked: 'loop' | null;
}

export interface Ending {
  status: 'completed' | 'stopped' | 'failed';
  stop_reason: string | null;
  exit_code: 0 | 1 | 3;
  summary: string | null;
  message: string | null;
}

/** The `--output-format json` object (DESIGN.md, the CLI contract). */
export interface HeadlessResult {
  session_id: string;
  status: Ending['status'];
  stop_reason: string | null;
  exit_code: number;
  actions_used: number;
  patch: string;
  tool_calls: ToolCallRecord[];
  summary: string | null;
  classes: string[];
  project: string;
  agent: string;
  base_commit: string | null;
  branch: string | null;
  included_uncommitted: boolean;
  refusals: { approval_id: string | null; kind: string; subject: string; class: string }[];
  applied: { applied: boolean; files: string[]; conflicts: string[]; message: string | null } | null;
  /** Proposed changes that did not make it into the patch: a diff or a command's changes rejected, or a write the policy denied. */
  refused_changes: RefusedChange[];
  /** Changes taken back out of the working copy (`change_reverted`). */
  reverted_changes: { paths: string[]; because: string }[];
  /** From the start of the run to its end, measured by the CLI. */
  duration_ms: number;
  /** The model reference the gateway ran the session with (null when the session never started). */
  model: string | null;
  /** Token usage when the provider reports it; null otherwise. */
  usage: { input_tokens: number; output_tokens: number } | null;
}

interface RefusedChange {
  approval_id: string | null;
  call_id: string | null;
  kind: string;
  subject: string;
  class: string | null;
}

/** Tools whose call is a proposed change to the working copy. */
const WRITING_TOOLS = new Set(['Write', 'Edit']);

/**
 * L4: the exit code of a headless run. The session's own code (0 completed, 1 failed, 3 stopped),
 * except that with `--fail-on-refusal` a completed run in which a proposed change was refused or
 * reverted ends with 3: the task was not done as asked, and CI must be able to tell.
 */
export function exitCodeFor(result: Pick<HeadlessResult, 'status' | 'refused_changes' | 'reverted_changes'>, failOnRefusal: boolean): 0 | 1 | 3 {
  if (result.status === 'failed') return 1;
  if (result.status === 'stopped') return 3;
  if (failOnRefusal && (result.refused_changes.length > 0 || result.reverted_changes.length > 0)) return 3;
  return 0;
}

/**
 * Folds the live events of one session into the JSON result. Built from the events rather than from
 * a final query so `stream-json` and `json` describe exactly the same run.
 */
export class ResultCollector {
  private readonly calls = new Map<string, ToolCallRecord>();
  private readonly classes = new Set<string>();
  readonly refusals: HeadlessResult['refusals'] = [];
  private readonly approvalSubjects = new Map<string, { kind: string; subject: string; callId: string | null }>();
  ending: Ending | null = null;
  actionsUsed = 0;
  baseCommit: string | null = null;
  branch: string | null = null;
  model: string | null = null;
  usage: { input_tokens: number; output_tokens: number } | null = null;
  readonly refusedChanges: RefusedChange[] = [];
  readonly revertedChanges: HeadlessResult['reverted_changes'] = [];
  private readonly startedAt: number;

  constructor(
    readonly sessionId: string,
    private readonly clock: () => number = Date.now,
  ) {
    this.startedAt = clock();
  }

  add(raw: GatewayEvent): SessionEvent | null {
    if ('class' in raw && typeof raw.class === 'string') this.classes.add(raw.class);
    const parsed = SessionEvent.safeParse(raw);
    // An event type this CLI does not know is passed through (stream-json) but not interpreted.
    if (!parsed.success) return null;
    const event = parsed.data;
    if (event.sessionId !== this.sessionId) return event;
    switch (event.type) {
      case 'session_started':
        this.baseCommit = event.workingCopy.baseCommit;
        this.model = event.model;
        this.branch = event.workingCopy.branch;
        break;
      case 'tool_call_proposed':
        this.calls.set(event.callId, { call_id: event.callId, agent: event.agent, name: event.name, arguments: event.arguments, decision: null, approval: null, result: null, blocked: null });
        break;
      case 'decision': {
        const call = this.calls.get(event.callId);
        if (call) call.decision = { effect: event.effect, rule: event.rule, reason: event.reason, third_party: event.thirdParty, class: event.class ?? null };
        if (call && event.effect === 'deny' && WRITING_TOOLS.has(call.name)) {
          this.refusedChanges.push({
            approval_id: null,
            call_id: call.call_id,
            kind: 'diff',
            subject: typeof call.arguments.path === 'string' ? call.arguments.path : '',
            class: event.class ?? 'policy_denied',
          });
        }
        break;
      }
      case 'approval_requested': {
        this.approvalSubjects.set(event.approvalId, { kind: event.kind, subject: event.subject, callId: event.callId });
        const call = event.callId ? this.calls.get(event.callId) : undefined;
        if (call) call.approval = { id: event.approvalId, answer: null, class: null };
        break;
      }
      case 'approval_answered': {
        const asked = this.approvalSubjects.get(event.approvalId);
        const call = asked?.callId ? this.calls.get(asked.callId) : undefined;
        if (call) call.approval = { id: event.approvalId, answer: event.answer, class: event.class ?? null };
        if (event.answer === 'rejected' && (asked?.kind === 'diff' || asked?.kind === 'changes')) {
          this.refusedChanges.push({ approval_id: event.approvalId, call_id: asked.callId, kind: asked.kind, subject: asked.subject, class: event.class ?? null });
        }
        if (event.class === 'approval_refused_headless') {
          this.refusals.push({ approval_id: event.approvalId, kind: asked?.kind ?? 'unknown', subject: asked?.subject ?? '', class: event.class });
        }
        break;
      }
      case 'extension_refused':
        if (event.class === 'approval_refused_headless') this.refusals.push({ approval_id: null, kind: 'extension', subject: event.reason, class: event.class });
        break;
      case 'question':
        if (event.class === 'question_default_headless') this.refusals.push({ approval_id: null, kind: 'question', subject: event.question, class: event.class });
        break;
      case 'tool_result': {
        const call = this.calls.get(event.callId);
        if (call) {
          const out = truncate(event.stdout);
          const err = truncate(event.stderr);
          call.result = {
            exit_code: event.exitCode,
            stdout: out.text,
            stderr: err.text,
            truncated: event.truncated || out.truncated || err.truncated,
            duration_ms: event.durationMs,
            class: event.class ?? null,
          };
        }
        break;
      }
      case 'change_reverted':
        this.revertedChanges.push({ paths: event.paths, because: event.because });
        break;
      case 'loop_blocked': {
        const call = this.calls.get(event.callId);
        if (call) call.blocked = 'loop';
        break;
      }
      case 'limit_reached':
      case 'compaction':
        this.actionsUsed = Math.max(this.actionsUsed, event.actionsUsed);
        break;
      case 'session_completed':
      case 'session_stopped':
      case 'session_failed':
        if (event.usage) this.usage = { input_tokens: event.usage.inputTokens, output_tokens: event.usage.outputTokens };
        this.end(event);
        break;
      default:
        break;
    }
    return event;
  }

  private end(event: Extract<SessionEvent, { type: 'session_completed' | 'session_stopped' | 'session_failed' }>): void {
    switch (event.type) {
      case 'session_completed':
        this.ending = { status: 'completed', stop_reason: null, exit_code: 0, summary: event.summary, message: null };
        break;
      case 'session_stopped':
        this.ending = { status: 'stopped', stop_reason: event.stopReason, exit_code: 3, summary: event.summary, message: null };
        break;
      case 'session_failed':
        this.ending = { status: 'failed', stop_reason: 'crash', exit_code: 1, summary: null, message: event.message };
        break;
    }
  }

  result(session: SessionView | null, project: string, agent: string, includedUncommitted: boolean, failOnRefusal = false): HeadlessResult {
    const ending: Ending = this.ending ?? {
      status: session?.status === 'completed' ? 'completed' : session?.status === 'stopped' ? 'stopped' : 'failed',
      stop_reason: session?.stopReason ?? 'crash',
      exit_code: session?.status === 'completed' ? 0 : session?.status === 'stopped' ? 3 : 1,
      summary: session?.summary ?? null,
      message: null,
    };
    const result: HeadlessResult = {
      session_id: this.sessionId,
      status: ending.status,
      stop_reason: ending.stop_reason,
      exit_code: ending.exit_code,
      actions_used: session?.actionsUsed ?? this.actionsUsed,
      patch: session?.finalPatch ?? '',
      tool_calls: [...this.calls.values()],
      summary: ending.summary ?? session?.summary ?? ending.message,
      classes: [...this.classes],
      project,
      agent,
      base_commit: session?.baseCommit ?? this.baseCommit,
      branch: session?.branch ?? this.branch,
      included_uncommitted: session?.includedUncommitted ?? includedUncommitted,
      refusals: this.refusals,
      applied: null,
      refused_changes: this.refusedChanges,
      reverted_changes: this.revertedChanges,
      duration_ms: Math.max(0, Math.round(this.clock() - this.startedAt)),
      model: this.model,
      usage: this.usage,
    };
    result.exit_code = exitCodeFor(result, failOnRefusal);
    if (result.exit_code !== ending.exit_code) result.classes.push('change_refused');
    return result;
  }
}
