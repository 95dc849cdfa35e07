import { createHash } from 'node:crypto';
import { createPatch } from 'diff';
import type { ApprovedCommand } from '@lemniscate/policy';
import type {
  EnvironmentLog,
  EnvironmentRequest,
  EnvironmentStatus,
  ExecExit,
  ExecOutputChunk,
  FileChange,
  PolicyDecision,
  RepositoryDirectory,
  RepositoryDirectoryRequest,
  SandboxInfo,
} from '@lemniscate/contracts';
import { ExecHostCallError, type ExecHostPort } from '../../src/exec-host/exec-host.port';
import type { ModelProvider, ModelRequest, TurnResult } from '../../src/model/model.types';
import type { ApprovalDraft, ApprovalOutcome, EventDraft, SessionEnd, SessionRecorder, ToolResultRecord } from '../../src/runtime/ports';

/**
 * An in-memory stand-in for the exec-host, for the loop's unit tests only: files in a map, commands
 * that echo and may leave changes behind. The real exec-host is exercised by the medium and e2e tiers.
 */
export class InMemoryExecHost implements ExecHostPort {
  files = new Map<string, string>();
  accepted = new Map<string, string>();
  commands: string[] = [];
  destroyed: string[] = [];
  /** Changes the next command leaves behind, path → new content. */
  pendingChanges: Record<string, string> = {};
  onExec?: (command: string, signal?: AbortSignal) => Promise<void>;

  constructor(initial: Record<string, string> = {}) {
    for (const [k, v] of Object.entries(initial)) {
      this.files.set(k, v);
      this.accepted.set(k, v);
    }
  }

  async health() {
    return { ok: true };
  }

  // Local MCP servers need a real sandbox: the loop's unit tests give the runner MCP clients of their own.
  async mcpOpen(): Promise<never> {
    throw new ExecHostCallError('internal', 'The in-memory exec-host runs no MCP server.', 500);
  }
  async mcpMessage(): Promise<never> {
    throw new ExecHostCallError('internal', 'The in-memory exec-host runs no MCP server.', 500);
  }
  async mcpClose(): Promise<never> {
    throw new ExecHostCallError('internal', 'The in-memory exec-host runs no MCP server.', 500);
  }

