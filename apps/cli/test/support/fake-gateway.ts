import { createHash, createPrivateKey, createPublicKey } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CreateSessionRequest,
  invalidRequestMessage,
  matchGatewayRoute,
  repositoryAccessProblem,
  repositoryTransport,
  requestIssues,
  type ApprovalView,
  type EnvironmentStatus,
  type ExecHostView,
  type PolicyDryRunResponse,
  type PolicyVersionView,
  type ProjectAgentsView,
  type ProjectMemberView,
  type RepositoryAccess,
  type RepositoryAccessView,
  type GatewayRoute,
  type GatewayRouteName,
  type ProjectView,
  type RequestIssue,
  type RequestPart,
  type SessionView,
  type UserView,
} from '@lemniscate/contracts';
import { WebSocketServer, type WebSocket } from 'ws';

/**
 * A loopback HTTP + WebSocket server that speaks the gateway's published contracts (libs/contracts'
 * GatewayRoutes, the table the gateway's controllers validate with), so the CLI's wire behaviour is
 * tested end to end through the real bin without a database or Docker. It records every request it
 * receives. Every request is checked against the table as the gateway checks it: an unknown route, or
 * params, a query or a body the table refuses, is answered with the gateway's 400 and recorded as
 * drift, and `close()` throws while unacknowledged drift remains, so a CLI that sends what the gateway
 * would refuse fails its test even when the test expected the command to fail. Its own answers are
 * checked against the route's response schema too (a fake that answers what the gateway never would
 * is a test bug, reported the same way).
 */

export const GOOD_TOKEN = 'lmn_good_token';

export interface Scenario {
  /** Events of the session, without seq/sessionId/at; emitted in order once the client subscribes. */
  events: Record<string, unknown>[];
  /** When set, emission pauses before this index until `release()` is called. */
  gateAt?: number;
  final: Partial<SessionView>;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: unknown;
  /** The GatewayRoutes entry the request named; undefined for a route the gateway does not serve. */
  route: GatewayRouteName | undefined;
}

/** A request the gateway would refuse (or an answer it would never give), as the fake saw it. */
export interface Drift {
  method: string;
  path: string;
  message: string;
  issues: RequestIssue[];
}

const now = () => new Date().toISOString();

export function sessionView(id: string, over: Partial<SessionView> = {}): SessionView {
  return {
    id,
    projectId: 'p1',
    userId: 'u1',
    parentSessionId: null,
    depth: 0,
    agent: 'general',
    instruction: 'do it',
    policyVersionId: 'pv1',
    status: 'running',
    stopReason: null,
    mode: 'headless',
    headless: true,
    actionsUsed: 0,
    extensionsUsed: 0,
    startedAt: now(),
    endedAt: null,
    baseCommit: null,
    branch: null,
    includedUncommitted: false,
    fingerprintStart: null,
    fingerprintEnd: null,
    finalPatch: null,
    summary: null,
    ...over,
  };
}

export function approvalView(id: string, over: Partial<ApprovalView> = {}): ApprovalView {
  return {
    id,
    sessionId: 's1',
    projectId: 'p1',
    toolCallId: null,
    kind: 'command',
    payload: { command: 'npm install left-pad' },
    flags: { thirdParty: [] },
    agent: 'general',
    instruction: 'fix the failing test',
    state: 'pending',
    decidedBy: null,
    decidedByEmail: null,
    decidedAt: null,
    response: null,
    reason: null,
    createdAt: now(),
    ...over,
  };
}

/** A repository without a devcontainer: what the environment routes answer for a project nobody set. */
export function baseEnvironment(over: Partial<EnvironmentStatus> = {}): EnvironmentStatus {
  return {
    state: 'base',
    ref: 'main',
    commit: 'c'.repeat(40),
    key: null,
    devcontainer: null,
    job: null,
    message: 'The repository has no devcontainer: sessions start from the sandbox image.',
    ...over,
  };
}

/** A registered exec-host of the pool, active, heartbeating 3 s ago, as `GET /admin/exec-hosts` lists it. */
export function execHostView(id: string, over: Partial<ExecHostView> = {}): ExecHostView {
  const at = (msAgo: number) => new Date(Date.now() - msAgo).toISOString();
  return {
    id,
    address: 'http://127.0.0.1:7101',
    kind: 'registered',
    state: 'active',
    runtimes: ['runc', 'runsc'],
    images: ['lemniscate/sandbox:current'],
    environments: [],
    capacity: 10,
    load: 3,
    warm: { ready: 2, target: 2 },
    liveSessions: 3,
    version: '0.1.0',
    registeredAt: at(3_600_000),
    lastHeartbeatAt: at(3_000),
    drainedBy: null,
    drainReason: null,
    stateChangedAt: at(3_600_000),
    ...over,
  };
}

