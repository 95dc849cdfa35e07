import type { ApprovedCommand, McpServer } from '@lemniscate/policy';
import type { McpCallResult, McpListedTool } from '../mcp/mcp-clients';
import type { ApprovalFlags, ApprovalKind, ApprovalPayload, PolicyDecision, SandboxInfo, SessionEvent } from '@lemniscate/contracts';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** An event as the loop produces it; the recorder stamps `seq`, `sessionId` and `at`. */
export type EventDraft = DistributiveOmit<SessionEvent, 'seq' | 'sessionId' | 'at'>;

export interface ApprovalDraft {
  kind: ApprovalKind;
  payload: ApprovalPayload;
  flags: ApprovalFlags;
  agent: string;
  toolCallId: string | null;
}

export type ApprovalOutcome =
  | { state: 'approved'; approvalId: string; decidedBy: string; /** A question's answer. */ response?: string | null }
  /** `reason`: what the person said when rejecting (told to the agent); null when nothing was said. */
  | { state: 'rejected' | 'expired'; approvalId: string; decidedBy: string | null; reason?: string | null }
  /** Headless: nobody can answer; refused at once and recorded as the automated process's refusal. */
  | { state: 'refused_headless'; approvalId: string };

/** What running a tool produced, when it ran a command or was refused on the way. */
export interface CallOutcome {
  exitCode?: number | null;
  stdout?: string;
  stderr?: string;
  truncated?: boolean;
  durationMs?: number;
  class?: string | null;
}

export interface ToolResultRecord extends CallOutcome {
  ok: boolean;
  /** What the model was told, bounded. */
  summary: string;
}

export interface SessionEnd {
  status: 'completed' | 'stopped' | 'failed';
  stopReason: string | null;
  summary: string | null;
  finalPatch: string | null;
  /**
   * X3: read from the sandbox with `finalPatch` at the end; undefined when it could not be read, and
   * the pair recorded with the last patch stands (see recordPatch).
   */
  fingerprintEnd?: string | undefined;
  actionsUsed: number;
  extensionsUsed: number;
}

/**
 * A proposal whose audit entries were written while its row was not (the database went away between
 * the two): the call is in the audit log, so it is shown too, and the session fails on `cause`.
 */
export class ProposalNotRecorded extends Error {
  constructor(
    readonly callId: string,
    override readonly cause: unknown,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

/** A session's counters, as its row keeps them. */
export interface Progress {
  actionsUsed: number;
  extensionsUsed: number;
}

/**
 * Everything the loop records, in the gateway's database, the audit chain and the live events. The
 * loop itself holds no storage: the gateway module implements this port.
 */
export interface SessionRecorder {
  /** Records a live event; it may be written after this resolves, in the order emitted (see `flush`). */
  emit(event: EventDraft): Promise<void>;
  /** Resolves once the entry is in the audit log. */
  audit(kind: string, payload: Record<string, unknown>): Promise<void>;
  /**
   * Records a proposed call, and with it the policy's decision when it is already known: the call's
   * row and the audit entries `tool_call.proposed` then `policy.decision` (the decision with the
   * call's `callId`, `tool` and `arguments`) are all written when this resolves, and the session's
   * counters when `progress` is given (in the same statement as the row). Returns the call's id.
   */
  proposeToolCall(call: { name: string; arguments: Record<string, unknown>; agent: string }, decision?: PolicyDecision, progress?: Progress): Promise<string>;
  /** A later decision on a recorded call (its row only; it may be written after this resolves). */
  recordDecision(callId: string, decision: PolicyDecision): Promise<void>;
  /** A call's result (its row only; it may be written after this resolves). */
  recordResult(callId: string, result: ToolResultRecord): Promise<void>;
  /** Resolves once everything recorded so far is written (events, progress, decisions, results). */
  flush(): Promise<void>;
  /**
   * Opens an approval and waits for its answer, at most `timeoutMs`: then the approval is expired,
   * recorded and audited as such, and the outcome is `expired` (L1, X4: nothing waits forever).
   */
  requestApproval(draft: ApprovalDraft, signal: AbortSignal, timeoutMs: number): Promise<ApprovalOutcome>;
  /**
   * Commands approved "with their identical repeats" in this session (P3), with their approvals. The
   * approvals service stores one when the person gives that answer; the loop only reads them.
   */
  approvedCommands(): Promise<ApprovedCommand[]>;
  /** Where the working copy stood at the start (X3); the tree kept so far is the start's. */
  recordWorkingCopy(info: SandboxInfo): Promise<void>;
  recordProgress(progress: Progress): Promise<void>;
  /**
   * The patch of everything approved so far, kept as it grows: a sandbox that is lost or destroyed
   * by a stop never takes approved work with it. With it, the fingerprint of the tree it gives (X3),
   * read in the same exec-host call.
   */
  recordPatch(patch: string, fingerprint: string): Promise<void>;
  /**
   * A change is being kept (accepted or applied): until the next recordPatch, the recorded tree no
   * longer says where the working copy stands, and a session that ends unread ends with it unknown.
   */
  keepingChange(): Promise<void>;
  finish(end: SessionEnd): Promise<void>;
}

/**
 * The MCP servers of a session tree (AG7): listing a declared server's tools and calling one. A
 * server that cannot be reached, started or ends before answering throws McpServerError (a tool
 * error for the model, never a session failure).
 */
export interface McpToolSource {
  list(server: string, declared: McpServer): Promise<McpListedTool[]>;
  call(server: string, declared: McpServer, tool: string, args: Record<string, unknown>): Promise<McpCallResult>;
}