  async create(req: { sessionId: string }): Promise<SandboxInfo> {
    return {
      sandboxId: `sbx_${req.sessionId}`,
      sessionId: req.sessionId,
      runtime: 'runc',
      state: 'ready',
      baseCommit: 'a'.repeat(40),
      branch: 'main',
      includedUncommitted: false,
      fingerprint: this.fingerprint(),
      excluded: [],
      limits: { cpus: 1, memoryMb: 512, pids: 64, diskMb: 64, commandTimeoutSeconds: 60, outputCapBytes: 4096, lifetimeMinutes: 60 },
      createdAt: new Date().toISOString(),
      expiresAt: new Date(Date.now() + 24 * 3600_000).toISOString(),
    };
  }
  async destroy(id: string) {
    this.destroyed.push(id);
  }
  async exec(_id: string, req: { command: string }, onOutput: (c: ExecOutputChunk) => void, signal?: AbortSignal): Promise<ExecExit> {
    this.commands.push(req.command);
    if (this.onExec) await this.onExec(req.command, signal);
    onOutput({ type: 'stdout', data: `ran: ${req.command}\n` });
    for (const [p, c] of Object.entries(this.pendingChanges)) this.files.set(p, c);
    this.pendingChanges = {};
    return { type: 'exit', exitCode: 0, durationMs: 1, timedOut: false, truncated: false, class: null, classes: [] };
  }
  private resolve(p: string): string {
    const rel = p.replace(/^\/workspace\/?/, '').replace(/^\.\//, '');
    if (rel.startsWith('..') || rel.startsWith('/')) throw new ExecHostCallError('outside_working_copy', `${p} is outside the working copy.`, 403);
    return rel;
  }
  async read(_id: string, req: { path: string }) {
    const rel = this.resolve(req.path);
    const content = this.files.get(rel);
    if (content === undefined) throw new ExecHostCallError('file_not_found', `${rel} does not exist.`, 404);
    const lines = content.split('\n').length;
    return { path: rel, content, offset: 0, lines, totalLines: lines, size: content.length, truncated: false };
  }
  async list() {
    return { path: '.', entries: [...this.files.keys()].map((name) => ({ name, type: 'file' as const, size: this.files.get(name)!.length })), truncated: false };
  }
  async search(_id: string, req: { pattern: string }) {
    const matches = [...this.files].flatMap(([path, c]) =>
      c
        .split('\n')
        .map((text, i) => ({ path, line: i + 1, text }))
        .filter((m) => m.text.includes(req.pattern)),
    );
    return { matches, filesScanned: this.files.size, skippedBinary: 0, skippedLarge: 0, truncated: false, stoppedBy: null };
  }
  async proposeWrite(_id: string, req: { path: string; content: string }) {
    const rel = this.resolve(req.path);
    const before = this.files.get(rel);
    return { path: rel, diff: before === req.content ? '' : createPatch(rel, before ?? '', req.content), created: before === undefined, binary: false };
  }
  async proposeEdit(_id: string, req: { path: string; old_string: string; new_string: string }) {
    const rel = this.resolve(req.path);
    const before = this.files.get(rel) ?? '';
    return { path: rel, diff: createPatch(rel, before, before.replace(req.old_string, req.new_string)), created: false, binary: false, next: before.replace(req.old_string, req.new_string) };
  }
  applied: string[] = [];
  async apply(_id: string, diff: string) {
    this.applied.push(diff);
    return { applied: [] };
  }
  async changes() {
    const files: FileChange[] = [...this.files]
      .filter(([p, c]) => this.accepted.get(p) !== c)
      .map(([path, c]) => {
        const diff = createPatch(path, this.accepted.get(path) ?? '', c);
        return { path, status: this.accepted.has(path) ? ('modified' as const) : ('added' as const), diff, binary: false, size: c.length, diffBytes: diff.length };
      });
    return { files, truncated: false };
  }
  async accept(_id: string, paths: string[]) {
    for (const p of paths) this.accepted.set(p, this.files.get(p)!);
    return { paths };
  }
  reverted: string[] = [];
  async revert(_id: string, paths: string[]) {
    for (const p of paths) {
      this.reverted.push(p);
      const a = this.accepted.get(p);
      if (a === undefined) this.files.delete(p);
      else this.files.set(p, a);
    }
    return { paths };
  }
  /** Fails the next patch reads (a sandbox gone or an exec-host that does not answer). */
  patchUnreadable = false;
  async patch() {
    if (this.patchUnreadable) throw new ExecHostCallError('sandbox_lost', 'The sandbox is gone.', 410);
    return { baseCommit: 'a'.repeat(40), patch: this.applied.join(''), includedUncommitted: false, sessionPatch: this.applied.join(''), fingerprint: this.fingerprint() };
  }
  /** A repository without a devcontainer: sessions use the sandbox image. */
  async environmentStatus(req: EnvironmentRequest): Promise<EnvironmentStatus> {
    return {
      state: 'base',
      ref: req.repository.ref ?? 'HEAD',
      commit: 'a'.repeat(40),
      key: null,
      devcontainer: null,
      job: null,
      message: 'The repository has no devcontainer: sessions start from the sandbox image.',
    };
  }
  prepareEnvironment = (req: EnvironmentRequest) => this.environmentStatus(req);
  async environmentLog(jobId: string): Promise<EnvironmentLog> {
    throw new ExecHostCallError('job_not_found', `There is no environment preparation ${jobId}.`, 404);
  }
  /** The files a test puts in `directories` (by directory), at one fixed commit. */
  directories = new Map<string, { name: string; text: string }[]>();
  directoryReads: RepositoryDirectoryRequest[] = [];
  async readRepositoryDirectory(req: RepositoryDirectoryRequest): Promise<RepositoryDirectory> {
    this.directoryReads.push(req);
    return { commit: 'a'.repeat(40), files: this.directories.get(req.directory) ?? [], skipped: [] };
  }
  /** X3, as the exec-host computes it: a hash over what is kept (accepted files and applied diffs), not over what a command left. */
  fingerprint(): string {
    const hash = createHash('sha256');
    for (const [p, c] of [...this.accepted].sort(([a], [b]) => (a < b ? -1 : 1))) hash.update(`${p}\0${c}\0`);
    for (const d of this.applied) hash.update(`diff\0${d}\0`);
    return `sha256:${hash.digest('hex')}`;
  }
}

/** Records everything the loop reports; approvals are answered by a test-provided policy. */
export class RecordingRecorder implements SessionRecorder {
  events: EventDraft[] = [];
  audits: { kind: string; payload: Record<string, unknown> }[] = [];
  approvals: ApprovalDraft[] = [];
  results = new Map<string, ToolResultRecord>();
  remembered: ApprovedCommand[] = [];
  end: SessionEnd | null = null;
  private nextCall = 0;

  /** The wait the loop allowed each approval, in milliseconds. */
  waits: number[] = [];