/** The one exec-host of a gateway without a pool (LEMNISCATE_EXEC_HOST_URL), as the gateway lists it. */
export function fixedExecHostView(over: Partial<ExecHostView> = {}): ExecHostView {
  return execHostView('fixed', {
    kind: 'fixed',
    address: 'http://127.0.0.1:7071',
    runtimes: [],
    images: [],
    capacity: 0,
    load: 0,
    liveSessions: 1,
    version: null,
    registeredAt: null,
    lastHeartbeatAt: null,
    stateChangedAt: null,
    ...over,
  });
}

/** What the gateway answers for a key ssh-keygen cannot read without a passphrase (apps/gateway/src/projects/repository-access.service.ts). */
export const GATEWAY_PASSPHRASE_SENTENCE = 'The SSH private key cannot be read without a passphrase: give an unencrypted OpenSSH key made for this repository (ssh-keygen -t ed25519 -N "").';

/**
 * The fingerprint the gateway shows for a private key, or null where its ssh-keygen could not read the
 * key without a passphrase. An OpenSSH key gets the SHA256 of its public key blob, as `ssh-keygen -lf`
 * prints it; a PEM key, the SHA256 of its public half's DER (enough for a fake).
 */
export function fakeKeyFingerprint(privateKey: string): string | null {
  const digest = (bytes: Buffer) => `SHA256:${createHash('sha256').update(bytes).digest('base64').replace(/=+$/, '')}`;
  const body = /-----BEGIN OPENSSH PRIVATE KEY-----([\s\S]*?)-----END OPENSSH PRIVATE KEY-----/.exec(privateKey)?.[1];
  if (body === undefined) {
    try {
      return digest(createPublicKey(createPrivateKey(privateKey)).export({ type: 'spki', format: 'der' }));
    } catch {
      return null;
    }
  }
  const blob = Buffer.from(body.replace(/\s+/g, ''), 'base64');
  let at = 'openssh-key-v1\0'.length;
  if (blob.subarray(0, at).toString('latin1') !== 'openssh-key-v1\0') return null;
  const string = (): Buffer | null => {
    if (at + 4 > blob.length) return null;
    const length = blob.readUInt32BE(at);
    if (at + 4 + length > blob.length) return null;
    const value = blob.subarray(at + 4, at + 4 + length);
    at += 4 + length;
    return value;
  };
  const cipher = string();
  const kdf = string();
  const kdfOptions = string();
  if (cipher?.toString('latin1') !== 'none' || kdf === null || kdfOptions === null || at + 4 > blob.length) return null;
  at += 4; // the number of keys
  const publicKey = string();
  const sealed = string();
  if (publicKey === null || sealed === null || sealed.length < 8 || sealed.readUInt32BE(0) !== sealed.readUInt32BE(4)) return null;
  return digest(publicKey);
}

/** A project's repository access as the gateway holds it: the secret included (sealed there), never in a view. */
export interface FakeRepositoryAccess {
  access: RepositoryAccess;
  keyFingerprint: string | null;
  updatedAt: string;
  updatedBy: string;
}

/** The view the gateway answers for a project's repository access (apps/gateway's toView). */
export function repositoryAccessView(project: ProjectView, held: FakeRepositoryAccess | undefined): RepositoryAccessView {
  const credential = held?.access.credential;
  return {
    projectId: project.id,
    repositorySource: project.repositorySource,
    transport: repositoryTransport(project.repositorySource) ?? 'local',
    defaultRef: project.defaultRef,
    credential: credential ? { kind: credential.kind, username: credential.kind === 'https' ? credential.username : null, keyFingerprint: held?.keyFingerprint ?? null } : null,
    knownHosts: held?.access.knownHosts ?? null,
    caPem: held?.access.caPem ?? null,
    updatedAt: held?.updatedAt ?? null,
    updatedBy: held?.updatedBy ?? null,
  };
}

/** A refusal the fake answers instead of playing a route (a 403 for a security officer, a 409 for a start). */
export interface Refusal {
  status: number;
  code: string;
  message: string;
}

/**
 * A preparation's log: the first `revealed` parts are there; with `grows`, a read that reaches their end
 * finds one more (the job went on meanwhile). Once every part is there the job is complete and the
 * project's status becomes `after`.
 */
