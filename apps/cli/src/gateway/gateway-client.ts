import {
  AnswerApprovalRequest,
  ApprovalState,
  ApprovalView,
  CreatedToken,
  CreateSessionRequest,
  ErrorBody,
  LoginResponse,
  MeResponse,
  PolicyVersionView,
  ProjectView,
  SessionStatus,
  SessionView,
  StartSubagentRequest,
  StopSessionResponse,
  ToolCallView,
  checkSize,
  checkText,
} from '@lemniscate/contracts';
import { z } from 'zod';
import { CliError, type CliErrorClass } from '../errors';

const API = '/api/v1';

/**
 * The checks the gateway makes on a session start's sizes, made before anything is uploaded, with
 * the same sentences (the limits come from the contracts). null when the request fits.
 */
export function startRequestOverLimit(request: Pick<StartSessionRequest, 'instruction' | 'startingPatch'>): string | null {
  const instruction = checkText('instructionBytes', request.instruction);
  if (instruction) return instruction;
  if (request.startingPatch !== undefined) {
    const patch = checkText('startingPatchBytes', request.startingPatch);
    if (patch) return `${patch} Commit part of the work, or leave out --include-uncommitted.`;
  }
  return null;
}

/** What a session start needs beyond the published contract; see apps/cli/NEEDS.md. */
export type StartSessionRequest = z.input<typeof CreateSessionRequest> & {
  /** A model reference such as `scripted:PATH`; omitted means the project's configured model. */
  model?: string;
  /** `git diff HEAD --binary` of the developer's uncommitted work, applied before the agent starts. */
  startingPatch?: string;
};

/** The audit service's verification: the first altered, removed or reordered entry when the chain breaks. */
export const AuditVerifyResult = z.looseObject({
  ok: z.boolean(),
  checked: z.number().int().nonnegative().optional(),
  seq: z.number().int().optional(),
  problem: z.string().optional(),
  message: z.string().optional(),
  lastSeq: z.number().int().optional(),
  lastHash: z.string().optional(),
});
export type AuditVerifyResult = z.infer<typeof AuditVerifyResult>;

export interface AuditExportQuery {
  format: 'jsonl' | 'csv';
  project?: string | undefined;
  user?: string | undefined;
  session?: string | undefined;
  kind?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
}

type FetchLike = typeof fetch;

interface RequestOptions<T> {
  schema: z.ZodType<T>;
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  headers?: Record<string, string>;
  /** Turns a 404 into this sentence rather than the gateway's. */
  notFound?: string;
}