  /**
   * `answer` decides each approval; a question is answered with `{ state: 'approved', response }`;
   * `'approved_identical'` approves a command with its identical repeats (P3); `'pending'` leaves it
   * unanswered, so it expires when the loop's wait runs out (or the signal aborts).
   */
  constructor(
    private readonly answer: (
      draft: ApprovalDraft,
    ) => ApprovalOutcome['state'] | 'approved_identical' | 'pending' | { state: 'approved'; response: string } | { state: 'rejected'; reason: string } = () => 'refused_headless',
  ) {}

  async emit(event: EventDraft) {
    this.events.push(event);
  }
  async audit(kind: string, payload: Record<string, unknown>) {
    this.audits.push({ kind, payload });
  }
  progress: { actionsUsed: number; extensionsUsed: number }[] = [];
  async proposeToolCall(call: { name: string; arguments: Record<string, unknown> }, decision?: PolicyDecision, progress?: { actionsUsed: number; extensionsUsed: number }) {
    const callId = `call_${++this.nextCall}`;
    if (progress) this.progress.push(progress);
    // As the database recorder audits it: the decision with the call it decides.
    if (decision) this.audits.push({ kind: 'policy.decision', payload: { callId, tool: call.name, arguments: call.arguments, ...decision } });
    return callId;
  }
  async recordDecision() {}
  async flush() {}
  async recordResult(callId: string, result: ToolResultRecord) {
    this.results.set(callId, result);
  }
  async requestApproval(draft: ApprovalDraft, signal: AbortSignal, timeoutMs: number): Promise<ApprovalOutcome> {
    this.approvals.push(draft);
    this.waits.push(timeoutMs);
    const decided = this.answer(draft);
    const approvalId = `apr_${this.approvals.length}`;
    if (decided === 'pending') {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, timeoutMs);
        signal.addEventListener('abort', () => (clearTimeout(timer), reject(new Error('aborted'))), { once: true });
      });
      this.audits.push({ kind: 'approval.expired', payload: { approvalId } });
      return { state: 'expired', approvalId, decidedBy: null };
    }
    if (decided === 'approved_identical') {
      // As the approvals service does: the command is stored with the answer, when the approval offered it.
      if (draft.kind === 'command' && 'command' in draft.payload && draft.payload.workingDirectory !== undefined && draft.flags.reapprovalExempt === true) {
        this.remembered.push({ command: draft.payload.command, workingDirectory: draft.payload.workingDirectory, approvalId });
      }
      return { state: 'approved', approvalId, decidedBy: 'usr_dev' };
    }
    const state = typeof decided === 'string' ? decided : decided.state;
    if (state === 'approved') return { state, approvalId, decidedBy: 'usr_dev', ...(typeof decided === 'object' && 'response' in decided ? { response: decided.response } : {}) };
    if (state === 'refused_headless') return { state, approvalId };
    return { state, approvalId, decidedBy: 'usr_dev', ...(typeof decided === 'object' && 'reason' in decided ? { reason: decided.reason } : {}) };
  }
  async approvedCommands() {
    return this.remembered;
  }
  /** The tree recorded as kept, as the sessions table holds it (X3): the start's, then each patch's, null while a change is being kept. */
  fingerprintEnd: string | null = null;
  async recordWorkingCopy(info: SandboxInfo) {
    this.fingerprintEnd = info.fingerprint;
  }
  async recordProgress(progress: { actionsUsed: number; extensionsUsed: number }) {
    this.progress.push(progress);
  }
  patches: string[] = [];
  async recordPatch(patch: string, fingerprint: string) {
    this.patches.push(patch);
    this.fingerprintEnd = fingerprint;
  }
  async keepingChange() {
    this.fingerprintEnd = null;
  }
  async finish(end: SessionEnd) {
    this.end = end;
    if (end.fingerprintEnd !== undefined) this.fingerprintEnd = end.fingerprintEnd;
  }
  ofType<T extends EventDraft['type']>(type: T): Extract<EventDraft, { type: T }>[] {
    return this.events.filter((e): e is Extract<EventDraft, { type: T }> => e.type === type);
  }
}

/** Wraps a provider to keep every request the loop made, for assertions on what the model saw. */
export class Spy implements ModelProvider {
  requests: ModelRequest[] = [];
  constructor(private readonly inner: ModelProvider) {}
  get ref() {
    return this.inner.ref;
  }
  complete(r: ModelRequest): Promise<TurnResult> {
    this.requests.push({ ...r, messages: [...r.messages] });
    return this.inner.complete(r);
  }
}
