import { Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { OnGatewayConnection, OnGatewayDisconnect, WebSocketGateway } from '@nestjs/websockets';
import { EventsClientMessage, type EventsServerMessage, type GatewayEvent } from '@lemniscate/contracts';
import type { IncomingMessage } from 'node:http';
import type { WebSocket } from 'ws';
import { AccessService } from '../auth/access.service';
import { AuthService, SESSION_COOKIE } from '../auth/auth.service';
import type { Principal } from '../auth/principal';
import { AppError, ErrorCode } from '../common/errors';
import { describeFailure, isDatabaseError } from '../db/errors';
import { SessionsRepository } from '../db/repositories/sessions.repository';
import { MetricsService } from '../metrics/metrics.service';
import type { StoredEvent } from './event-bus';
import { EventsService } from './events.service';

const REPLAY_PAGE = 1000;
/** Close codes in the private range, mirroring HTTP: 4401 unauthenticated, 4403 revoked. */
const CLOSE_UNAUTHENTICATED = 4401;
const CLOSE_REVOKED = 4403;
/** The standard "service restart" code: reconnect and send your last seq to replay what was missed. */
const CLOSE_RESUME = 1012;

interface Subscription {
  sessionId: string | null;
  projectId: string | null;
  /** The highest seq already sent; replayed and live events meet here without duplicates. */
  lastSent: number;
}

interface Connection {
  socket: WebSocket;
  principal: Principal;
  subscriptions: Map<string, Subscription>;
  /** Session owners, so a project stream shows a developer only their own sessions. */
  owners: Map<string, string | null>;
  /** Messages and deliveries run one after the other, so events leave in seq order. */
  chain: Promise<void>;
}

function parseCookieHeader(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    try {
      if (name && !(name in out)) out[name] = decodeURIComponent(value);
    } catch {
      // A malformed cookie is ignored, exactly as if it were absent.
    }
  }
  return out;
}

function toWire(event: StoredEvent): GatewayEvent {
  return { ...event.payload, seq: event.seq, type: event.type, sessionId: event.sessionId, projectId: event.projectId, at: event.at };
}

/**
 * `/api/v1/events`: authenticated by API token (Authorization header or `?token=`) or by the console
 * cookie (same origin only); per-session and per-project subscriptions; replay after a last seq.
 */
