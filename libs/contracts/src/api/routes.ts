import { z } from 'zod';
import { AnswerApprovalRequest, ApprovalContextQuery, ApprovalContextView, ApprovalListQuery, ApprovalView } from './approvals';
import { AuditCountView, AuditEntryView, AuditExportQuery, AuditFilterQuery, AuditKindsView, AuditListQuery, AuditSinksView, AuditVerificationView, AuditVerifyQuery } from './audit';
import {
  ChangePasswordRequest,
  CreatedToken,
  CreateTokenRequest,
  LoginRequest,
  LoginResponse,
  MeResponse,
  OidcCallbackQuery,
  OidcCliRequest,
  OidcInfo,
  OidcStartQuery,
  TokenView,
  UserView,
} from './auth';
import { IdParams, OkResponse } from './common';
import { GatewayHealth, GatewayReadiness } from './health';
import { PolicyDryRunRequest, PolicyDryRunResponse } from './policy-dry-run';
import {
  CreateProjectRequest,
  EnvironmentLogParams,
  EnvironmentLogQueryParams,
  PrepareEnvironmentBody,
  PolicyDiffQuery,
  PolicyDiffResponse,
  PolicyVersionParams,
  PolicyVersionSummary,
  PolicyVersionView,
  ProjectAgentsView,
  ProjectMcpView,
  ProjectMemberParams,
  ProjectParams,
  RepositoryAccessView,
  SetRepositoryAccessRequest,
  ProjectMemberView,
  ProjectView,
  PublishPolicyRequest,
  UpdateProjectRequest,
  RollbackPolicyRequest,
} from './projects';
import { CreateSessionRequest, SessionListItem, SessionListQuery, SessionView, StartSubagentRequest, StopSessionRequest, StopSessionResponse, ToolCallView } from './sessions';
import { DashboardQuery, DashboardStats } from './stats';
import { EnvironmentLog, EnvironmentStatus } from '../environment';
import { DrainExecHostRequest, ExecHostHeartbeat, ExecHostHeartbeatResponse, ExecHostParams, ExecHostView } from '../exec-host-pool';
import { AddMemberRequest, CreateUserRequest, RevokeUserResponse, UpdateUserRequest } from './users';

/** REST routes live under this prefix; probes, metrics and the API description do not. */
export const GATEWAY_API_PREFIX = '/api/v1';

export type GatewayMethod = 'GET' | 'POST' | 'DELETE';

/**
 * One HTTP route of the gateway: what it accepts and what it answers. `path` is the full path as
 * served, Express-style (`/api/v1/sessions/:id`). A schema that is absent means the part is not read
 * (params, query, body) or the answer is not JSON (`response`: a stream, text, or the API description).
 * `status` is the status of a successful answer.
 */
export interface GatewayRoute {
  readonly method: GatewayMethod;
  readonly path: string;
  readonly params?: z.ZodType;
  readonly query?: z.ZodType;
  readonly body?: z.ZodType;
  readonly response?: z.ZodType;
  readonly status: number;
}

function route<const M extends GatewayMethod, const P extends string, const S extends Omit<GatewayRoute, 'method' | 'path' | 'status'> & { status?: number }>(
  method: M,
  path: P,
  schemas: S,
): { readonly method: M; readonly path: P; readonly status: number } & S {
  return { method, path, status: schemas.status ?? (method === 'POST' ? 201 : 200), ...schemas };
}

const api = <const P extends string>(path: P) => `${GATEWAY_API_PREFIX}${path}` as `/api/v1${P}`;

/**
 * Every request and answer of the gateway, defined once. The gateway's controllers take their
 * validation schemas from here (apps/gateway/test/unit/common/gateway-routes.spec.ts fails when a controller
 * route and this table differ), the CLI and the console build their requests from it and parse the
 * answers with its response schemas, and the CLI's fake gateway refuses any request this table would
 * refuse, so a client that drifts from the gateway fails a unit test instead of a person's session.
 */
