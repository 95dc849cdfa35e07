import {
  ErrorBody,
  fillPath,
  GATEWAY_API_PREFIX,
  GatewayRoutes,
  IdPrefix,
  type ApprovalState,
  type ApprovalView,
  type SessionListItem,
  type AuditVerificationView,
  type CreatedToken,
  type EnvironmentLog,
  type EnvironmentStatus,
  type ExecHostView,
  type GatewayRoute,
  type LoginResponse,
  type MeResponse,
  type OkResponse,
  type PathParams,
  type PolicyDryRunResponse,
  type PolicyVersionView,
  type ProjectAgentsView,
  type ProjectMcpView,
  type ProjectMemberView,
  type ProjectView,
  type RepositoryAccess,
  type RepositoryAccessView,
  type SessionStatus,
  type SessionView,
  type StopSessionResponse,
  type ToolCallView,
  type UserView,
  checkSize,
  checkText,
} from '@lemniscate/contracts';
import { injectTraceHeaders } from '@lemniscate/telemetry';
import type { z } from 'zod';
import { CliError, type CliErrorClass } from '../errors';

const API = GATEWAY_API_PREFIX;

/** A session start: the body of `POST /sessions` as libs/contracts' GatewayRoutes defines it. */
export type StartSessionRequest = z.input<typeof GatewayRoutes.createSession.body>;

/**
 * The checks the gateway makes on a session start's sizes, made before anything is uploaded, with
 * the same sentences (the limits come from the contracts). null when the request fits.
 */
function startRequestOverLimit(request: Pick<StartSessionRequest, 'instruction' | 'startingPatch'>): string | null {
  const instruction = checkText('instructionBytes', request.instruction);
  if (instruction) return instruction;
  if (request.startingPatch !== undefined) {
    const patch = checkText('startingPatchBytes', request.startingPatch);
    if (patch) return `${patch} Commit part of the work, or leave out --include-uncommitted.`;
  }
  return null;
}

/** The audit service's verification: the first altered, removed or reordered entry when the chain breaks. */
type AuditVerifyResult = AuditVerificationView;

export interface AuditExportQuery {
  format: 'jsonl' | 'csv';
  project?: string | undefined;
  user?: string | undefined;
  session?: string | undefined;
  kind?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  afterSeq?: number | undefined;
}

type FetchLike = typeof fetch;

type Query = Record<string, string | number | undefined>;
type JsonRoute = GatewayRoute & { readonly response: z.ZodType };
type BodyOf<R> = R extends { readonly body: infer B extends z.ZodType } ? z.input<B> : undefined;

/** A call of one GatewayRoutes entry: its path's values, its body (typed by the route's schema), its query. */
interface CallOptions<R extends JsonRoute> {
  params?: PathParams<R>;
  body?: BodyOf<R>;
  query?: Query;
  headers?: Record<string, string>;
  /** Turns a 404 into this sentence rather than the gateway's. */
  notFound?: string;
}

/** A connection that dropped under the request, as opposed to a gateway that is not there. */
const RESET_CODES = ['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'];

function describeNetworkFailure(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: string } } | undefined)?.cause;
  return cause?.code;
}

/** How long a read waits out the gateway's database being away (its own retry window is 30 s). */
const DATABASE_WAIT_MS = 30_000;

/**
 * The gateway's REST API, typed by libs/contracts. Every response is validated, so a mismatch between
 * CLI and gateway versions is reported as such instead of surfacing later as a confusing crash.
 */
