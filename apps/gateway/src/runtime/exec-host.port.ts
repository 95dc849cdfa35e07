import {
  ApplyDiffResponse,
  ChangePathsResponse,
  ChangesResponse,
  ErrorBody,
  ExecExit,
  ExecHostRoutes,
  ExecStreamChunk,
  ListFilesResponse,
  PatchResponse,
  ProposedChange,
  ReadFileResponse,
  SandboxInfo,
  SearchFilesResponse,
  type CreateSandboxRequest,
  type ExecOutputChunk,
  type ExecRequest,
  type ListFilesRequest,
  type ProposeEditRequest,
  type ProposeWriteRequest,
  type ReadFileRequest,
  type SearchFilesRequest,
} from '@lemniscate/contracts';
import type { z } from 'zod';

/** What the session loop needs from an exec-host: the control channel of libs/contracts/exec-host.ts. */
export interface ExecHostPort {
  create(request: CreateSandboxRequest, signal?: AbortSignal): Promise<SandboxInfo>;
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
}

/** An error answered by the exec-host, with its machine-readable code and its sentence. */
export class ExecHostError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    /** For engine_unavailable: the connection was refused, so no request reached the exec-host. */
    readonly neverReached = false,
  ) {
    super(message);
    this.name = 'ExecHostError';
  }
}

export interface HttpExecHostOptions {
  url: string;
  token: string;
  /** Bound on every non-streaming call; exec streams are bounded by the sandbox's own command timeout. */
  timeoutMs?: number;
}

/** The exec-host over HTTP: bearer token on every call, responses validated with the shared schemas. */
export class HttpExecHost implements ExecHostPort {
  private readonly timeoutMs: number;

  constructor(private readonly options: HttpExecHostOptions) {
    this.timeoutMs = options.timeoutMs ?? 120_000;
  }

  create(request: CreateSandboxRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.sandboxes(), SandboxInfo, request, signal);
  }

  async destroy(sandboxId: string): Promise<void> {
    const res = await this.fetch('DELETE', ExecHostRoutes.sandbox(sandboxId));
    if (!res.ok && res.status !== 404) throw await this.error(res);
    await res.body?.cancel();
  }

  async exec(sandboxId: string, request: ExecRequest, onOutput: (chunk: ExecOutputChunk) => void, signal?: AbortSignal): Promise<ExecExit> {
    let res: Response;
    try {
      res = await this.fetch('POST', ExecHostRoutes.exec(sandboxId), request, signal, false);
    } catch (err) {
      // Refused before anything was sent: the exec-host is unavailable. Dropped after the command was
      // sent: it may be running with nobody listening, so the sandbox is lost as when the stream is cut.
      if (err instanceof ExecHostError && err.code === 'engine_unavailable' && !err.neverReached) {
        throw new ExecHostError('sandbox_lost', `The connection to the exec-host broke after the command was sent (${err.message}): the sandbox is lost.`, 502);
      }
      throw err;
    }
    if (!res.ok) throw await this.error(res);
    if (!res.body) throw new ExecHostError('sandbox_lost', 'The exec-host answered the command without an output stream.', 502);
    const decoder = new TextDecoder();
    let buffered = '';
    let exit: ExecExit | undefined;
    const handle = (line: string) => {
      if (!line.trim()) return;
      const chunk = ExecStreamChunk.parse(JSON.parse(line));
      if (chunk.type === 'exit') exit = chunk;
      else onOutput(chunk);
    };
    try {
      for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffered += decoder.decode(piece, { stream: true });
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          handle(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
        }
      }
      handle(buffered + decoder.decode());
    } catch (err) {
      if (signal?.aborted) throw err;
      // The body was cut (exec-host killed, connection reset) or came back garbled: the control channel
      // to the sandbox is gone mid-command, so nothing it reports can be trusted. Never a tool failure.
      throw new ExecHostError('sandbox_lost', `The connection to the exec-host broke while the command ran (${(err as Error).message}): the sandbox is lost.`, 502);
    }
    if (!exit) throw new ExecHostError('sandbox_lost', 'The command stream ended without an exit status: the sandbox was lost.', 502);
    return exit;
  }

  read(id: string, request: ReadFileRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'read'), ReadFileResponse, request, signal);
  }
  list(id: string, request: ListFilesRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'list'), ListFilesResponse, request, signal);
  }
  search(id: string, request: SearchFilesRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'search'), SearchFilesResponse, request, signal);
  }
  proposeWrite(id: string, request: ProposeWriteRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'propose-write'), ProposedChange, request, signal);
  }
  proposeEdit(id: string, request: ProposeEditRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'propose-edit'), ProposedChange, request, signal);
  }
  apply(id: string, diff: string, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'apply'), ApplyDiffResponse, { diff }, signal);
  }
  changes(id: string, signal?: AbortSignal) {
    return this.json('GET', ExecHostRoutes.changes(id), ChangesResponse, undefined, signal);
  }
  accept(id: string, paths: string[], signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.acceptChanges(id), ChangePathsResponse, { paths }, signal);
  }
  revert(id: string, paths: string[], signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.revertChanges(id), ChangePathsResponse, { paths }, signal);
  }
  patch(id: string, signal?: AbortSignal) {
    return this.json('GET', ExecHostRoutes.patch(id), PatchResponse, undefined, signal);
  }

  private async json<S extends z.ZodType>(method: string, path: string, schema: S, body: unknown, signal?: AbortSignal): Promise<z.output<S>> {
    const res = await this.fetch(method, path, body, signal);
    if (!res.ok) throw await this.error(res);
    return schema.parse(await res.json());
  }

  private async fetch(method: string, path: string, body?: unknown, signal?: AbortSignal, bounded = true): Promise<Response> {
    const signals = [signal, bounded ? AbortSignal.timeout(this.timeoutMs) : undefined].filter((s): s is AbortSignal => !!s);
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.token}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      return await fetch(`${this.options.url}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signals.length ? AbortSignal.any(signals) : undefined,
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      const why = (err as Error).name === 'TimeoutError' ? `did not answer within ${Math.round(this.timeoutMs / 1000)} s` : 'could not be reached';
      const code = ((err as Error).cause as { code?: string } | undefined)?.code;
      const neverReached = code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH';
      throw new ExecHostError('engine_unavailable', `The exec-host at ${this.options.url} ${why}.`, 503, neverReached);
    }
  }

  private async error(res: Response): Promise<ExecHostError> {
    const text = await res.text().catch(() => '');
    try {
      const body = ErrorBody.parse(JSON.parse(text));
      return new ExecHostError(body.code, body.message, res.status);
    } catch {
      return new ExecHostError('internal', `The exec-host answered HTTP ${res.status}.`, res.status);
    }
  }
}
