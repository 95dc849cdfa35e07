import type {
  ApplyDiffResponse,
  ChangePathsResponse,
  ChangesResponse,
  CreateSandboxRequest,
  EnvironmentLog,
  EnvironmentRequest,
  EnvironmentStatus,
  ExecExit,
  ExecHostErrorCode,
  ExecOutputChunk,
  ExecRequest,
  ListFilesRequest,
  ListFilesResponse,
  McpExit,
  McpMessageRequest,
  McpMessageResponse,
  McpOpenRequest,
  McpOpenResponse,
  PatchResponse,
  PrepareEnvironmentRequest,
  RepositoryDirectory,
  RepositoryDirectoryRequest,
  ProposeEditRequest,
  ProposeWriteRequest,
  ProposedChange,
  ReadFileRequest,
  ReadFileResponse,
  SandboxInfo,
  SearchFilesRequest,
  SearchFilesResponse,
} from '@lemniscate/contracts';
import { AppError, ErrorCode } from '../common/errors';

/** The injection token of the gateway's one exec-host client (ExecHostPort). */
export const EXEC_HOST = Symbol('EXEC_HOST');

/** What the readiness probe reports about the exec-host: whether it can run sandboxes, and if not why. */
export interface ExecHostCheck {
  ok: boolean;
  message?: string;
}

/**
 * What the gateway needs from an exec-host: the control channel of libs/contracts/exec-host.ts.
 * Every method throws ExecHostCallError when the exec-host refuses or cannot be reached.
 */
export interface ExecHostPort {
  health(): Promise<ExecHostCheck>;
  create(request: CreateSandboxRequest, signal?: AbortSignal): Promise<SandboxInfo>;
  /** Destroying a sandbox that is already gone is success: the goal is that it no longer exists. */
  destroy(sandboxId: string): Promise<void>;
  exec(sandboxId: string, request: ExecRequest, onOutput: (chunk: ExecOutputChunk) => void, signal?: AbortSignal): Promise<ExecExit>;
  read(sandboxId: string, request: ReadFileRequest, signal?: AbortSignal): Promise<ReadFileResponse>;
  list(sandboxId: string, request: ListFilesRequest, signal?: AbortSignal): Promise<ListFilesResponse>;
  search(sandboxId: string, request: SearchFilesRequest, signal?: AbortSignal): Promise<SearchFilesResponse>;
  proposeWrite(sandboxId: string, request: ProposeWriteRequest, signal?: AbortSignal): Promise<ProposedChange>;
  proposeEdit(sandboxId: string, request: ProposeEditRequest, signal?: AbortSignal): Promise<ProposedChange>;
  apply(sandboxId: string, diff: string, signal?: AbortSignal): Promise<ApplyDiffResponse>;
  changes(sandboxId: string, signal?: AbortSignal): Promise<ChangesResponse>;
  accept(sandboxId: string, paths: string[], signal?: AbortSignal): Promise<ChangePathsResponse>;
  revert(sandboxId: string, paths: string[], signal?: AbortSignal): Promise<ChangePathsResponse>;
  patch(sandboxId: string, signal?: AbortSignal): Promise<PatchResponse>;
  /** Where the project's environment stands for its current inputs (the devcontainer at its default ref). */
  environmentStatus(request: EnvironmentRequest, signal?: AbortSignal): Promise<EnvironmentStatus>;
  /** Starts (or joins) the preparation of the environment for its current inputs; ready at once when it already is and `force` is not set. */
  prepareEnvironment(request: PrepareEnvironmentRequest, signal?: AbortSignal): Promise<EnvironmentStatus>;
  /** A preparation's log from `offset` (bytes); `complete` once the job is over. */
  environmentLog(jobId: string, offset: number, signal?: AbortSignal): Promise<EnvironmentLog>;
  /** One directory of the project's repository at a ref, read where the repository is reached (its agents, for a git URL). */
  readRepositoryDirectory(request: RepositoryDirectoryRequest, signal?: AbortSignal): Promise<RepositoryDirectory>;
  /** AG7: starts a local MCP server in the sandbox, for one call or one listing (a command with stdin). */
  mcpOpen(sandboxId: string, request: McpOpenRequest, signal?: AbortSignal): Promise<McpOpenResponse>;
  /** Writes a message to the server and answers what it wrote (see McpMessageRequest). */
  mcpMessage(sandboxId: string, processId: string, request: McpMessageRequest, signal?: AbortSignal): Promise<McpMessageResponse>;
  /** Ends the server (its stdin closed, killed after a moment) and answers how it ended. */
  mcpClose(sandboxId: string, processId: string, signal?: AbortSignal): Promise<McpExit>;
}

/**
 * A call to the exec-host that failed, with the exec-host's code and sentence. (The exec-host's own
 * ExecHostError is what it throws inside; this is what the gateway sees of it.)
 */
export class ExecHostCallError extends Error {
  /** For engine_unavailable: the connection was refused, so no request reached the exec-host. */
  readonly neverReached: boolean;
  /** Whether the exec-host answered (a refusal, or a body the gateway cannot read) rather than the call failing on the way. */
  readonly answered: boolean;

  constructor(
    readonly code: ExecHostErrorCode,
    message: string,
    /** The HTTP status it answered; 503 when it did not answer, 502 when a command's stream broke. */
    readonly status: number,
    how: { neverReached?: boolean; answered?: boolean } = {},
  ) {
    super(message);
    this.name = 'ExecHostCallError';
    this.neverReached = how.neverReached ?? false;
    this.answered = how.answered ?? true;
  }
}

/**
 * The one place where an exec-host failure becomes the gateway's coded error. A refusal is said as
 * "The exec-host refused to <what was asked> (HTTP n)."; a call that got no answer, or an answer the
 * gateway cannot read, keeps its own sentence (it names the address and the wait, or the call).
 */
export function toAppError(err: unknown, asked: string): AppError {
  if (!(err instanceof ExecHostCallError)) return new AppError(ErrorCode.ExecHostUnavailable, err instanceof Error ? err.message : String(err));
  // Refusals about the project's environment are the developer's to act on: the exec-host's sentence
  // says what stands (preparing, failed, never prepared; which devcontainer setting is unusable).
  if (err.answered && err.code === 'environment_not_ready') return new AppError(ErrorCode.EnvironmentNotReady, err.message);
  if (err.answered && err.code === 'environment_invalid') return new AppError(ErrorCode.EnvironmentInvalid, err.message);
  if (err.answered && err.code === 'job_not_found') return new AppError(ErrorCode.NotFound, err.message);
  const refused = err.answered && (err.status < 200 || err.status > 299);
  return new AppError(ErrorCode.ExecHostUnavailable, refused ? `The exec-host refused to ${asked} (HTTP ${err.status}).` : err.message);
}

/**
 * For the endings (stop, revocation, orphan): destroys the session's sandbox if it has one, and on
 * failure says, in a sentence for the record, that the exec-host's reaper will remove it instead.
 */
export async function destroyOrLeaveToReaper(execHost: ExecHostPort, sandboxId: string | null): Promise<{ sandboxDestroyed: boolean; sandboxNote: string | null }> {
  if (!sandboxId) return { sandboxDestroyed: false, sandboxNote: null };
  try {
    await execHost.destroy(sandboxId);
    return { sandboxDestroyed: true, sandboxNote: null };
  } catch (error) {
    return { sandboxDestroyed: false, sandboxNote: `${toAppError(error, `destroy sandbox ${sandboxId}`).message} The exec-host's reaper removes it by its session label.` };
  }
}