export const GatewayRoutes = {
  // probes, metrics and the API description: outside the prefix
  healthz: route('GET', '/healthz', { response: GatewayHealth }),
  readyz: route('GET', '/readyz', { response: GatewayReadiness }),
  metrics: route('GET', '/metrics', {}),
  apiDocs: route('GET', '/api/docs', {}),

  // auth
  login: route('POST', api('/auth/login'), { body: LoginRequest, response: LoginResponse, status: 200 }),
  logout: route('POST', api('/auth/logout'), { response: OkResponse, status: 200 }),
  me: route('GET', api('/auth/me'), { response: MeResponse }),
  oidcInfo: route('GET', api('/auth/oidc'), { response: OidcInfo }),
  oidcStart: route('GET', api('/auth/oidc/start'), { query: OidcStartQuery, status: 302 }),
  oidcCallback: route('GET', api('/auth/oidc/callback'), { query: OidcCallbackQuery, status: 302 }),
  oidcCli: route('POST', api('/auth/oidc/cli'), { body: OidcCliRequest, response: LoginResponse, status: 200 }),
  changePassword: route('POST', api('/auth/password'), { body: ChangePasswordRequest, response: OkResponse, status: 200 }),
  createToken: route('POST', api('/auth/tokens'), { body: CreateTokenRequest, response: CreatedToken }),
  listTokens: route('GET', api('/auth/tokens'), { response: z.array(TokenView) }),
  revokeToken: route('DELETE', api('/auth/tokens/:id'), { params: IdParams, response: TokenView }),

  // users
  listUsers: route('GET', api('/users'), { response: z.array(UserView) }),
  createUser: route('POST', api('/users'), { body: CreateUserRequest, response: UserView }),
  getUser: route('GET', api('/users/:id'), { params: IdParams, response: UserView }),
  revokeUser: route('POST', api('/users/:id/revoke'), { params: IdParams, response: RevokeUserResponse }),
  updateUser: route('POST', api('/users/:id'), { params: IdParams, body: UpdateUserRequest, response: UserView, status: 200 }),
  listUserTokens: route('GET', api('/users/:id/tokens'), { params: IdParams, response: z.array(TokenView) }),

  // projects
  listProjects: route('GET', api('/projects'), { response: z.array(ProjectView) }),
  createProject: route('POST', api('/projects'), { body: CreateProjectRequest, response: ProjectView }),
  getProject: route('GET', api('/projects/:projectId'), { params: ProjectParams, response: ProjectView }),
  updateProject: route('POST', api('/projects/:projectId'), { params: ProjectParams, body: UpdateProjectRequest, response: ProjectView, status: 200 }),
  listMembers: route('GET', api('/projects/:projectId/members'), { params: ProjectParams, response: z.array(ProjectMemberView) }),
  addMember: route('POST', api('/projects/:projectId/members'), { params: ProjectParams, body: AddMemberRequest, response: OkResponse }),
  removeMember: route('DELETE', api('/projects/:projectId/members/:userId'), { params: ProjectMemberParams, response: OkResponse }),
  // how the platform fetches the project's repository (ADR 0012), and the agents it finds there
  repositoryAccess: route('GET', api('/projects/:projectId/repository'), { params: ProjectParams, response: RepositoryAccessView }),
  setRepositoryAccess: route('POST', api('/projects/:projectId/repository/access'), { params: ProjectParams, body: SetRepositoryAccessRequest, response: RepositoryAccessView, status: 200 }),
  clearRepositoryAccess: route('DELETE', api('/projects/:projectId/repository/access'), { params: ProjectParams, response: RepositoryAccessView }),
  projectAgents: route('GET', api('/projects/:projectId/agents'), { params: ProjectParams, response: ProjectAgentsView }),
  projectMcp: route('GET', api('/projects/:projectId/mcp'), { params: ProjectParams, response: ProjectMcpView }),

  // policy
  // a project's environment (devcontainer, set-up with mirrors only, prepared once per inputs)
  environmentStatus: route('GET', api('/projects/:projectId/environment'), { params: ProjectParams, response: EnvironmentStatus }),
  prepareEnvironment: route('POST', api('/projects/:projectId/environment/prepare'), { params: ProjectParams, body: PrepareEnvironmentBody, response: EnvironmentStatus, status: 202 }),
  environmentLog: route('GET', api('/projects/:projectId/environment/jobs/:jobId/log'), { params: EnvironmentLogParams, query: EnvironmentLogQueryParams, response: EnvironmentLog }),
  policyDryRun: route('POST', api('/projects/:projectId/policy/dry-run'), { params: ProjectParams, body: PolicyDryRunRequest, response: PolicyDryRunResponse, status: 200 }),
  currentPolicy: route('GET', api('/projects/:projectId/policy'), { params: ProjectParams, response: PolicyVersionView }),
  publishPolicy: route('POST', api('/projects/:projectId/policy'), { params: ProjectParams, body: PublishPolicyRequest, response: PolicyVersionView }),
  policyVersions: route('GET', api('/projects/:projectId/policy/versions'), { params: ProjectParams, response: z.array(PolicyVersionSummary) }),
  policyVersion: route('GET', api('/projects/:projectId/policy/versions/:version'), { params: PolicyVersionParams, response: PolicyVersionView }),
  policyDiff: route('GET', api('/projects/:projectId/policy/diff'), { params: ProjectParams, query: PolicyDiffQuery, response: PolicyDiffResponse }),
  policyRollback: route('POST', api('/projects/:projectId/policy/rollback'), { params: ProjectParams, body: RollbackPolicyRequest, response: PolicyVersionView }),

  // sessions
  createSession: route('POST', api('/sessions'), { body: CreateSessionRequest, response: SessionView }),
  startSubagent: route('POST', api('/sessions/:id/subagents'), { params: IdParams, body: StartSubagentRequest, response: SessionView }),
  listSessions: route('GET', api('/sessions'), { query: SessionListQuery, response: z.array(SessionListItem) }),
  getSession: route('GET', api('/sessions/:id'), { params: IdParams, response: SessionView }),
  sessionToolCalls: route('GET', api('/sessions/:id/tool-calls'), { params: IdParams, response: z.array(ToolCallView) }),
  stopSession: route('POST', api('/sessions/:id/stop'), { params: IdParams, body: StopSessionRequest.default({}), response: StopSessionResponse, status: 200 }),
  revokeSession: route('POST', api('/sessions/:id/revoke'), { params: IdParams, body: StopSessionRequest.default({}), response: StopSessionResponse, status: 200 }),

  // approvals
  listApprovals: route('GET', api('/approvals'), { query: ApprovalListQuery, response: z.array(ApprovalView) }),
  getApproval: route('GET', api('/approvals/:id'), { params: IdParams, response: ApprovalView }),
  approvalContext: route('GET', api('/approvals/:id/context'), { params: IdParams, query: ApprovalContextQuery, response: ApprovalContextView }),
  approve: route('POST', api('/approvals/:id/approve'), { params: IdParams, body: AnswerApprovalRequest.default({ rememberCommand: false }), response: ApprovalView, status: 200 }),
  reject: route('POST', api('/approvals/:id/reject'), { params: IdParams, body: AnswerApprovalRequest.default({ rememberCommand: false }), response: ApprovalView, status: 200 }),

  // audit
  listAudit: route('GET', api('/audit'), { query: AuditListQuery, response: z.array(AuditEntryView) }),
  auditKinds: route('GET', api('/audit/kinds'), { response: AuditKindsView }),
  auditCount: route('GET', api('/audit/count'), { query: AuditFilterQuery, response: AuditCountView }),
  auditVerify: route('GET', api('/audit/verify'), { query: AuditVerifyQuery, response: AuditVerificationView }),
  auditExport: route('GET', api('/audit/export'), { query: AuditExportQuery }),
  auditSinks: route('GET', api('/audit/sinks'), { response: AuditSinksView }),

  // stats
  dashboard: route('GET', api('/stats/dashboard'), { query: DashboardQuery, response: DashboardStats }),

  // the exec-host pool: heartbeats come from exec-hosts (their token, not a person's); the rest is administration
  execHostHeartbeat: route('POST', api('/exec-hosts/heartbeat'), { body: ExecHostHeartbeat, response: ExecHostHeartbeatResponse, status: 200 }),
  listExecHosts: route('GET', api('/admin/exec-hosts'), { response: z.array(ExecHostView) }),
  drainExecHost: route('POST', api('/admin/exec-hosts/:hostId/drain'), { params: ExecHostParams, body: DrainExecHostRequest.default({}), response: ExecHostView, status: 200 }),
  undrainExecHost: route('POST', api('/admin/exec-hosts/:hostId/undrain'), { params: ExecHostParams, response: ExecHostView, status: 200 }),
} as const satisfies Record<string, GatewayRoute>;