export class GatewayClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string | undefined,
    private readonly fetchImpl: FetchLike = fetch,
  ) {}

  get hasToken(): boolean {
    return this.token !== undefined && this.token !== '';
  }

  /** The bearer token, for the live-event connection. */
  get bearer(): string | undefined {
    return this.token;
  }

  unreachable(): CliError {
    return new CliError(`Cannot reach the gateway at ${this.baseUrl}: is it running? (\`npm start\`)`, 'gateway_unreachable');
  }

  async raw(method: string, path: string, init: { body?: unknown; query?: Record<string, string | number | undefined>; headers?: Record<string, string> } = {}): Promise<Response> {
    const url = new URL(`${this.baseUrl}${API}${path}`);
    for (const [k, v] of Object.entries(init.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    // The command's trace context (when tracing is on), so the gateway's spans join the CLI's trace.
    const headers: Record<string, string> = injectTraceHeaders({ accept: 'application/json' });
    if (this.hasToken) headers.authorization = `Bearer ${this.token}`;
    // An empty value removes a header: a cookie-authenticated call must not also send a token.
    for (const [k, v] of Object.entries(init.headers ?? {})) {
      if (v === '') delete headers[k];
      else headers[k] = v;
    }
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    const body = init.body === undefined ? undefined : JSON.stringify(init.body);
    // The gateway would refuse a body over its limit; say so here, before uploading it.
    if (body !== undefined) {
      const tooLarge = checkSize(method === 'POST' && path === '/sessions' ? 'sessionRequestBodyBytes' : 'requestBodyBytes', Buffer.byteLength(body));
      if (tooLarge) throw new CliError(tooLarge, 'too_large');
    }
    const send = () => this.fetchImpl(url, { method, headers, body });
    try {
      try {
        return await send();
      } catch (error) {
        // A kept-alive socket the gateway closed as the request left is reset before any answer; a
        // read is safe to send again on a new connection, once. A write is not: it may have arrived.
        if ((method === 'GET' || method === 'HEAD') && RESET_CODES.includes(describeNetworkFailure(error) ?? '')) return await send();
        throw error;
      }
    } catch (error) {
      const code = describeNetworkFailure(error);
      if (code === undefined || ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT'].includes(code)) {
        throw this.unreachable();
      }
      throw new CliError(`The request to the gateway at ${this.baseUrl} failed (${code}).`, 'gateway_unreachable');
    }
  }

  /** The path of a route relative to the API prefix, with its values filled in. */
  private pathOf(route: GatewayRoute, params: Record<string, string | number> = {}): string {
    const full = fillPath(route.path, params);
    return full.startsWith(`${API}/`) ? full.slice(API.length) : full;
  }

  /**
   * One call of a GatewayRoutes entry: its method and path from the table, the answer parsed with the
   * route's response schema, so a CLI and a gateway of different versions say so instead of crashing later.
   */
  private async request<R extends JsonRoute>(route: R, options: CallOptions<R> = {}): Promise<z.output<R['response']>> {
    const { method } = route;
    const path = this.pathOf(route, options.params as Record<string, string | number> | undefined);
    const started = Date.now();
    let response: Response;
    let json: unknown = undefined;
    for (let attempt = 1; ; attempt++) {
      response = await this.raw(method, path, options);
      const text = await response.text();
      json = undefined;
      if (text !== '') {
        try {
          json = JSON.parse(text);
        } catch {
          if (response.ok) throw this.contractError(method, path, 'the body is not JSON');
        }
      }
      // The gateway's database is restarting: a read is asked again, for up to DATABASE_WAIT_MS,
      // instead of ending a session the gateway is still running.
      if (method !== 'GET' || response.status !== 503 || (json as { code?: unknown } | undefined)?.code !== 'database_unavailable') break;
      const pause = Math.min(2_000, 100 * 2 ** (attempt - 1));
      if (Date.now() - started + pause > DATABASE_WAIT_MS) break;
      await new Promise((r) => setTimeout(r, pause));
    }
    if (!response.ok) throw this.errorFor(response.status, json, method, path, options.notFound);
    const parsed = route.response.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw this.contractError(method, path, `${issue?.path.join('.') || '(body)'} ${issue?.message ?? 'is invalid'}`);
    }
    return parsed.data as z.output<R['response']>;
  }

  private contractError(method: string, path: string, detail: string): CliError {
    return new CliError(
      `The gateway at ${this.baseUrl} answered ${method} ${API}${path} with an unexpected body (${detail}); the CLI and the gateway are probably different versions.`,
      'gateway_contract',
    );
  }

  errorFor(status: number, json: unknown, method: string, path: string, notFound?: string): CliError {
    const body = ErrorBody.safeParse(json);
    const said = body.success ? body.data.message : undefined;
    const ref = body.success && body.data.requestId ? ` (request ${body.data.requestId})` : '';
    const classFor = (s: number): CliErrorClass => (s === 403 ? 'forbidden' : s === 404 ? 'not_found' : s === 409 ? 'conflict' : 'gateway_error');
    if (status === 401) {
      return new CliError(
        this.hasToken
          ? `The gateway at ${this.baseUrl} refused the API token (unknown, expired or revoked): run \`lemni login\` or pass a valid --token.`
          : `The gateway at ${this.baseUrl} needs an API token: run \`lemni login\`, pass --token, or set LEMNISCATE_TOKEN.`,
        'unauthenticated',
      );
    }
    if (status === 404 && notFound !== undefined) return new CliError(notFound, 'not_found');
    if (said !== undefined) return new CliError(`${said}${ref}`, classFor(status));
    return new CliError(`The gateway at ${this.baseUrl} answered ${method} ${API}${path} with HTTP ${status}.`, classFor(status));
  }

  // --- identity ---

  /** Whether the gateway offers single sign-on (asked before anyone is signed in). */
  oidcInfo(): Promise<z.output<typeof GatewayRoutes.oidcInfo.response>> {
    return this.request(GatewayRoutes.oidcInfo);
  }

  me(): Promise<MeResponse> {
    return this.request(GatewayRoutes.me);
  }

  /** Signs in with a password and returns the cookie and CSRF token needed to create an API token. */
  async login(email: string, password: string): Promise<{ cookie: string; csrfToken: string; response: LoginResponse }> {
    const route = GatewayRoutes.login;
    const path = this.pathOf(route);
    const response = await this.raw(route.method, path, { body: { email, password } satisfies z.input<typeof route.body> });
    if (response.status === 401) {
      await response.body?.cancel();
      throw new CliError('The gateway refused this email and password.', 'unauthenticated');
    }
    return this.sessionOf(route, path, response);
  }

  /**
   * `lemni login --sso`: redeems the one-time code the sign-in sent to the CLI's loopback address with
   * the verifier of the challenge it started with; answers a session, as a password sign-in does.
   */
  async oidcCli(code: string, codeVerifier: string): Promise<{ cookie: string; csrfToken: string; response: LoginResponse }> {
    const route = GatewayRoutes.oidcCli;
    const path = this.pathOf(route);
    const response = await this.raw(route.method, path, { body: { code, codeVerifier } satisfies z.input<typeof route.body> });
    return this.sessionOf(route, path, response);
  }

  private async sessionOf(route: typeof GatewayRoutes.login | typeof GatewayRoutes.oidcCli, path: string, response: Response): Promise<{ cookie: string; csrfToken: string; response: LoginResponse }> {
    const json: unknown = await response.json().catch(() => undefined);
    if (!response.ok) throw this.errorFor(response.status, json, route.method, path);
    const parsed = route.response.safeParse(json);
    if (!parsed.success) throw this.contractError(route.method, path, parsed.error.issues[0]?.message ?? 'invalid');
    const cookie = response.headers
      .getSetCookie()
      .map((c) => c.split(';')[0] ?? '')
      .filter((c) => c !== '')
      .join('; ');
    return { cookie, csrfToken: parsed.data.csrfToken, response: parsed.data };
  }

  createToken(name: string, session: { cookie: string; csrfToken: string }, expiresInDays = 90): Promise<CreatedToken> {
    return this.request(GatewayRoutes.createToken, {
      body: { name, expiresInDays },
      headers: { cookie: session.cookie, 'x-csrf-token': session.csrfToken, authorization: '' },
    });
  }

  // --- projects and policy ---

  listProjects(): Promise<ProjectView[]> {
    return this.request(GatewayRoutes.listProjects);
  }

  /** Projects are named by people and identified by id on the wire. */
  async projectByName(name: string): Promise<ProjectView> {
    const projects = await this.listProjects();
    const found = projects.find((p) => p.name === name || p.id === name);
    if (!found) {
      const names = projects.map((p) => p.name);
      throw new CliError(
        `Unknown project "${name}": ${names.length > 0 ? `the projects you can use are ${names.join(', ')}` : 'no project is visible to you yet'} (\`lemni projects\` lists them).`,
        'unknown_project',
      );
    }
    return found;
  }

  createProject(body: z.input<typeof GatewayRoutes.createProject.body>): Promise<ProjectView> {
    return this.request(GatewayRoutes.createProject, { body });
  }

  updateProject(projectId: string, body: z.input<typeof GatewayRoutes.updateProject.body>): Promise<ProjectView> {
    return this.request(GatewayRoutes.updateProject, { params: { projectId }, body });
  }

  projectMembers(projectId: string): Promise<ProjectMemberView[]> {
    return this.request(GatewayRoutes.listMembers, { params: { projectId } });
  }

  addMember(projectId: string, userId: string): Promise<OkResponse> {
    return this.request(GatewayRoutes.addMember, { params: { projectId }, body: { userId } });
  }

  removeMember(projectId: string, userId: string): Promise<OkResponse> {
    return this.request(GatewayRoutes.removeMember, { params: { projectId, userId } });
  }

  listUsers(): Promise<UserView[]> {
    return this.request(GatewayRoutes.listUsers);
  }

  /** The project's policy in force; null while none is published (the built-in default applies). */
  async currentPolicy(projectId: string): Promise<PolicyVersionView | null> {
    try {
      return await this.request(GatewayRoutes.currentPolicy, { params: { projectId }, notFound: 'no published policy' });
    } catch (error) {
      if (error instanceof CliError && error.errorClass === 'not_found') return null;
      throw error;
    }
  }

  publishPolicy(projectId: string, sourceText: string, comment: string): Promise<PolicyVersionView> {
    return this.request(GatewayRoutes.publishPolicy, {
      params: { projectId },
      body: { sourceText, comment },
    });
  }

  /** C1: the project's recent tool calls decided again under a draft; nothing is published. */
  policyDryRun(projectId: string, sourceText: string, sessions: number): Promise<PolicyDryRunResponse> {
    return this.request(GatewayRoutes.policyDryRun, { params: { projectId }, body: { sourceText, sessions } });
  }

  // --- a project's repository (ADR 0012) ---

  /** How the platform fetches the project's repository: never the credential itself. */
  repositoryAccess(projectId: string): Promise<RepositoryAccessView> {
    return this.request(GatewayRoutes.repositoryAccess, { params: { projectId } });
  }

  /** Replaces the whole of the project's repository access (administrators of the project). */
  setRepositoryAccess(projectId: string, access: RepositoryAccess): Promise<RepositoryAccessView> {
    return this.request(GatewayRoutes.setRepositoryAccess, { params: { projectId }, body: access });
  }

  clearRepositoryAccess(projectId: string): Promise<RepositoryAccessView> {
    return this.request(GatewayRoutes.clearRepositoryAccess, { params: { projectId } });
  }

  /** The agents the project's repository defines at its default ref, as the gateway reads them. */
  projectMcp(projectId: string): Promise<ProjectMcpView> {
    return this.request(GatewayRoutes.projectMcp, { params: { projectId } });
  }

  projectAgents(projectId: string): Promise<ProjectAgentsView> {
    return this.request(GatewayRoutes.projectAgents, { params: { projectId } });
  }

  // --- a project's environment ---

  environmentStatus(projectId: string): Promise<EnvironmentStatus> {
    return this.request(GatewayRoutes.environmentStatus, { params: { projectId } });
  }

  prepareEnvironment(projectId: string, force: boolean): Promise<EnvironmentStatus> {
    return this.request(GatewayRoutes.prepareEnvironment, { params: { projectId }, body: { force } });
  }

  environmentLog(projectId: string, jobId: string, offset: number): Promise<EnvironmentLog> {
    return this.request(GatewayRoutes.environmentLog, { params: { projectId, jobId }, query: { offset } });
  }

  // --- sessions ---

  startSession(request: StartSessionRequest): Promise<SessionView> {
    const tooLarge = startRequestOverLimit(request);
    if (tooLarge) return Promise.reject(new CliError(tooLarge, 'too_large'));
    return this.request(GatewayRoutes.createSession, { body: request });
  }

  listSessions(
    query: { projectId?: string | undefined; status?: SessionStatus | undefined; userId?: string | undefined; waiting?: 'true' | undefined; limit?: number | undefined } = {},
  ): Promise<SessionListItem[]> {
    return this.request(GatewayRoutes.listSessions, { query });
  }

  /**
   * A session from what a person typed: its whole id, or the first characters of one (at least 4)
   * that start exactly one session the caller can see; otherwise a sentence naming the candidates.
   */
  async getSession(typed: string): Promise<SessionView> {
    return resolveId(
      'session',
      typed,
      (id) => this.request(GatewayRoutes.getSession, { params: { id }, notFound: `No session ${id} is visible to you (\`lemni sessions\` lists them).` }),
      (idPrefix) => this.request(GatewayRoutes.listSessions, { query: { idPrefix, limit: PREFIX_MATCHES } }),
      (s) => shortLabel(s.instruction),
      '`lemni sessions` lists them',
    );
  }

  /** The whole id of the session a person named (see getSession); a whole id is taken as it is. */
  async sessionId(typed: string): Promise<string> {
    return WHOLE_ID.test(typed.trim()) ? typed.trim().toLowerCase() : (await this.getSession(typed)).id;
  }

  /** As sessionId, for an approval. */
  async approvalId(typed: string): Promise<string> {
    return WHOLE_ID.test(typed.trim()) ? typed.trim().toLowerCase() : (await this.getApproval(typed)).id;
  }

  async toolCalls(typed: string): Promise<ToolCallView[]> {
    return this.request(GatewayRoutes.sessionToolCalls, { params: { id: await this.sessionId(typed) } });
  }

  async stopSession(typed: string, reason?: string): Promise<StopSessionResponse> {
    const id = await this.sessionId(typed);
    return this.request(GatewayRoutes.stopSession, {
      params: { id },
      body: reason === undefined ? {} : { reason },
      notFound: `No session ${id} is visible to you (\`lemni sessions\` lists them).`,
    });
  }

  async revokeSession(typed: string, reason?: string): Promise<StopSessionResponse> {
    const id = await this.sessionId(typed);
    return this.request(GatewayRoutes.revokeSession, {
      params: { id },
      body: reason === undefined ? {} : { reason },
      notFound: `No session ${id} is visible to you (\`lemni sessions\` lists them).`,
    });
  }

  /** `@general …` / `@explore …`: a background subagent under a running session (`POST /sessions/:id/subagents`). */
  startSubagent(parentSessionId: string, agent: string, instruction: string): Promise<SessionView> {
    return this.request(GatewayRoutes.startSubagent, {
      params: { id: parentSessionId },
      body: GatewayRoutes.startSubagent.body.parse({ agent, instruction }),
    });
  }

  // --- approvals ---

  listApprovals(query: { state?: ApprovalState | undefined; sessionId?: string | undefined } = {}): Promise<ApprovalView[]> {
    return this.request(GatewayRoutes.listApprovals, { query });
  }

  async getApproval(typed: string): Promise<ApprovalView> {
    return resolveId(
      'approval',
      typed,
      (id) => this.request(GatewayRoutes.getApproval, { params: { id }, notFound: `No approval ${id} is visible to you (\`lemni approvals\` lists the pending ones).` }),
      (idPrefix) => this.request(GatewayRoutes.listApprovals, { query: { idPrefix, limit: PREFIX_MATCHES } }),
      (a) => `${a.kind}, ${a.state}`,
      '`lemni approvals` lists the pending ones',
    );
  }

  async answerApproval(typed: string, answer: 'approve' | 'reject', body: z.input<typeof GatewayRoutes.approve.body> = {}): Promise<ApprovalView> {
    const id = await this.approvalId(typed);
    const route = answer === 'approve' ? GatewayRoutes.approve : GatewayRoutes.reject;
    return this.request(route, {
      params: { id },
      body: route.body.parse(body),
      notFound: `No approval ${id} is visible to you (\`lemni approvals\` lists the pending ones).`,
    });
  }

  // --- the exec-host pool (administrators; security officers may list) ---

  listExecHosts(): Promise<ExecHostView[]> {
    return this.request(GatewayRoutes.listExecHosts);
  }

  drainExecHost(hostId: string, reason?: string): Promise<ExecHostView> {
    return this.request(GatewayRoutes.drainExecHost, { params: { hostId }, body: reason === undefined ? {} : { reason } });
  }

  undrainExecHost(hostId: string): Promise<ExecHostView> {
    return this.request(GatewayRoutes.undrainExecHost, { params: { hostId } });
  }

  // --- audit ---

  /** With an anchor (a head kept from an earlier verification), a log rewritten end to end is caught too. */
  auditVerify(anchor?: { seq: number; hash: string }): Promise<AuditVerifyResult> {
    return this.request(GatewayRoutes.auditVerify, { query: anchor ? { anchorSeq: anchor.seq, anchorHash: anchor.hash } : {} });
  }

  /** Streams the export body as it arrives; the export can be far larger than memory. */
  async auditExport(query: AuditExportQuery, write: (chunk: Uint8Array) => void): Promise<void> {
    const { format, project, user, session, kind, from, to, afterSeq } = query;
    // Named as the audit service's filter (AuditFilter); a user is an actor `user:ID`.
    const params = { format, projectId: project, actor: user === undefined ? undefined : `user:${user}`, sessionId: session, kind, from, to, afterSeq };
    const route = GatewayRoutes.auditExport;
    const path = this.pathOf(route);
    const response = await this.raw(route.method, path, { query: params, headers: { accept: query.format === 'csv' ? 'text/csv' : 'application/x-ndjson' } });
    if (!response.ok) {
      const json: unknown = await response.json().catch(() => undefined);
      throw this.errorFor(response.status, json, route.method, path);
    }
    if (!response.body) return;
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      write(value);
    }
  }
}

