/**
 * The gateway's own vocabulary for talking to a model. Providers translate it to and from their
 * wire format, so the session loop never sees an OpenAI or Anthropic shape.
 */

interface SystemMessage {
  role: 'system';
  content: string;
}

interface UserMessage {
  role: 'user';
  content: string;
}

interface AssistantMessage {
  role: 'assistant';
  content?: string;
  toolCalls?: ToolCall[];
}

/** The result of one tool call, sent back to the model. */
interface ToolResultMessage {
  role: 'tool';
  toolCallId: string;
  content: string;
  /** Lets providers that support it (Anthropic) tell the model the call failed or was refused. */
  isError?: boolean;
}

export type ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage;

/** A JSON Schema object (draft 2020-12 subset understood by both providers). */
export type JsonSchema = Record<string, unknown>;

export interface ToolDefinition {
  name: string;
  description: string;
  parameters: JsonSchema;
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * A tool call whose arguments the model produced as text that is not a JSON object. It is
 * reported rather than thrown so the loop can tell the model and let it try again.
 */
export interface MalformedToolCall {
  id: string;
  name: string;
  /** What the model sent, cut to a bounded length. */
  rawArguments: string;
  reason: string;
}

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'content_filter' | 'other';

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

export interface TurnResult {
  text?: string;
  toolCalls: ToolCall[];
  malformedToolCalls?: MalformedToolCall[];
  stopReason: StopReason;
  usage?: Usage;
}

/**
 * Why the loop asks: an ordinary turn, the final summary turn at a limit (no tools, L3), or the
 * summary of older turns when the context is compacted. Providers may use it (the scripted model
 * does, so compaction does not consume scripted turns).
 */
type TurnPurpose = 'turn' | 'final_summary' | 'compaction';

export interface RetryNotice {
  attempt: number;
  delayMs: number;
  reason: string;
}

export interface ModelRequest {
  messages: ChatMessage[];
  /** The fixed catalogue for this turn. Empty means the model must answer with text only. */
  tools: ToolDefinition[];
  /** Cancels the request at once (stop, revocation, session end). */
  signal: AbortSignal;
  purpose?: TurnPurpose;
  maxTokens?: number;
  onTextDelta?: (delta: string) => void;
  /** Told before each retry so the gateway can log or show that the model service is struggling. */
  onRetry?: (notice: RetryNotice) => void;
}

export interface ModelProvider {
  /** A reference safe to log and show, e.g. `anthropic:claude-sonnet-4-5` (never a key). */
  readonly ref: string;
  complete(request: ModelRequest): Promise<TurnResult>;
}
