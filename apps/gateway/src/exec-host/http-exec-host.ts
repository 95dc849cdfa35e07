import {
  ApplyDiffResponse,
  ChangePathsResponse,
  ChangesResponse,
  DestroySandboxResponse,
  EnvironmentLog,
  EnvironmentStatus,
  RepositoryDirectory,
  type RepositoryDirectoryRequest,
  ErrorBody,
  ExecExit,
  ExecHostErrorCode,
  ExecHostHealth,
  ExecHostRoutes,
  execHostRouteOf,
  ExecStreamChunk,
  ListFilesResponse,
  McpExit,
  McpMessageResponse,
  McpOpenResponse,
  type McpMessageRequest,
  type McpOpenRequest,
  PatchResponse,
  ProposedChange,
  ReadFileResponse,
  SandboxInfo,
  SearchFilesResponse,
  type CreateSandboxRequest,
  type EnvironmentRequest,
  type PrepareEnvironmentRequest,
  type ExecOutputChunk,
  type ExecRequest,
  type ListFilesRequest,
  type ProposeEditRequest,
  type ProposeWriteRequest,
  type ReadFileRequest,
  type SearchFilesRequest,
} from '@lemniscate/contracts';
import * as http from 'node:http';
import * as https from 'node:https';
import { Readable } from 'node:stream';
import type { z } from 'zod';
import { injectTraceHeaders, setSpanAttributes, SpanKind, withSpan } from '@lemniscate/telemetry';
import { ExecHostCallError, type ExecHostCheck, type ExecHostPort } from './exec-host.port';

/**
 * How long each kind of control call may take, in milliseconds. The exec stream has no bound here:
 * a command is bounded by its sandbox's own command timeout, and its output streams as it comes.
 */
export const EXEC_HOST_TIMEOUTS_MS = {
  /** A readiness probe: the exec-host answers at once or it is not ready. */
  health: 5_000,
  /** Removing a container and unmounting its disk, which takes seconds when many sandboxes end at once. */
  destroy: 30_000,
  /** A file operation or a review of the working copy's changes (a search has its own 5 s budget). */
  files: 30_000,
  /** Cloning the repository, applying the developer's patch and starting the container. */
  create: 120_000,
  /** The patch of everything kept, which may be large. */
  patch: 120_000,
  /**
   * Reading an environment's status (the devcontainer and lock files at the default ref), starting
   * or joining a preparation (answered at once; the work goes on in the background) or a page of its log.
   */
  environment: 30_000,
};
export type ExecHostTimeouts = typeof EXEC_HOST_TIMEOUTS_MS;

/** The gateway's side of mutual TLS (PEM text): its client certificate and key, and the CA exec-hosts' certificates come from. */
export interface ExecHostTlsOptions {
  cert: string;
  key: string;
  ca: string;
}

export interface HttpExecHostOptions {
  /** `http://127.0.0.1:PORT`, `https://host:PORT` (mutual TLS: `tls` required) or `unix:/absolute/path.sock`. */
  url: string;
  /** Sent as a bearer token on every call (LEMNISCATE_EXEC_HOST_TOKEN). */
  token: string | undefined;
  /** For `https://` URLs: the client certificate presented and the CA the exec-host's certificate must chain to. */
  tls?: ExecHostTlsOptions | null;
  timeoutsMs?: Partial<ExecHostTimeouts>;
}

/** Error codes of a connection that never carried a request: nothing reached the exec-host. */
const NEVER_REACHED = new Set(['ECONNREFUSED', 'ENOENT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EACCES', 'ENOTSOCK', 'EAI_AGAIN']);

/** Certificate verification failures of the exec-host's certificate (Node's and OpenSSL's codes). */
function untrustedCertificate(code: string | undefined): boolean {
  return (
    !!code &&
    (code === 'ERR_TLS_CERT_ALTNAME_INVALID' ||
      code === 'DEPTH_ZERO_SELF_SIGNED_CERT' ||
      code === 'SELF_SIGNED_CERT_IN_CHAIN' ||
      code.startsWith('UNABLE_TO_') ||
      code.startsWith('CERT_') ||
      code === 'ERR_TLS_CERT_ALTNAME_FORMAT')
  );
}