export interface FakeJobLog {
  projectId: string;
  parts: string[];
  revealed: number;
  grows: boolean;
  after?: EnvironmentStatus;
}

export class FakeGateway {
  readonly requests: RecordedRequest[] = [];
  /** Requests the gateway would have refused; see takeDrift(). */
  private drift: Drift[] = [];
  projects: ProjectView[] = [{ id: 'p1', name: 'demo', repositorySource: '/nonexistent/demo.git', defaultRef: 'main', createdAt: now() }];
  scenario: Scenario = { events: [], final: {} };
  sessions = new Map<string, SessionView>();
  approvals: ApprovalView[] = [];
  /** What `POST /projects/:id/policy/dry-run` answers. */
  dryRun: PolicyDryRunResponse = { sessionsReplayed: 0, toolCallsReplayed: 0, changes: [] };
  auditVerify: unknown = { ok: true, checked: 3, lastSeq: 3, lastHash: 'h3' };
  auditExport = '{"seq":1}\n{"seq":2}\n';
  /** What `GET /projects/:id/environment` answers, per project id (absent: a repository without a devcontainer). */
  environments = new Map<string, EnvironmentStatus>();
  /** What `POST /projects/:id/environment/prepare` answers (and the status becomes), per project id; absent: the current status. */
  prepares = new Map<string, EnvironmentStatus>();
  /** Each preparation's log, by job id. */
  jobLogs = new Map<string, FakeJobLog>();
  /** Answered instead of `POST …/environment/prepare` (as the gateway refuses a security officer). */
  prepareRefusal: Refusal | null = null;
  /** What `GET /admin/exec-hosts` lists; drain and undrain change them as the gateway does. */
  execHosts: ExecHostView[] = [];
  /**
   * Answered instead of the `/admin/exec-hosts` routes: `list` instead of the list (a developer), `change`
   * instead of drain and undrain (a developer, a security officer).
   */
  execHostRefusals: { list?: Refusal; change?: Refusal } = {};
  /** Each project's repository access as set, by project id (absent: none set). */
  repositoryAccess = new Map<string, FakeRepositoryAccess>();
  /** Answered instead of the repository routes: `read` the view, `set` and `clear` the access, `agents` the project's agents. */
  repositoryRefusals: { read?: Refusal; set?: Refusal; clear?: Refusal; agents?: Refusal } = {};
  /** What `GET /projects/:id/agents` answers, per project id (absent: no agent of its own, read at the default ref). */
  projectAgents = new Map<string, ProjectAgentsView>();
  /** The accounts `GET /users` lists (an administrator's view). */
  users: UserView[] = [
    { id: 'u1', email: 'dev@example.org', displayName: 'Dev', role: 'developer', projectIds: ['p1'], disabledAt: null, revokedAt: null, createdAt: now() },
    { id: 'u2', email: 'alice@example.org', displayName: 'Alice', role: 'admin', projectIds: ['p1'], disabledAt: null, revokedAt: null, createdAt: now() },
  ];
  /** Each project's members by user id (absent: its creator only). */
  members = new Map<string, string[]>([['p1', ['u1', 'u2']]]);
  /** The policy in force per project id (absent: none published, the built-in default applies). */
  policies = new Map<string, PolicyVersionView>();
  /** Answered instead of the project administration routes (create, update, members), as for a developer. */
  projectRefusal: Refusal | null = null;
  /** Answered instead of `POST /sessions` (as the gateway refuses a start while the environment is not ready). */
  sessionRefusal: Refusal | null = null;
  private server!: Server;
  private wss!: WebSocketServer;
  private emitted: Record<string, unknown>[] = [];
  private subscribers = new Map<WebSocket, string>();
  private releaseGate: (() => void) | null = null;
  private gateReached: Promise<void> = Promise.resolve();
  private signalGateReached: () => void = () => undefined;
  private nextId = 1;
  private seq = 0;
  private sessionId = '';
  private playing = false;
  /** Resolves on each stop request, for tests that press Ctrl-C. */
  stopRequested: Promise<void>;
  private onStop: () => void = () => undefined;