export type GatewayRouteName = keyof typeof GatewayRoutes;

/** The names of a path's `:params`, in order. */
export function pathParams(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1] as string);
}

type ParamNames<P extends string> = P extends `${string}:${infer Name}/${infer Rest}` ? Name | ParamNames<`/${Rest}`> : P extends `${string}:${infer Name}` ? Name : never;

/** The values a route's path needs, by name (`{ id }` for `/sessions/:id`). */
export type PathParams<R extends { path: string }> = Record<ParamNames<R['path']>, string | number>;

/** The full path of a route with its `:params` filled in (each value URL-encoded). */
export function gatewayPath<R extends GatewayRoute>(route: R, ...params: ParamNames<R['path']> extends never ? [] : [PathParams<R>]): string {
  return fillPath(route.path, (params[0] ?? {}) as Record<string, string | number>);
}

/** `path` with its `:params` filled in from `values` (URL-encoded); a missing value is an error. */
export function fillPath(path: string, values: Record<string, string | number>): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`The path ${path} needs a value for :${name}.`);
    return encodeURIComponent(String(value));
  });
}

/** The path relative to GATEWAY_API_PREFIX, for clients whose base URL already ends in it. */
export function gatewayApiPath<R extends GatewayRoute>(route: R, ...params: ParamNames<R['path']> extends never ? [] : [PathParams<R>]): string {
  const full = gatewayPath(route, ...params);
  if (!full.startsWith(`${GATEWAY_API_PREFIX}/`)) throw new Error(`${route.path} is not under ${GATEWAY_API_PREFIX}.`);
  return full.slice(GATEWAY_API_PREFIX.length);
}