/** The exec-host ended the handshake with an alert: it did not accept this gateway's client certificate. */
function refusedClientCertificate(code: string | undefined, message: string): boolean {
  return !!code && code.startsWith('ERR_SSL_') && /alert/i.test(code + message);
}

/**
 * How long a connection may sit idle in the gateway's pool before it is closed: well inside the
 * exec-host's own keep-alive time (65 s), so that the gateway, not the exec-host, closes it. Node's
 * agent keeps an idle connection forever unless it has a timeout, and only with one does it heed an
 * exec-host's shorter `Keep-Alive: timeout=N` (closing a second before). A call sent as the
 * exec-host closes an idle connection meets a reset, and a command sent so is given up (below).
 */
const IDLE_CONNECTION_MS = 30_000;
const KEPT = { keepAlive: true, timeout: IDLE_CONNECTION_MS };

/** Methods whose request may be sent again: the exec-host's GET, HEAD and DELETE routes change nothing twice. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'DELETE']);

/** Where a request goes: a TCP origin (http/https) or a unix socket. */
interface Target {
  module: typeof http | typeof https;
  agent: http.Agent;
  base: http.RequestOptions;
}

function targetOf(options: HttpExecHostOptions): Target {
  const { url, tls } = options;
  if (url.startsWith('unix:')) {
    const socketPath = url.slice('unix:'.length);
    if (!socketPath.startsWith('/')) throw new Error(`The exec-host address ${url} must name an absolute socket path (unix:/run/lemniscate/exec-host.sock).`);
    if (tls) throw new Error(`The exec-host address ${url} is a unix socket: a client certificate applies to https:// addresses only.`);
    return { module: http, agent: new http.Agent(KEPT), base: { socketPath, host: 'localhost' } };
  }
  const parsed = new URL(url);
  const base: http.RequestOptions = { protocol: parsed.protocol, hostname: parsed.hostname.replace(/^\[|\]$/g, ''), port: parsed.port || undefined };
  if (parsed.protocol === 'https:') {
    const agent = new https.Agent({ ...KEPT, ...(tls ? { cert: tls.cert, key: tls.key, ca: tls.ca } : {}) });
    return { module: https, agent, base };
  }
  if (parsed.protocol !== 'http:') throw new Error(`The exec-host address ${url} must be http://, https:// or unix:/path.`);
  if (tls) throw new Error(`The exec-host address ${url} is http://: a client certificate applies to https:// addresses only.`);
  return { module: http, agent: new http.Agent(KEPT), base };
}

interface Call {
  body?: unknown;
  signal?: AbortSignal;
  /** null: no bound (the exec stream). */
  timeoutMs: number | null;
}

/**
 * The exec-host over HTTP, the gateway's one client of it: a bearer token on every call, a bound on
 * every call but the exec stream, responses validated with the shared schemas, and failures thrown
 * as ExecHostCallError with the exec-host's code and sentence.
 */
export class HttpExecHost implements ExecHostPort {
  private readonly timeouts: ExecHostTimeouts;
  private readonly target: Target;

  constructor(private readonly options: HttpExecHostOptions) {
    this.timeouts = { ...EXEC_HOST_TIMEOUTS_MS, ...options.timeoutsMs };
    this.target = targetOf(options);
  }

  /** Closes the kept-alive connections (a pool drops the client of a host it forgets). */
  close(): void {
    this.target.agent.destroy();
  }

