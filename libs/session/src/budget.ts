import type { ExecutionConfig } from './execution-config';

/**
 * Session budgets (L1–L3, AG5): how many actions a session may take and for how long. The budget
 * only counts and answers; the gateway decides what to do at a limit (ask for an extension, or
 * run the final summary turn).
 */

export interface Clock {
  /** Milliseconds since an arbitrary origin; only differences are used. */
  now(): number;
}

const systemClock: Clock = { now: () => Date.now() };

/** What one extension adds (L2). */
export const EXTENSION_ACTIONS = 50;
export const EXTENSION_MINUTES = 15;

export type BudgetCheck = 'ok' | 'limit_actions' | 'limit_minutes';
export type ExtensionKind = 'actions' | 'minutes';
export type SessionRole = 'main' | 'child';

export class ExtensionRefusedError extends Error {
  readonly code = 'extension_refused';
  constructor(message: string) {
    super(message);
    this.name = 'ExtensionRefusedError';
  }
}

export interface ExtensionGrant {
  kind: ExtensionKind;
  amount: number;
  /** Extensions granted so far, this one included. */
  extensionsUsed: number;
  actionsLimit: number | null;
  minutesLimit: number;
}

export interface BudgetSnapshot {
  role: SessionRole;
  actionsUsed: number;
  toolCalls: number;
  compactions: number;
  /** null: no action cap (a child whose frontmatter sets none). */
  actionsLimit: number | null;
  minutesUsed: number;
  minutesLimit: number;
  extensionsUsed: number;
  extensionsAllowed: number;
}

export interface BudgetOptions {
  role: SessionRole;
  maxActions: number | null;
  maxMinutes: number;
  maxExtensions: number;
  clock?: Clock;
}

export class SessionBudget {
  private readonly role: SessionRole;
  private readonly clock: Clock;
  private readonly startedAt: number;
  private readonly maxExtensions: number;
  private actionsLimit: number | null;
  private minutesLimit: number;
  private toolCalls = 0;
  private compactions = 0;
  private extensionsUsed = 0;

  constructor(options: BudgetOptions) {
    if (options.maxActions !== null) positiveInteger('maxActions', options.maxActions);
    positiveInteger('maxMinutes', options.maxMinutes);
    if (!Number.isInteger(options.maxExtensions) || options.maxExtensions < 0) {
      throw new RangeError(`maxExtensions must be a whole number, 0 or more; got ${options.maxExtensions}.`);
    }
    this.role = options.role;
    this.clock = options.clock ?? systemClock;
    this.startedAt = this.clock.now();
    this.actionsLimit = options.maxActions;
    this.minutesLimit = options.maxMinutes;
    // Nobody is there to approve an extension inside a child session (AG5).
    this.maxExtensions = options.role === 'child' ? 0 : options.maxExtensions;
  }

  /** The budget of a session the developer started: the resolved limits, nothing else. */
  static forMainSession(config: ExecutionConfig, clock?: Clock): SessionBudget {
    return new SessionBudget({
      role: 'main',
      maxActions: config.sessionMaxActions,
      maxMinutes: config.sessionMaxMinutes,
      maxExtensions: config.sessionMaxExtensions,
      clock,
    });
  }

  /**
   * A subagent's own budget (AG5): nothing is deducted from the parent, the full duration starts
   * again, no extension, and no action cap unless the child's own frontmatter sets one.
   */
  static forChild(config: ExecutionConfig, frontmatterMaxActions: number | undefined, clock?: Clock): SessionBudget {
    return new SessionBudget({
      role: 'child',
      maxActions: frontmatterMaxActions ?? null,
      maxMinutes: config.sessionMaxMinutes,
      maxExtensions: 0,
      clock,
    });
  }

  get actionsUsed(): number {
    return this.toolCalls + this.compactions;
  }

  get minutesUsed(): number {
    return Math.max(0, this.clock.now() - this.startedAt) / 60_000;
  }

  /**
   * Whether one more action may start. Actions are checked before time so that a session out of
   * both reports the limit a person can see in the counters.
   */
  check(): BudgetCheck {
    if (this.actionsLimit !== null && this.actionsUsed >= this.actionsLimit) return 'limit_actions';
    if (this.minutesUsed >= this.minutesLimit) return 'limit_minutes';
    return 'ok';
  }

  recordToolCall(): void {
    this.toolCalls += 1;
  }

  recordCompaction(): void {
    this.compactions += 1;
  }

  /** L2: +50 actions or +15 minutes, at most `sessionMaxExtensions` times; refusals say why. */
  grantExtension(kind: ExtensionKind): ExtensionGrant {
    if (this.role === 'child') {
      throw new ExtensionRefusedError('A subagent cannot be extended: there is nobody in a child session to approve it, so it ends at its limit and reports back.');
    }
    if (this.extensionsUsed >= this.maxExtensions) {
      throw new ExtensionRefusedError(
        this.maxExtensions === 0
          ? 'Extensions are not allowed for this session (sessionMaxExtensions is 0); it ends at its limit with a summary.'
          : `This session already had its ${this.maxExtensions} extension${this.maxExtensions === 1 ? '' : 's'}, the most allowed; it ends at its limit with a summary.`,
      );
    }
    if (kind === 'actions') {
      // Only children run without an action cap, and children are never extended.
      this.actionsLimit = (this.actionsLimit ?? 0) + EXTENSION_ACTIONS;
    } else {
      this.minutesLimit += EXTENSION_MINUTES;
    }
    this.extensionsUsed += 1;
    return {
      kind,
      amount: kind === 'actions' ? EXTENSION_ACTIONS : EXTENSION_MINUTES,
      extensionsUsed: this.extensionsUsed,
      actionsLimit: this.actionsLimit,
      minutesLimit: this.minutesLimit,
    };
  }

  snapshot(): BudgetSnapshot {
    return {
      role: this.role,
      actionsUsed: this.actionsUsed,
      toolCalls: this.toolCalls,
      compactions: this.compactions,
      actionsLimit: this.actionsLimit,
      minutesUsed: this.minutesUsed,
      minutesLimit: this.minutesLimit,
      extensionsUsed: this.extensionsUsed,
      extensionsAllowed: this.maxExtensions,
    };
  }
}

function positiveInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a whole number, 1 or more; got ${value}.`);
}