/** The route a request's method and path (without query) names, with its path params; undefined when none does. */
export function matchGatewayRoute(method: string, path: string): { name: GatewayRouteName; route: GatewayRoute; params: Record<string, string> } | undefined {
  const segments = path.split('/');
  let best: { name: GatewayRouteName; route: GatewayRoute; params: Record<string, string> } | undefined;
  for (const [name, r] of Object.entries(GatewayRoutes) as [GatewayRouteName, GatewayRoute][]) {
    if (r.method !== method.toUpperCase()) continue;
    const pattern = r.path.split('/');
    if (pattern.length !== segments.length) continue;
    const params: Record<string, string> = {};
    let ok = true;
    for (let i = 0; i < pattern.length && ok; i++) {
      const p = pattern[i] as string;
      const s = segments[i] as string;
      if (p.startsWith(':')) {
        if (s === '') ok = false;
        else params[p.slice(1)] = safeDecode(s);
      } else if (p !== s) ok = false;
    }
    // A literal segment wins over a parameter, as in the gateway's router.
    if (ok && (!best || Object.keys(params).length < Object.keys(best.params).length)) best = { name, route: r, params };
  }
  return best;
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export type RequestPart = 'params' | 'query' | 'body';

/** One refused field of a request, named as the gateway names it (`body.agent`). */
export interface RequestIssue {
  path: string;
  message: string;
}

/** The refusals of one part of a request, each a sentence a person reads ("unknown field \"background\""). */
export function requestIssues(part: RequestPart, error: z.ZodError): RequestIssue[] {
  return error.issues.map((i) => ({ path: [part, ...i.path.map(String)].join('.'), message: describeIssue(i) }));
}

/** The sentence the gateway answers for an invalid request: "The request is invalid: body.agent: is required." */
export function invalidRequestMessage(issues: RequestIssue[]): string {
  // Messages that are whole sentences keep their own full stop; the summary adds the last one.
  return `The request is invalid: ${issues.map((i) => `${i.path}: ${i.message.replace(/\.$/, '')}`).join('; ')}.`;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  if (issue.code === 'invalid_type' && issue.input === undefined) return 'is required';
  return issue.message;
}