  async health(): Promise<ExecHostCheck> {
    try {
      const res = await this.fetch('GET', ExecHostRoutes.health(), { timeoutMs: this.timeouts.health });
      if (!res.ok) {
        await res.body?.cancel();
        return { ok: false, message: res.status === 401 ? 'The exec-host refused the gateway token.' : `The exec-host answered HTTP ${res.status}.` };
      }
      const body = ExecHostHealth.safeParse(await res.json().catch(() => undefined));
      if (!body.success) return { ok: false, message: 'The exec-host answered its health check with a body the gateway does not understand.' };
      if (!body.data.engine.reachable) return { ok: false, message: `The exec-host cannot reach its container engine${body.data.engine.message ? `: ${body.data.engine.message}` : '.'}` };
      return body.data.status === 'ok' ? { ok: true } : { ok: true, message: 'The exec-host runs degraded (see its /v1/health).' };
    } catch (e) {
      return { ok: false, message: e instanceof ExecHostCallError ? e.message : 'The exec-host did not answer.' };
    }
  }

  create(request: CreateSandboxRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.sandboxes(), SandboxInfo, { body: request, signal, timeoutMs: this.timeouts.create });
  }

  destroy(sandboxId: string): Promise<void> {
    return this.traced('DELETE', ExecHostRoutes.sandbox(sandboxId), () => this.destroyNow(sandboxId));
  }

  private async destroyNow(sandboxId: string): Promise<void> {
    const res = await this.fetch('DELETE', ExecHostRoutes.sandbox(sandboxId), { timeoutMs: this.timeouts.destroy });
    setSpanAttributes({ 'http.response.status_code': res.status });
    if (res.status === 404) return void (await res.body?.cancel());
    if (!res.ok) throw await this.refusal(res);
    const body = DestroySandboxResponse.safeParse(await res.json().catch(() => undefined));
    if (!body.success) throw new ExecHostCallError('internal', `The exec-host answered the destruction of sandbox ${sandboxId} with a body the gateway does not understand.`, res.status);
  }

  /** The command's span covers its whole output stream, to its exit. */
  exec(sandboxId: string, request: ExecRequest, onOutput: (chunk: ExecOutputChunk) => void, signal?: AbortSignal): Promise<ExecExit> {
    return this.traced('POST', ExecHostRoutes.exec(sandboxId), async () => {
      const exit = await this.execNow(sandboxId, request, onOutput, signal);
      setSpanAttributes({ 'process.exit.code': exit.exitCode ?? -1, ...(exit.class ? { 'lemniscate.exec.class': exit.class } : {}) });
      return exit;
    });
  }

  private async execNow(sandboxId: string, request: ExecRequest, onOutput: (chunk: ExecOutputChunk) => void, signal?: AbortSignal): Promise<ExecExit> {
    let res: Response;
    try {
      res = await this.fetch('POST', ExecHostRoutes.exec(sandboxId), { body: request, signal, timeoutMs: null });
    } catch (err) {
      // Refused before anything was sent: the exec-host is unavailable. Dropped after the command was
      // sent: it may be running with nobody listening, so the sandbox is lost as when the stream is cut.
      if (err instanceof ExecHostCallError && err.code === 'engine_unavailable' && !err.neverReached) {
        throw new ExecHostCallError('sandbox_lost', `The connection to the exec-host broke after the command was sent (${err.message}): the sandbox is lost.`, 502);
      }
      throw err;
    }
    setSpanAttributes({ 'http.response.status_code': res.status });
    if (!res.ok) throw await this.refusal(res);
    if (!res.body) throw new ExecHostCallError('sandbox_lost', 'The exec-host answered the command without an output stream.', 502);
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
      throw new ExecHostCallError('sandbox_lost', `The connection to the exec-host broke while the command ran (${(err as Error).message}): the sandbox is lost.`, 502);
    }
    if (!exit) throw new ExecHostCallError('sandbox_lost', 'The command stream ended without an exit status: the sandbox was lost.', 502);
    return exit;
  }

  read(id: string, request: ReadFileRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'read'), ReadFileResponse, { body: request, signal, timeoutMs: this.timeouts.files });
  }
  list(id: string, request: ListFilesRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'list'), ListFilesResponse, { body: request, signal, timeoutMs: this.timeouts.files });
  }
  search(id: string, request: SearchFilesRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'search'), SearchFilesResponse, { body: request, signal, timeoutMs: this.timeouts.files });
  }
  proposeWrite(id: string, request: ProposeWriteRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'propose-write'), ProposedChange, { body: request, signal, timeoutMs: this.timeouts.files });
  }
  proposeEdit(id: string, request: ProposeEditRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'propose-edit'), ProposedChange, { body: request, signal, timeoutMs: this.timeouts.files });
  }
  apply(id: string, diff: string, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.file(id, 'apply'), ApplyDiffResponse, { body: { diff }, signal, timeoutMs: this.timeouts.files });
  }
  changes(id: string, signal?: AbortSignal) {
    return this.json('GET', ExecHostRoutes.changes(id), ChangesResponse, { signal, timeoutMs: this.timeouts.files });
  }
  accept(id: string, paths: string[], signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.acceptChanges(id), ChangePathsResponse, { body: { paths }, signal, timeoutMs: this.timeouts.files });
  }
  revert(id: string, paths: string[], signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.revertChanges(id), ChangePathsResponse, { body: { paths }, signal, timeoutMs: this.timeouts.files });
  }
  mcpOpen(id: string, request: McpOpenRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.mcp(id), McpOpenResponse, { body: request, signal, timeoutMs: this.timeouts.files });
  }
  /** Waits as long as the server takes to answer, within its own lifetime (the exec-host ends it then). */
  mcpMessage(id: string, processId: string, request: McpMessageRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.mcpMessages(id, processId), McpMessageResponse, { body: request, signal, timeoutMs: null });
  }
  mcpClose(id: string, processId: string, signal?: AbortSignal) {
    return this.json('DELETE', ExecHostRoutes.mcpProcess(id, processId), McpExit, { signal, timeoutMs: this.timeouts.files });
  }
  patch(id: string, signal?: AbortSignal) {
    return this.json('GET', ExecHostRoutes.patch(id), PatchResponse, { signal, timeoutMs: this.timeouts.patch });
  }

  environmentStatus(request: EnvironmentRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.environmentStatus(), EnvironmentStatus, { body: request, signal, timeoutMs: this.timeouts.environment });
  }
  prepareEnvironment(request: PrepareEnvironmentRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.prepareEnvironment(), EnvironmentStatus, { body: request, signal, timeoutMs: this.timeouts.environment });
  }
  environmentLog(jobId: string, offset: number, signal?: AbortSignal) {
    return this.json('GET', ExecHostRoutes.environmentLog(jobId, offset), EnvironmentLog, { signal, timeoutMs: this.timeouts.environment });
  }
  readRepositoryDirectory(request: RepositoryDirectoryRequest, signal?: AbortSignal) {
    return this.json('POST', ExecHostRoutes.repositoryDirectory(), RepositoryDirectory, { body: request, signal, timeoutMs: this.timeouts.environment });
  }

  private json<S extends z.ZodType>(method: string, path: string, schema: S, call: Call): Promise<z.output<S>> {
    return this.traced(method, path, async () => {
      const res = await this.fetch(method, path, call);
      setSpanAttributes({ 'http.response.status_code': res.status });
      if (!res.ok) throw await this.refusal(res);
      return schema.parse(await res.json());
    });
  }

  /** A client span per control-channel call, named by its route (`POST /v1/sandboxes/{id}/exec`), whose context the request carries. */
  private traced<T>(method: string, path: string, fn: () => Promise<T>): Promise<T> {
    const route = execHostRouteOf(path) ?? 'unknown';
    return withSpan(`${method} ${route}`, { kind: SpanKind.CLIENT, attributes: { 'http.request.method': method, 'url.template': route, 'lemniscate.exec_host.url': this.options.url } }, fn);
  }

  private async refusal(res: Response): Promise<ExecHostCallError> {
    return refusalOf(res.status, await res.text().catch(() => ''));
  }

  private async fetch(method: string, path: string, { body, signal, timeoutMs }: Call): Promise<Response> {
    const timeout = timeoutMs === null ? undefined : AbortSignal.timeout(timeoutMs);
    const signals = [signal, timeout].filter((s): s is AbortSignal => !!s);
    // The active span's W3C trace context, so the exec-host's spans join the tool call's trace.
    const headers: Record<string, string> = injectTraceHeaders({ accept: 'application/json' });
    if (this.options.token) headers.authorization = `Bearer ${this.options.token}`;
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    if (payload) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(payload.length);
    }
    try {
      return await this.request(method, path, headers, payload, signals.length ? AbortSignal.any(signals) : undefined);
    } catch (err) {
      if (signal?.aborted) throw signal.reason ?? err;
      const { code, message } = err as NodeJS.ErrnoException;
      const url = this.options.url;
      if (untrustedCertificate(code)) {
        throw new ExecHostCallError(
          'engine_unavailable',
          `The exec-host at ${url} could not be reached: its certificate was not trusted (${code}: ${message}); LEMNISCATE_EXEC_HOST_CA must be the CA that signed it, and the certificate must name the address's host.`,
          503,
          { neverReached: true, answered: false },
        );
      }
      if (refusedClientCertificate(code, message)) {
        throw new ExecHostCallError(
          'engine_unavailable',
          `The exec-host at ${url} refused the gateway's client certificate (${message}): it must come from the CA of its LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA.`,
          503,
          { neverReached: true, answered: false },
        );
      }
      const why = timeout?.aborted ? `did not answer within ${Math.round(timeoutMs! / 1000)} s` : 'could not be reached';
      throw new ExecHostCallError('engine_unavailable', `The exec-host at ${url} ${why}.`, 503, { neverReached: !!code && NEVER_REACHED.has(code), answered: false });
    }
  }

  /**
   * One request with node:http(s) (global fetch reaches neither a unix socket nor presents a client
   * certificate), answered as a web Response whose body streams as it comes. The signal cuts the
   * request, and the body after the answer began, as fetch's does.
   *
   * An idle connection the exec-host closed as this request went out on it is reset before any
   * answer: the exec-host never read the request. An idempotent request is then sent once more, on
   * a new connection; any other fails as unreachable, since a reset alone cannot tell that case from
   * an exec-host that stopped while working on it.
   */
  private async request(method: string, path: string, headers: Record<string, string>, payload: Buffer | undefined, signal: AbortSignal | undefined): Promise<Response> {
    try {
      return await this.requestOnce(method, path, headers, payload, signal);
    } catch (err) {
      const { code, reusedSocket } = err as NodeJS.ErrnoException & { reusedSocket?: boolean };
      if (!reusedSocket || !IDEMPOTENT.has(method) || signal?.aborted || (code !== 'ECONNRESET' && code !== 'EPIPE')) throw err;
      return this.requestOnce(method, path, headers, payload, signal);
    }
  }

  private requestOnce(method: string, path: string, headers: Record<string, string>, payload: Buffer | undefined, signal: AbortSignal | undefined): Promise<Response> {
    return new Promise((resolve, reject) => {
      const req = this.target.module.request({ ...this.target.base, agent: this.target.agent, method, path, headers, ...(signal ? { signal } : {}) }, (res) => {
        const answer = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (Array.isArray(value)) for (const v of value) answer.append(name, v);
          else if (value !== undefined) answer.set(name, value);
        }
        const status = res.statusCode ?? 502;
        const noBody = method === 'HEAD' || status === 204 || status === 205 || status === 304;
        if (noBody) res.resume();
        resolve(new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage ?? '', headers: answer }));
      });
      // Whether the request went out on a connection kept from an earlier one, for the retry above.
      req.once('error', (err) => reject(Object.assign(err, { reusedSocket: req.reusedSocket })));
      req.end(payload);
    });
  }
}

/** A refusal of the exec-host as an error: its code and sentence when it sent an ErrorBody, its HTTP status otherwise. */
export function refusalOf(status: number, text: string): ExecHostCallError {
  try {
    const body = ErrorBody.parse(JSON.parse(text));
    const code = ExecHostErrorCode.safeParse(body.code);
    return new ExecHostCallError(code.success ? code.data : 'internal', body.message, status);
  } catch {
    return new ExecHostCallError('internal', `The exec-host answered HTTP ${status}.`, status);
  }
}