  constructor() {
    this.stopRequested = new Promise((resolve) => (this.onStop = resolve));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.wss = new WebSocketServer({ noServer: true });
    this.server.on('upgrade', (req, socket, head) => {
      if (req.headers.authorization !== `Bearer ${GOOD_TOKEN}`) {
        socket.write('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        socket.destroy();
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => this.onSocket(ws));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  /** Throws when the CLI sent a request the gateway would refuse and no test took it with takeDrift(). */
  async close(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    const drift = this.takeDrift();
    if (drift.length > 0) {
      throw new Error(`The CLI and the gateway's contract (GatewayRoutes) have drifted:\n${drift.map((d) => `  ${d.method} ${d.path}: ${d.message}`).join('\n')}`);
    }
  }

  /** The drift seen so far, for a test that provokes it on purpose; taken drift no longer fails close(). */
  takeDrift(): Drift[] {
    const taken = this.drift;
    this.drift = [];
    return taken;
  }

  /** Resolves once emission is paused at the gate. */
  waitForGate(): Promise<void> {
    return this.gateReached;
  }

  release(): void {
    this.releaseGate?.();
  }

  /** How many live subscriptions follow a session now. */
  followers(sessionId: string): number {
    return [...this.subscribers.values()].filter((wanted) => wanted === sessionId).length;
  }

  hits(method: string, path: string): RecordedRequest[] {
    return this.requests.filter((r) => r.method === method && r.path === path);
  }

  private onSocket(ws: WebSocket): void {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { type: string; sessionId?: string; sinceSeq?: number };
      if (msg.type !== 'subscribe') return;
      ws.send(JSON.stringify({ type: 'subscribed', sessionId: msg.sessionId ?? null, projectId: null, replayed: 0 }));
      const wanted = msg.sessionId ?? '';
      for (const e of this.emitted) if ((e.seq as number) > (msg.sinceSeq ?? 0) && e.sessionId === wanted) ws.send(JSON.stringify({ type: 'event', event: e }));
      this.subscribers.set(ws, wanted);
      if (wanted === this.sessionId && !this.playing) {
        this.playing = true;
        void this.play();
      }
    });
    ws.on('close', () => this.subscribers.delete(ws));
  }

  private emit(partial: Record<string, unknown>): void {
    const event = { seq: ++this.seq, sessionId: this.sessionId, projectId: 'p1', at: now(), ...partial };
    this.emitted.push(event);
    for (const [ws, wanted] of this.subscribers) if (wanted === event.sessionId) ws.send(JSON.stringify({ type: 'event', event }));
  }

  private async play(): Promise<void> {
    const { events, gateAt } = this.scenario;
    for (let i = 0; i < events.length; i++) {
      if (i === gateAt) {
        const released = new Promise<void>((resolve) => (this.releaseGate = resolve));
        this.signalGateReached();
        await released;
      }
      this.emit(events[i] as Record<string, unknown>);
      const last = events[i]?.type as string;
      if (['session_completed', 'session_stopped', 'session_failed'].includes(last)) this.finish(events[i] as Record<string, unknown>);
    }
  }

  private finish(end: Record<string, unknown>, id = this.sessionId): void {
    const s = this.sessions.get(id);
    if (!s) return;
    const status = end.type === 'session_completed' ? 'completed' : end.type === 'session_stopped' ? 'stopped' : 'failed';
    this.sessions.set(id, { ...s, status, stopReason: (end.stopReason as SessionView['stopReason']) ?? null, endedAt: now(), summary: (end.summary as string | null) ?? null, ...this.scenario.final });
  }

  private send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const current = this.current;
    if (current && status < 300 && current.route.response !== undefined) {
      const parsed = current.route.response.safeParse(body);
      if (!parsed.success) {
        const issues = requestIssues('body', parsed.error).map((i) => ({ ...i, path: `response${i.path.slice('body'.length)}` }));
        const message = `the fake gateway's own answer breaks the response schema: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`;
        this.drift.push({ method: current.method, path: current.path, message, issues });
        return this.error(res, 500, 'internal', message);
      }
    }
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(body === undefined ? '' : JSON.stringify(body));
  }

  private current: { method: string; path: string; route: GatewayRoute } | undefined;

  /** The table's verdict on one request: the issues the gateway's validation would answer with. */
  private refusals(route: GatewayRoute, params: Record<string, string>, query: Record<string, string>, body: unknown): RequestIssue[] {
    const parts: [RequestPart, unknown][] = [
      ['params', params],
      ['query', query],
      ['body', body],
    ];
    const issues: RequestIssue[] = [];
    for (const [part, value] of parts) {
      const schema = route[part];
      // As the gateway: a part its route does not read is ignored; a body is checked as sent, params and query default to {}.
      if (schema === undefined) continue;
      const result = schema.safeParse(value);
      if (!result.success) issues.push(...requestIssues(part, result.error));
    }
    return issues;
  }

  private error(res: ServerResponse, status: number, code: string, message: string): void {
    this.send(res, status, { code, message, requestId: 'req-1' });
  }

  /** The pool's administration, as apps/gateway/src/exec-host/exec-hosts.service.ts answers it. */
  private execHostRoute(res: ServerResponse, method: string, path: string, body: unknown): void {
    const refusal = method === 'GET' ? this.execHostRefusals.list : this.execHostRefusals.change;
    if (refusal) return this.error(res, refusal.status, refusal.code, refusal.message);
    if (method === 'GET') return this.send(res, 200, this.execHosts);
    const m = /^\/admin\/exec-hosts\/([^/]+)\/(drain|undrain)$/.exec(path);
    const id = decodeURIComponent(m?.[1] ?? '');
    const what = m?.[2] === 'drain' ? 'drained' : 'undrained';
    if (this.execHosts.some((h) => h.kind === 'fixed')) {
      return this.error(
        res,
        409,
        'conflict',
        `This gateway has one fixed exec-host (LEMNISCATE_EXEC_HOST_URL), not a pool, so it cannot be ${what}: there is no other exec-host to place sessions on.`,
      );
    }
    const i = this.execHosts.findIndex((h) => h.id === id);
    const host = this.execHosts[i];
    if (!host) return this.error(res, 404, 'not_found', `No exec-host "${id}" has registered with the platform; \`lemni admin exec-hosts list\` shows those that have.`);
    const at = now();
    const next: ExecHostView =
      what === 'drained'
        ? {
            ...host,
            drainedBy: 'user:u1',
            drainReason: (body as { reason?: string } | undefined)?.reason ?? null,
            state: host.state === 'active' ? 'draining' : host.state,
            stateChangedAt: host.state === 'active' ? at : host.stateChangedAt,
          }
        : { ...host, drainedBy: null, drainReason: null, state: host.state === 'draining' ? 'active' : host.state, stateChangedAt: host.state === 'draining' ? at : host.stateChangedAt };
    this.execHosts[i] = next;
    return this.send(res, 200, next);
  }

  /**
   * A project's repository access and agents, as apps/gateway/src/projects/repository-access.service.ts
   * and apps/gateway/src/runtime/project-agents.service.ts answer them.
   */
  private repositoryRoute(res: ServerResponse, method: string, projectId: string, what: string, body: unknown): void {
    const project = this.projects.find((p) => p.id === projectId);
    if (!project) return this.error(res, 404, 'not_found', `There is no project ${projectId}.`);
    const refusal =
      what === 'agents' ? this.repositoryRefusals.agents : what === 'repository' ? this.repositoryRefusals.read : method === 'POST' ? this.repositoryRefusals.set : this.repositoryRefusals.clear;
    if (refusal) return this.error(res, refusal.status, refusal.code, refusal.message);
    if (what === 'agents') {
      return this.send(res, 200, this.projectAgents.get(project.id) ?? { projectId: project.id, ref: project.defaultRef, commit: 'c'.repeat(40), agents: [], notices: [] });
    }
    if (what === 'repository') return this.send(res, 200, repositoryAccessView(project, this.repositoryAccess.get(project.id)));
    if (method === 'DELETE') {
      this.repositoryAccess.delete(project.id);
      return this.send(res, 200, repositoryAccessView(project, undefined));
    }
    // The body was checked against the table above, as the gateway's validation does.
    const access = body as RepositoryAccess;
    const problem = repositoryAccessProblem(project.repositorySource, access);
    if (problem) return this.error(res, 400, 'validation_failed', `The repository access of project "${project.name}" cannot be set: ${problem}.`);
    const keyFingerprint = access.credential?.kind === 'ssh' ? fakeKeyFingerprint(access.credential.privateKey) : null;
    if (access.credential?.kind === 'ssh' && keyFingerprint === null) return this.error(res, 400, 'validation_failed', GATEWAY_PASSPHRASE_SENTENCE);
    const held: FakeRepositoryAccess = { access, keyFingerprint, updatedAt: now(), updatedBy: 'u1' };
    this.repositoryAccess.set(project.id, held);
    return this.send(res, 200, repositoryAccessView(project, held));
  }

  /** Project administration, as apps/gateway/src/projects/projects.service.ts answers it. */
  private projectRoute(res: ServerResponse, name: GatewayRouteName, params: Record<string, string>, body: unknown): void {
    if (this.projectRefusal) return this.error(res, this.projectRefusal.status, this.projectRefusal.code, this.projectRefusal.message);
    if (name === 'createProject') {
      const b = body as { name: string; repositorySource: string; defaultRef?: string };
      if (this.projects.some((p) => p.name === b.name)) return this.error(res, 409, 'conflict', `A project named "${b.name}" already exists.`);
      const created: ProjectView = { id: `p${this.projects.length + 1}`, name: b.name, repositorySource: b.repositorySource, defaultRef: b.defaultRef ?? 'main', createdAt: now() };
      this.projects.push(created);
      this.members.set(created.id, ['u2']);
      return this.send(res, 201, created);
    }
    const i = this.projects.findIndex((p) => p.id === params.projectId);
    const project = this.projects[i];
    if (!project) return this.error(res, 404, 'not_found', `There is no project ${params.projectId}.`);
    const members = this.members.get(project.id) ?? [];
    if (name === 'updateProject') {
      const b = body as { repositorySource?: string; defaultRef?: string };
      if (b.repositorySource !== undefined && b.repositorySource !== project.repositorySource && this.repositoryAccess.has(project.id)) {
        return this.error(res, 409, 'conflict', `Project "${project.name}" has repository access set for ${project.repositorySource}; clear it first.`);
      }
      const updated = { ...project, ...b };
      this.projects[i] = updated;
      return this.send(res, 200, updated);
    }
    if (name === 'listMembers') {
      const views: ProjectMemberView[] = this.users
        .filter((u) => members.includes(u.id))
        .sort((a, b) => a.email.localeCompare(b.email))
        .map((u) => ({ userId: u.id, email: u.email, displayName: u.displayName, role: u.role, addedAt: now() }));
      return this.send(res, 200, views);
    }
    if (name === 'addMember') {
      const userId = (body as { userId: string }).userId;
      if (!this.users.some((u) => u.id === userId)) return this.error(res, 404, 'not_found', `There is no user ${userId}.`);
      this.members.set(project.id, [...new Set([...members, userId])]);
      return this.send(res, 201, { ok: true });
    }
    if (!members.includes(params.userId as string)) return this.error(res, 404, 'not_found', `User ${params.userId} is not a member of project "${project.name}".`);
    this.members.set(
      project.id,
      members.filter((u) => u !== params.userId),
    );
    return this.send(res, 200, { ok: true });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://x');
    const path = url.pathname.replace(/^\/api\/v1/, '');
    const body: unknown = text ? JSON.parse(text) : undefined;
    const method = req.method ?? '';
    const matched = matchGatewayRoute(method, url.pathname);
    this.requests.push({ method, path: `${path}${url.search}`, headers: req.headers, body, route: matched?.name });
    const route = `${req.method} ${path}`;
    if (!matched) {
      const message = `The gateway serves no route ${method} ${url.pathname} (libs/contracts GatewayRoutes).`;
      this.drift.push({ method, path: url.pathname, message, issues: [] });
      return this.error(res, 404, 'route_not_found', message);
    }
    this.current = { method, path: url.pathname, route: matched.route };
    const issues = this.refusals(matched.route, matched.params, Object.fromEntries(url.searchParams), body);
    if (issues.length > 0) {
      const message = invalidRequestMessage(issues);
      this.drift.push({ method, path: url.pathname, message, issues });
      return this.send(res, 400, { code: 'validation_failed', message, requestId: 'req-1', details: { issues } });
    }
    if (route === 'POST /auth/login') {
      const b = body as { email: string; password: string };
      if (b.password !== 'correct horse') return this.error(res, 401, 'unauthenticated', 'Wrong email or password.');
      const user = { id: 'u1', email: b.email, displayName: 'Dev', role: 'developer', projectIds: ['p1'], disabledAt: null, revokedAt: null, createdAt: now() };
      return this.send(res, 200, { user, csrfToken: 'csrf-1' }, { 'set-cookie': 'lemni_session=cookie-1; HttpOnly; SameSite=Strict; Path=/' });
    }
    if (req.headers.authorization !== undefined && req.headers.authorization !== `Bearer ${GOOD_TOKEN}`) {
      // As the gateway does: a malformed or unknown Authorization header is refused even beside a cookie.
      return this.error(res, 401, 'unauthenticated', 'The Authorization header must be "Bearer <token>".');
    }
    if (route === 'POST /auth/tokens') {
      if (req.headers.cookie !== 'lemni_session=cookie-1' || req.headers['x-csrf-token'] !== 'csrf-1') return this.error(res, 401, 'unauthenticated', 'You need to sign in.');
      return this.send(res, 201, {
        id: 't1',
        name: (body as { name: string }).name,
        prefix: 'lmn_good',
        expiresAt: '2027-02-27T00:00:00.000Z',
        revokedAt: null,
        lastUsedAt: null,
        createdAt: now(),
        token: GOOD_TOKEN,
      });
    }
    if (req.headers.authorization !== `Bearer ${GOOD_TOKEN}`) return this.error(res, 401, 'unauthenticated', 'The API token is unknown, expired or revoked.');
    if (route === 'GET /auth/me') {
      return this.send(res, 200, {
        user: { id: 'u1', email: 'dev@example.org', displayName: 'Dev', role: 'developer', projectIds: ['p1'], disabledAt: null, revokedAt: null, createdAt: now() },
        csrfToken: null,
        via: 'token',
      });
    }
    if (route === 'GET /projects') return this.send(res, 200, this.projects);
    if (route === 'GET /users') return this.projectRefusal ? this.error(res, this.projectRefusal.status, this.projectRefusal.code, this.projectRefusal.message) : this.send(res, 200, this.users);
    if (matched.name === 'createProject' || matched.name === 'updateProject' || matched.name === 'listMembers' || matched.name === 'addMember' || matched.name === 'removeMember') {
      return this.projectRoute(res, matched.name, matched.params, body);
    }
    let m = /^\/projects\/([^/]+)\/policy\/dry-run$/.exec(path);
    if (m && req.method === 'POST') return this.send(res, 200, this.dryRun);
    m = /^\/projects\/([^/]+)\/policy$/.exec(path);
    if (m && req.method === 'GET') {
      const current = this.policies.get(m[1] as string);
      return current ? this.send(res, 200, current) : this.error(res, 404, 'not_found', 'Project "demo" has no published policy; the built-in default applies.');
    }
    if (m && req.method === 'POST') {
      const projectId = m[1] as string;
      const version = (this.policies.get(projectId)?.version ?? 1) + 1;
      const b = body as { sourceText: string; comment?: string };
      const published = {
        id: `pv${version}`,
        projectId,
        version,
        document: {},
        sourceText: b.sourceText,
        authorId: 'u1',
        authorEmail: 'alice@example.org',
        comment: b.comment ?? '',
        createdAt: now(),
      };
      this.policies.set(projectId, published);
      return this.send(res, 201, published);
    }
    m = /^\/projects\/([^/]+)\/(repository|repository\/access|agents)$/.exec(path);
    if (m) return this.repositoryRoute(res, method, decodeURIComponent(m[1] as string), m[2] as string, body);
    m = /^\/projects\/([^/]+)\/environment(\/prepare|\/jobs\/([^/]+)\/log)?$/.exec(path);
    if (m) {
      const projectId = m[1] as string;
      if (!this.projects.some((p) => p.id === projectId)) return this.error(res, 404, 'not_found', `There is no project ${projectId}.`);
      const current = this.environments.get(projectId) ?? baseEnvironment();
      if (!m[2]) return this.send(res, 200, current);
      if (m[2] === '/prepare') {
        if (this.prepareRefusal) return this.error(res, this.prepareRefusal.status, this.prepareRefusal.code, this.prepareRefusal.message);
        const next = this.prepares.get(projectId) ?? current;
        this.environments.set(projectId, next);
        return this.send(res, 202, next);
      }
      const jobId = decodeURIComponent(m[3] as string);
      const log = this.jobLogs.get(jobId);
      if (!log || log.projectId !== projectId) return this.error(res, 404, 'not_found', `Project "demo" has no environment preparation ${jobId}.`);
      const offset = Number(url.searchParams.get('offset') ?? '0');
      const available = Buffer.byteLength(log.parts.slice(0, log.revealed).join(''), 'utf8');
      if (log.grows && offset >= available && log.revealed < log.parts.length) log.revealed++;
      const all = Buffer.from(log.parts.slice(0, log.revealed).join(''), 'utf8');
      const complete = log.revealed === log.parts.length;
      if (complete && log.after) this.environments.set(projectId, log.after);
      const from = Math.min(offset, all.length);
      return this.send(res, 200, { jobId, text: all.subarray(from).toString('utf8'), offset: from, nextOffset: all.length, complete });
    }
    if (route === 'POST /sessions') {
      if (this.sessionRefusal) return this.error(res, this.sessionRefusal.status, this.sessionRefusal.code, this.sessionRefusal.message);
      // Checked against GatewayRoutes above; parsed again here for the defaults the gateway applies.
      const b = CreateSessionRequest.parse(body);
      this.sessionId = `s${this.nextId++}`;
      const s = sessionView(this.sessionId, {
        instruction: b.instruction,
        agent: b.agent,
        mode: b.mode,
        headless: b.mode === 'headless',
        includedUncommitted: b.includedUncommitted,
        baseCommit: b.baseCommit ?? null,
      });
      this.sessions.set(s.id, s);
      this.playing = false;
      this.gateReached = new Promise((resolve) => (this.signalGateReached = resolve));
      return this.send(res, 201, s);
    }
    if (route === 'GET /sessions') {
      const q = url.searchParams;
      const prefix = q.get('idPrefix');
      const waitingFor = (id: string) => this.approvals.filter((a) => a.sessionId === id && a.state === 'pending').length;
      const rows = [...this.sessions.values()]
        .filter((x) => prefix === null || x.id.startsWith(prefix))
        .filter((x) => q.get('status') === null || x.status === q.get('status'))
        .filter((x) => q.get('userId') === null || x.userId === q.get('userId'))
        .filter((x) => q.get('waiting') !== 'true' || waitingFor(x.id) > 0)
        .map((x) => ({ ...x, ownerEmail: null, pendingApprovals: waitingFor(x.id) }));
      return this.send(res, 200, rows.slice(0, Number(q.get('limit') ?? '100')));
    }
    m = /^\/sessions\/([^/]+)\/subagents$/.exec(path);
    if (m && req.method === 'POST') {
      const b = body as { agent: string; instruction: string };
      const child = sessionView(`s${this.nextId++}`, { parentSessionId: m[1] as string, depth: 1, agent: b.agent, instruction: b.instruction, mode: 'interactive', headless: false });
      this.sessions.set(child.id, child);
      return this.send(res, 201, child);
    }
    m = /^\/sessions\/([^/]+)(\/tool-calls|\/stop|\/revoke)?$/.exec(path);
    if (m) {
      const s = this.sessions.get(m[1] as string);
      if (!s) return this.error(res, 404, 'not_found', `There is no session ${m[1]}.`);
      if (m[2] === '/tool-calls')
        return this.send(res, 200, [
          {
            id: 'c1',
            sessionId: s.id,
            seq: 1,
            name: 'Bash',
            arguments: { command: 'npm test' },
            decision: { effect: 'allow', rule: 'commands.free[0]', reason: 'free' },
            result: null,
            agent: 'general',
            createdAt: now(),
          },
        ]);
      if (m[2] === '/stop' || m[2] === '/revoke') {
        const reason = m[2] === '/stop' ? 'stopped' : 'revoked';
        if (reason === 'stopped') this.onStop();
        this.emit({ type: 'session_stopped', status: 'stopped', stopReason: reason, class: reason, summary: null, exitCode: 3 });
        this.finish({ type: 'session_stopped', stopReason: reason }, s.id);
        return this.send(res, 200, { session: this.sessions.get(s.id), approvalsRejected: 1, sandboxDestroyed: true, sandboxNote: null });
      }
      return this.send(res, 200, s);
    }
    if (path === '/admin/exec-hosts' || path.startsWith('/admin/exec-hosts/')) return this.execHostRoute(res, method, path, body);
    if (route === 'GET /approvals') {
      const prefix = url.searchParams.get('idPrefix');
      const state = url.searchParams.get('state');
      return this.send(
        res,
        200,
        this.approvals.filter((a) => (prefix === null || a.id.startsWith(prefix)) && (state === null || a.state === state)),
      );
    }
    m = /^\/approvals\/([^/]+)(\/approve|\/reject)?$/.exec(path);
    if (m) {
      const a = this.approvals.find((x) => x.id === m?.[1]);
      if (!a) return this.error(res, 404, 'not_found', `There is no approval ${m[1]}.`);
      if (!m[2]) return this.send(res, 200, a);
      if (a.state !== 'pending') return this.error(res, 409, 'approval_already_answered', `Approval ${a.id} was already answered (${a.state}).`);
      a.state = m[2] === '/approve' ? 'approved' : 'rejected';
      const response = (body as { response?: string } | undefined)?.response;
      if (a.state === 'approved' && response !== undefined) a.response = response;
      const reason = (body as { reason?: string } | undefined)?.reason;
      if (a.state === 'rejected' && reason !== undefined) a.reason = reason;
      return this.send(res, 200, a);
    }
    if (route === 'GET /audit/verify') return this.send(res, 200, this.auditVerify);
    if (route === 'GET /audit/export') {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write(this.auditExport.slice(0, 5));
      res.end(this.auditExport.slice(5));
      return;
    }
    // A route of the table this fake does not play: not drift, but no test may rely on it.
    return this.error(res, 404, 'route_not_found', `The fake gateway does not serve ${route}.`);
  }
}
