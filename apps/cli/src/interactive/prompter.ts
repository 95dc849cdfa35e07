/**
 * The questions interactive mode asks a person. An interface so the session logic is tested with a
 * scripted prompter and the terminal implementation (ESM prompts) stays at the edge.
 */
export type ApprovalAnswer = 'approve' | 'reject' | 'approve_identical' | 'stop';

export interface ApprovalQuestion {
  approvalId: string;
  agent: string;
  kind: 'command' | 'diff' | 'changes' | 'extension' | 'question';
  /** Already rendered for the terminal: the exact command, or the coloured diff. */
  shown: string;
  thirdParty: string[];
  /** Offer "approve identical commands for this session" (policy `reapproval: exempt`). */
  offerIdentical: boolean;
  /** A question's suggested answers. */
  options?: string[];
}

export interface AgentQuestion {
  approvalId: string;
  agent: string;
  question: string;
  options: string[];
}

export type QuestionAnswer = { answer: string } | 'decline' | 'stop';

export interface Prompter {
  /** The next instruction; null when the person is done (empty input at EOF, Ctrl-C, Ctrl-D). */
  instruction(signal?: AbortSignal): Promise<string | null>;
  /** Null when the question was withdrawn through `signal` (answered elsewhere, session ended). */
  approval(question: ApprovalQuestion, signal: AbortSignal): Promise<ApprovalAnswer | null>;
  extension(description: string, signal: AbortSignal): Promise<'grant' | 'decline' | null>;
  /**
   * The agent's question (AG5): one of its options or the person's own words; `decline` (Escape)
   * lets the agent state its assumption and continue; null when withdrawn through `signal`.
   */
  question(question: AgentQuestion, signal: AbortSignal): Promise<QuestionAnswer | null>;
  text(message: string, options?: { default?: string; secret?: boolean }): Promise<string>;
  confirm(message: string, defaultAnswer: boolean): Promise<boolean>;
  /** While a session runs: the mention typed after pressing `@` (`explore where is x?`); null if withdrawn. */
  mention?(signal: AbortSignal): Promise<string | null>;
  /**
   * While a session runs, reacts to single keys (`@`, Ctrl-C) without a prompt; returns a function
   * that stops. Absent where there is no terminal.
   */
  watchKeys?(handlers: { onMention: () => void; onInterrupt: () => void }): () => void;
}

/** Shown while a command runs, so a long build does not look like a hang. */
export interface Spinner {
  start(text: string): void;
  stop(): void;
}

export const noSpinner: Spinner = { start: () => undefined, stop: () => undefined };