/** How many records a prefix lookup asks for: enough to name the candidates of an ambiguous one. */
const PREFIX_MATCHES = 6;
/** A whole id as the gateway makes them (a UUID): used as it is, without a lookup. */
const WHOLE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function shortLabel(text: string): string {
  const line = text.split('\n')[0] ?? '';
  return line.length > 40 ? `"${line.slice(0, 39)}…"` : `"${line}"`;
}

/**
 * The record a person named: asked for by id first (a whole id, or an id of another form), and when
 * there is none, looked up as the start of an id among the records the caller can see.
 */
async function resolveId<T extends { id: string }>(
  kind: string,
  typed: string,
  get: (id: string) => Promise<T>,
  find: (idPrefix: string) => Promise<T[]>,
  label: (t: T) => string,
  where: string,
): Promise<T> {
  const text = typed.trim();
  if (WHOLE_ID.test(text)) return get(text.toLowerCase());
  const prefix = IdPrefix.safeParse(text);
  if (prefix.success || text.length < 4) {
    try {
      return await get(text);
    } catch (error) {
      if (!(error instanceof CliError) || error.errorClass !== 'not_found') throw error;
      if (!prefix.success) throw new CliError(`No ${kind} ${text} is visible to you; a short id needs at least its first 4 characters (${where}).`, 'not_found');
    }
  } else {
    throw new CliError(`"${text}" is not a ${kind} id: ids are letters, digits and "-" (${where}).`, 'usage');
  }
  const matches = await find(text.toLowerCase());
  if (matches.length === 1) return matches[0] as T;
  if (matches.length === 0) throw new CliError(`No ${kind} you can see has an id starting with ${text} (${where}).`, 'not_found');
  const shown = matches.slice(0, PREFIX_MATCHES - 1).map((m) => `  ${m.id}  ${label(m)}`);
  const more = matches.length >= PREFIX_MATCHES ? '\n  …and more' : '';
  throw new CliError(
    `${text} is ambiguous: it starts the ids of ${matches.length >= PREFIX_MATCHES ? 'several' : matches.length} ${kind}s you can see; give more characters:\n${shown.join('\n')}${more}`,
    'ambiguous_id',
  );
}
