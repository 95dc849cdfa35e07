import type { ExecutionConfig } from './execution-config';

/**
 * Cascade limits (AG4): the gateway records every delegation here. Depth is computed from these
 * records, never from anything the child says or carries, so a child cannot reset it. Counts are
 * per session tree: the developer's session and everything it delegated.
 */

export type SubagentLimits = Pick<ExecutionConfig, 'subagentMaxDepth' | 'subagentMaxPerSession' | 'subagentMaxConcurrent'>;

export type SubagentRefusalCode = 'subagent_max_depth' | 'subagent_max_per_session' | 'subagent_max_concurrent';

/** A refusal the agent receives as its tool result: it says what was reached and to do the work itself. */
export class SubagentLimitError extends Error {
  constructor(
    readonly code: SubagentRefusalCode,
    message: string,
  ) {
    super(message);
    this.name = 'SubagentLimitError';
  }
}

/** A misuse by the caller (an id nobody registered), not a limit the agent reached. */
export class SubagentTrackerError extends Error {
  readonly code = 'subagent_tracker_misuse';
  constructor(message: string) {
    super(message);
    this.name = 'SubagentTrackerError';
  }
}

export interface SubagentRecord {
  sessionId: string;
  parentId: string | null;
  rootId: string;
  /** 0 for the developer's session, 1 for its children, and so on. */
  depth: number;
  running: boolean;
}

interface Tree {
  started: number;
  running: number;
}

export class SubagentTracker {
  private readonly sessions = new Map<string, SubagentRecord>();
  private readonly trees = new Map<string, Tree>();
  private readonly children = new Map<string, string[]>();
  private readonly limits: SubagentLimits;

  constructor(
    limits: SubagentLimits,
    private readonly newId: () => string = () => `ses_${globalThis.crypto.randomUUID().replaceAll('-', '')}`,
  ) {
    const { subagentMaxDepth, subagentMaxPerSession, subagentMaxConcurrent } = limits;
    this.limits = { subagentMaxDepth, subagentMaxPerSession, subagentMaxConcurrent };
    for (const [key, value] of Object.entries(this.limits)) {
      // Zero is refused: a cascade safety net is adjusted, not removed.
      if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${key} must be a whole number, 1 or more; got ${value}.`);
    }
  }

  /** Registers the developer's session, the root of a tree. */
  openSession(sessionId: string): SubagentRecord {
    if (this.sessions.has(sessionId)) throw new SubagentTrackerError(`Session ${sessionId} is already registered.`);
    const record: SubagentRecord = { sessionId, parentId: null, rootId: sessionId, depth: 0, running: true };
    this.sessions.set(sessionId, record);
    this.trees.set(sessionId, { started: 0, running: 0 });
    return { ...record };
  }

  /** Starts a child of `parentSessionId`, or refuses with the limit that was reached. */
  spawn(parentSessionId: string): SubagentRecord {
    const parent = this.sessions.get(parentSessionId);
    if (!parent) throw new SubagentTrackerError(`Session ${parentSessionId} is not registered; a delegation needs a known parent.`);
    if (!parent.running) throw new SubagentTrackerError(`Session ${parentSessionId} has finished; it cannot delegate any more.`);
    const tree = this.trees.get(parent.rootId);
    if (!tree) throw new SubagentTrackerError(`The session tree of ${parentSessionId} is closed.`);

    const depth = parent.depth + 1;
    const { subagentMaxDepth, subagentMaxPerSession, subagentMaxConcurrent } = this.limits;
    if (depth > subagentMaxDepth) {
      throw new SubagentLimitError(
        'subagent_max_depth',
        subagentMaxDepth === 1
          ? 'Delegation refused: a subagent cannot delegate further here (subagentMaxDepth is 1). Do this work yourself.'
          : `Delegation refused: the maximum nesting depth of ${subagentMaxDepth} subagents is reached. Do this work yourself.`,
      );
    }
    if (tree.started >= subagentMaxPerSession) {
      throw new SubagentLimitError('subagent_max_per_session', `Delegation refused: this session already started ${subagentMaxPerSession} subagents, the most allowed. Do this work yourself.`);
    }
    if (tree.running >= subagentMaxConcurrent) {
      throw new SubagentLimitError(
        'subagent_max_concurrent',
        `Delegation refused: ${subagentMaxConcurrent} subagents are already running in this session, the most allowed at once. Do this work yourself, or wait for one to finish.`,
      );
    }

    const sessionId = this.newId();
    if (this.sessions.has(sessionId)) throw new SubagentTrackerError(`The id generator returned ${sessionId} twice.`);
    const record: SubagentRecord = { sessionId, parentId: parent.sessionId, rootId: parent.rootId, depth, running: true };
    this.sessions.set(sessionId, record);
    this.children.set(parent.sessionId, [...(this.children.get(parent.sessionId) ?? []), sessionId]);
    tree.started += 1;
    tree.running += 1;
    return { ...record };
  }

  /** Marks a child as ended, whatever the outcome; finishing it again changes nothing. */
  finish(childSessionId: string): void {
    const record = this.sessions.get(childSessionId);
    if (!record || record.parentId === null) throw new SubagentTrackerError(`${childSessionId} is not a subagent this tracker started.`);
    if (!record.running) return;
    record.running = false;
    const tree = this.trees.get(record.rootId);
    if (tree) tree.running -= 1;
  }

  /** Running children of a session, deepest first, so an interruption can stop them before their parents. */
  runningDescendants(sessionId: string): SubagentRecord[] {
    const found: SubagentRecord[] = [];
    const visit = (id: string) => {
      for (const childId of this.children.get(id) ?? []) {
        visit(childId);
        const record = this.sessions.get(childId);
        if (record?.running) found.push({ ...record });
      }
    };
    visit(sessionId);
    return found;
  }

  get(sessionId: string): SubagentRecord | undefined {
    const record = this.sessions.get(sessionId);
    return record && { ...record };
  }

  /** Forgets a whole tree once the developer's session has ended. */
  closeSession(rootSessionId: string): void {
    const root = this.sessions.get(rootSessionId);
    if (!root || root.parentId !== null) throw new SubagentTrackerError(`${rootSessionId} is not a session registered with openSession.`);
    const forget = (id: string) => {
      for (const childId of this.children.get(id) ?? []) forget(childId);
      this.children.delete(id);
      this.sessions.delete(id);
    };
    forget(rootSessionId);
    this.trees.delete(rootSessionId);
  }
}