// Client messages are small JSON objects; the ws default of 100 MiB would invite memory exhaustion.
@WebSocketGateway({ path: '/api/v1/events', maxPayload: 64 * 1024 })
export class EventsGateway implements OnGatewayConnection, OnGatewayDisconnect, OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('EventsGateway');
  private readonly connections = new Map<WebSocket, Connection>();
  private unsubscribe: (() => void) | undefined;
  private unsubscribeGap: (() => void) | undefined;

  constructor(
    private readonly auth: AuthService,
    private readonly access: AccessService,
    private readonly events: EventsService,
    private readonly sessions: SessionsRepository,
    private readonly metrics: MetricsService,
  ) {}

  onModuleInit(): void {
    this.unsubscribe = this.events.subscribe((event) => this.dispatch(event));
    this.unsubscribeGap = this.events.onGap(() => {
      for (const socket of this.connections.keys()) socket.close(CLOSE_RESUME, 'events may have been missed; reconnect with your last seq');
    });
  }

  onModuleDestroy(): void {
    this.unsubscribe?.();
    this.unsubscribeGap?.();
    for (const socket of this.connections.keys()) socket.close(1001, 'gateway shutting down');
  }

  async handleConnection(socket: WebSocket, req: IncomingMessage): Promise<void> {
    // Messages sent while the credentials are being checked are kept, not lost.
    const early: Buffer[] = [];
    const keep = (data: Buffer) => early.push(data);
    socket.on('message', keep);
    let principal: Principal;
    try {
      principal = await this.authenticate(req);
    } catch (error) {
      if (isDatabaseError(error)) return this.resume(socket);
      const message = error instanceof AppError ? error.message : 'Authentication failed.';
      this.send(socket, { type: 'error', code: ErrorCode.Unauthenticated, message });
      socket.close(CLOSE_UNAUTHENTICATED, 'unauthenticated');
      return;
    }
    socket.off('message', keep);
    if (socket.readyState !== socket.OPEN) return;
    this.metrics.wsClients.inc();
    const connection: Connection = { socket, principal, subscriptions: new Map(), owners: new Map(), chain: Promise.resolve() };
    this.connections.set(socket, connection);
    const handle = (data: Buffer) => this.enqueue(connection, () => this.onMessage(connection, data));
    socket.on('message', handle);
    for (const data of early) handle(data);
  }

  handleDisconnect(socket: WebSocket): void {
    this.connections.delete(socket);
  }

  private enqueue(connection: Connection, task: () => Promise<void>): void {
    connection.chain = connection.chain.then(task).catch((err: unknown) => {
      this.logger.error({ err }, 'event stream task failed');
      if (isDatabaseError(err)) this.resume(connection.socket);
    });
  }

  /**
   * The database is away (a restart): not the client's fault, and not a reason to give up. The
   * socket is closed with "service restart", so the client reconnects with its last seq and replays.
   */
  private resume(socket: WebSocket): void {
    if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(CLOSE_RESUME, 'the database is not reachable; reconnect with your last seq');
  }

  private async authenticate(req: IncomingMessage): Promise<Principal> {
    const url = new URL(req.url ?? '/', 'http://gateway.invalid');
    const queryToken = url.searchParams.get('token');
    const sessionCookie = parseCookieHeader(req.headers.cookie)[SESSION_COOKIE];
    const authorization = req.headers.authorization ?? (queryToken ? `Bearer ${queryToken}` : undefined);
    if (!authorization && sessionCookie) {
      // Browsers attach cookies to cross-site WebSocket handshakes too: a cookie counts only from our own origin.
      const origin = req.headers.origin;
      if (!origin || !req.headers.host || safeHost(origin) !== req.headers.host) {
        throw new AppError(ErrorCode.Unauthenticated, "A console session cookie is accepted only from the gateway's own origin.");
      }
    }
    return this.auth.authenticate({ authorization, sessionCookie, safeMethod: true, ip: req.socket.remoteAddress });
  }

  private async onMessage(connection: Connection, data: Buffer): Promise<void> {
    let raw: unknown;
    try {
      raw = JSON.parse(data.toString('utf8'));
    } catch {
      this.send(connection.socket, { type: 'error', code: ErrorCode.ValidationFailed, message: 'Each message must be one JSON object.' });
      return;
    }
    const parsed = EventsClientMessage.safeParse(raw);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      const where = first?.path.join('.') || 'message';
      this.send(connection.socket, { type: 'error', code: ErrorCode.ValidationFailed, message: `The message is invalid: ${where}: ${first?.message ?? 'unknown shape'}.` });
      return;
    }
    const msg = parsed.data;
    const key = msg.sessionId ? `session:${msg.sessionId}` : `project:${msg.projectId ?? ''}`;
    if (msg.type === 'unsubscribe') {
      connection.subscriptions.delete(key);
      return;
    }
    try {
      await this.authorise(connection, msg.sessionId, msg.projectId);
    } catch (error) {
      if (isDatabaseError(error)) return this.resume(connection.socket);
      const code = error instanceof AppError ? error.code : ErrorCode.Internal;
      this.send(connection.socket, { type: 'error', code, message: error instanceof AppError ? error.message : describeFailure(error) });
      return;
    }
    // Without a seq the stream starts now: nothing this replica already knows of is sent again.
    const sub: Subscription = { sessionId: msg.sessionId ?? null, projectId: msg.projectId ?? null, lastSent: msg.sinceSeq ?? this.events.latestSeq() };
    let replayed = 0;
    if (msg.sinceSeq !== undefined) {
      const scope = sub.sessionId ? { sessionIds: [sub.sessionId] } : { projectIds: [sub.projectId ?? ''] };
      for (;;) {
        const page = await this.events.replay(sub.lastSent, scope, REPLAY_PAGE);
        for (const event of page) {
          sub.lastSent = event.seq;
          if (await this.visible(connection, event)) {
            this.send(connection.socket, { type: 'event', event: toWire(event) });
            replayed++;
          }
        }
        if (page.length < REPLAY_PAGE) break;
      }
    }
    // Live events that arrived during the replay are queued behind this task and skip what was replayed.
    connection.subscriptions.set(key, sub);
    this.send(connection.socket, { type: 'subscribed', sessionId: sub.sessionId, projectId: sub.projectId, replayed });
  }

  private async authorise(connection: Connection, sessionId: string | undefined, projectId: string | undefined): Promise<void> {
    if (sessionId) {
      const session = await this.sessions.findById(sessionId);
      if (!session) throw new AppError(ErrorCode.NotFound, `There is no session ${sessionId}.`);
      connection.owners.set(session.id, session.userId);
      await this.access.require(connection.principal, 'read', 'Session', { projectId: session.projectId, userId: session.userId });
      return;
    }
    await this.access.require(connection.principal, 'read', 'Project', { id: projectId ?? '' });
  }

  private dispatch(event: StoredEvent): void {
    for (const connection of this.connections.values()) {
      if (event.type === 'user_revoked' && connection.principal.userId === event.payload.userId) {
        connection.socket.close(CLOSE_REVOKED, 'revoked');
        continue;
      }
      this.enqueue(connection, () => this.deliver(connection, event));
    }
  }

  private async deliver(connection: Connection, event: StoredEvent): Promise<void> {
    const fresh = [...connection.subscriptions.values()].filter((s) => (s.sessionId ? event.sessionId === s.sessionId : event.projectId === s.projectId) && event.seq > s.lastSent);
    if (fresh.length === 0) return;
    for (const s of fresh) s.lastSent = event.seq;
    if (await this.visible(connection, event)) this.send(connection.socket, { type: 'event', event: toWire(event) });
  }

  /** On a project stream, a developer sees only their own sessions' events (C1). */
  private async visible(connection: Connection, event: StoredEvent): Promise<boolean> {
    if (!event.sessionId || !event.projectId) return true;
    if (!connection.owners.has(event.sessionId)) connection.owners.set(event.sessionId, (await this.sessions.findById(event.sessionId))?.userId ?? null);
    const userId = connection.owners.get(event.sessionId);
    return !!userId && this.access.can(connection.principal, 'read', 'Session', { projectId: event.projectId, userId });
  }

  private send(socket: WebSocket, message: EventsServerMessage): void {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(message));
  }
}

function safeHost(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}