function describeNetworkFailure(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: string } } | undefined)?.cause;
  return cause?.code;
}

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
    const headers: Record<string, string> = { accept: 'application/json' };
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
    try {
      return await this.fetchImpl(url, { method, headers, body });
    } catch (error) {
      const code = describeNetworkFailure(error);
      if (code === undefined || ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT'].includes(code)) {
        throw this.unreachable();
      }
      throw new CliError(`The request to the gateway at ${this.baseUrl} failed (${code}).`, 'gateway_unreachable');
    }
  }

  private async request<T>(method: string, path: string, options: RequestOptions<T>): Promise<T> {
    const response = await this.raw(method, path, options);
    const text = await response.text();
    let json: unknown = undefined;
    if (text !== '') {
      try {
        json = JSON.parse(text);
      } catch {
        if (response.ok) throw this.contractError(method, path, 'the body is not JSON');
      }
    }
    if (!response.ok) throw this.errorFor(response.status, json, method, path, options.notFound);
    const parsed = options.schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw this.contractError(method, path, `${issue?.path.join('.') || '(body)'} ${issue?.message ?? 'is invalid'}`);
    }
    return parsed.data;
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

  me(): Promise<MeResponse> {
    return this.request('GET', '/auth/me', { schema: MeResponse });
  }

  /** Signs in with a password and returns the cookie and CSRF token needed to create an API token. */
  async login(email: string, password: string): Promise<{ cookie: string; csrfToken: string; response: LoginResponse }> {
    const response = await this.raw('POST', '/auth/login', { body: { email, password } });
    const json: unknown = await response.json().catch(() => undefined);
    if (response.status === 401) throw new CliError('The gateway refused this email and password.', 'unauthenticated');
    if (!response.ok) throw this.errorFor(response.status, json, 'POST', '/auth/login');
    const parsed = LoginResponse.safeParse(json);
    if (!parsed.success) throw this.contractError('POST', '/auth/login', parsed.error.issues[0]?.message ?? 'invalid');
    const cookie = response.headers
      .getSetCookie()
      .map((c) => c.split(';')[0] ?? '')
      .filter((c) => c !== '')
      .join('; ');
    return { cookie, csrfToken: parsed.data.csrfToken, response: parsed.data };
  }

  createToken(name: string, session: { cookie: string; csrfToken: string }, expiresInDays = 90): Promise<CreatedToken> {
    return this.request('POST', '/auth/tokens', {
      schema: CreatedToken,
      body: { name, expiresInDays },
      headers: { cookie: session.cookie, 'x-csrf-token': session.csrfToken, authorization: '' },
    });
  }

  // --- projects and policy ---

  listProjects(): Promise<ProjectView[]> {
    return this.request('GET', '/projects', { schema: z.array(ProjectView) });
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

  publishPolicy(projectId: string, sourceText: string, comment: string): Promise<PolicyVersionView> {
    return this.request('POST', `/projects/${encodeURIComponent(projectId)}/policy`, {
      schema: PolicyVersionView,
      body: { sourceText, comment },
    });
  }

  // --- sessions ---

  startSession(request: StartSessionRequest): Promise<SessionView> {
    const tooLarge = startRequestOverLimit(request);
    if (tooLarge) return Promise.reject(new CliError(tooLarge, 'too_large'));
    return this.request('POST', '/sessions', { schema: SessionView, body: request });
  }

  listSessions(query: { projectId?: string | undefined; status?: SessionStatus | undefined; limit?: number | undefined } = {}): Promise<SessionView[]> {
    return this.request('GET', '/sessions', { schema: z.array(SessionView), query });
  }

  getSession(id: string): Promise<SessionView> {
    return this.request('GET', `/sessions/${encodeURIComponent(id)}`, { schema: SessionView, notFound: `No session ${id} is visible to you (\`lemni sessions\` lists them).` });
  }

  toolCalls(id: string): Promise<ToolCallView[]> {
    return this.request('GET', `/sessions/${encodeURIComponent(id)}/tool-calls`, { schema: z.array(ToolCallView) });
  }

  stopSession(id: string, reason?: string): Promise<StopSessionResponse> {
    return this.request('POST', `/sessions/${encodeURIComponent(id)}/stop`, {
      schema: StopSessionResponse,
      body: reason === undefined ? {} : { reason },
      notFound: `No session ${id} is visible to you (\`lemni sessions\` lists them).`,
    });
  }

  revokeSession(id: string, reason?: string): Promise<StopSessionResponse> {
    return this.request('POST', `/sessions/${encodeURIComponent(id)}/revoke`, {
      schema: StopSessionResponse,
      body: reason === undefined ? {} : { reason },
      notFound: `No session ${id} is visible to you (\`lemni sessions\` lists them).`,
    });
  }

  /** `@general …` / `@explore …`: a background subagent under a running session (NEEDS.md). */
  startSubagent(parentSessionId: string, agent: string, instruction: string): Promise<SessionView> {
    return this.request('POST', `/sessions/${encodeURIComponent(parentSessionId)}/subagents`, {
      schema: SessionView,
      body: StartSubagentRequest.parse({ agent, instruction }),
    });
  }

  // --- approvals ---

  listApprovals(query: { state?: ApprovalState | undefined; sessionId?: string | undefined } = {}): Promise<ApprovalView[]> {
    return this.request('GET', '/approvals', { schema: z.array(ApprovalView), query });
  }

  getApproval(id: string): Promise<ApprovalView> {
    return this.request('GET', `/approvals/${encodeURIComponent(id)}`, { schema: ApprovalView, notFound: `No approval ${id} is visible to you (\`lemni approvals\` lists the pending ones).` });
  }

  answerApproval(id: string, answer: 'approve' | 'reject', body: z.input<typeof AnswerApprovalRequest> = {}): Promise<ApprovalView> {
    return this.request('POST', `/approvals/${encodeURIComponent(id)}/${answer}`, {
      schema: ApprovalView,
      body: AnswerApprovalRequest.parse(body),
      notFound: `No approval ${id} is visible to you (\`lemni approvals\` lists the pending ones).`,
    });
  }

  // --- audit ---

  /** With an anchor (a head kept from an earlier verification), a log rewritten end to end is caught too. */
  auditVerify(anchor?: { seq: number; hash: string }): Promise<AuditVerifyResult> {
    return this.request('GET', '/audit/verify', { schema: AuditVerifyResult, query: anchor ? { anchorSeq: anchor.seq, anchorHash: anchor.hash } : {} });
  }

  /** Streams the export body as it arrives; the export can be far larger than memory. */
  async auditExport(query: AuditExportQuery, write: (chunk: Uint8Array) => void): Promise<void> {
    const { format, project, user, session, kind, from, to } = query;
    // Named as the audit service's filter (AuditFilter); a user is an actor `user:ID`.
    const params = { format, projectId: project, actor: user === undefined ? undefined : `user:${user}`, sessionId: session, kind, from, to };
    const response = await this.raw('GET', '/audit/export', { query: params, headers: { accept: query.format === 'csv' ? 'text/csv' : 'application/x-ndjson' } });
    if (!response.ok) {
      const json: unknown = await response.json().catch(() => undefined);
      throw this.errorFor(response.status, json, 'GET', '/audit/export');
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
