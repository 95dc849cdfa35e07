import { Inject, Injectable } from '@nestjs/common';
import type { ChangePasswordRequest, CreatedToken, CreateTokenRequest, LoginRequest, LoginResponse, MeResponse, OkResponse, TokenView } from '@lemniscate/contracts';
import { defineAbilitiesFor } from '@lemniscate/policy';
import { AuditService } from '../audit/audit.service';
import { AppError, ErrorCode } from '../common/errors';
import { GATEWAY_CONFIG, type GatewayConfig } from '../config/config';
import { ApiTokensRepository } from '../db/repositories/api-tokens.repository';
import { LoginFailuresRepository } from '../db/repositories/login-failures.repository';
import { ProjectMembershipsRepository } from '../db/repositories/project-memberships.repository';
import { UsersRepository } from '../db/repositories/users.repository';
import { WebSessionsRepository } from '../db/repositories/web-sessions.repository';
import type { UserRow } from '../db/schema';
import { MetricsService } from '../metrics/metrics.service';
import { LoginRateLimiter } from './login-rate-limiter';
import { OidcService } from './oidc/oidc.service';
import { hashPassword, hashSecret, newSecret, safeEqual, verifyPassword } from './password';
import { actorOf, type Principal } from './principal';
import { toTokenView, toUserView } from './views';

/** How stale a token's `lastUsedAt` may be: it is written at most this often per token. */
export const TOKEN_TOUCH_INTERVAL_MS = 60_000;

export const SESSION_COOKIE = 'lemni_session';
export const CSRF_HEADER = 'x-csrf-token';
const TOKEN_PREFIX = 'lemni_';

/** Where the session cookie is written; bound to the HTTP response by the controller. */
export interface CookieJar {
  set(value: string, maxAgeMs: number): void;
  clear(): void;
}

/** What authentication reads from a request (HTTP or WebSocket upgrade). */
export interface Credentials {
  authorization?: string | undefined;
  sessionCookie?: string | undefined;
  csrfHeader?: string | undefined;
  /** Only reads skip the CSRF check. */
  safeMethod: boolean;
  ip?: string | undefined;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
export const isSafeMethod = (method: string): boolean => SAFE_METHODS.has(method.toUpperCase());

@Injectable()
export class AuthService {
  private readonly limiter: LoginRateLimiter;

  constructor(
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
    private readonly users: UsersRepository,
    private readonly memberships: ProjectMembershipsRepository,
    private readonly tokens: ApiTokensRepository,
    private readonly webSessions: WebSessionsRepository,
    private readonly audit: AuditService,
    private readonly metrics: MetricsService,
    private readonly oidc: OidcService,
    loginFailures: LoginFailuresRepository,
  ) {
    this.limiter = new LoginRateLimiter(loginFailures, config.login.maxFailures, config.login.windowSeconds * 1000);
  }

  async login(input: LoginRequest, ip: string, jar: CookieJar): Promise<LoginResponse> {
    const email = input.email.toLowerCase();
    const ssoOnly = this.oidc.passwordRefusal();
    if (ssoOnly) {
      await this.audit.record({ actor: 'anonymous', kind: 'auth.login_failed', payload: { email, ip, reason: 'password_sign_in_disabled' } });
      throw new AppError(ErrorCode.Forbidden, ssoOnly);
    }
    const keys = [`account:${email}`, `ip:${ip}`];
    const wait = await this.limiter.retryAfterSeconds(keys);
    if (wait > 0) {
      await this.audit.record({ actor: 'anonymous', kind: 'auth.login_throttled', payload: { email, ip } });
      throw new AppError(ErrorCode.RateLimited, `Too many failed sign-in attempts; try again in ${wait} seconds.`, undefined, wait);
    }
    const user = await this.users.findByEmail(email);
    const passwordOk = await verifyPassword(input.password, user?.passwordHash ?? null);
    if (!user || !passwordOk) {
      await this.limiter.recordFailure(keys);
      this.metrics.deniedRequests.inc({ code: ErrorCode.Unauthenticated });
      await this.audit.record({ actor: 'anonymous', kind: 'auth.login_failed', payload: { email, ip, reason: user ? 'wrong_password' : 'unknown_email' } });
      throw new AppError(ErrorCode.Unauthenticated, 'The email or the password is wrong.');
    }
    if (user.revokedAt || user.disabledAt) {
      await this.audit.record({ actor: `user:${user.id}`, kind: 'auth.login_failed', payload: { email, ip, reason: user.revokedAt ? 'revoked' : 'disabled' } });
      this.refuseInactive(user);
    }
    await this.limiter.recordSuccess(`account:${email}`);
    const cookie = newSecret('');
    const csrfToken = newSecret('');
    const maxAgeMs = this.config.webSessionHours * 3600_000;
    await this.webSessions.create({ id: hashSecret(cookie), userId: user.id, csrfToken, expiresAt: new Date(Date.now() + maxAgeMs) });
    await this.audit.record({ actor: `user:${user.id}`, kind: 'auth.login', payload: { ip, via: 'password' } });
    jar.set(cookie, maxAgeMs);
    return { user: toUserView(user, await this.memberships.projectIdsOf(user.id)), csrfToken };
  }

  async logout(principal: Principal, jar: CookieJar): Promise<OkResponse> {
    if (principal.webSessionId) await this.webSessions.revoke(principal.webSessionId);
    jar.clear();
    await this.audit.record({ actor: actorOf(principal), kind: 'auth.logout', payload: { via: principal.via } });
    return { ok: true };
  }

  /** How the generated first-start password is replaced; other console sessions of the person end. */
  async changePassword(principal: Principal, input: ChangePasswordRequest): Promise<OkResponse> {
    const user = await this.users.findById(principal.userId);
    if (!user || !(await verifyPassword(input.currentPassword, user.passwordHash))) {
      await this.audit.record({ actor: actorOf(principal), kind: 'auth.password_change_failed', payload: { reason: 'wrong_current_password' } });
      throw new AppError(ErrorCode.Forbidden, 'The current password is wrong; the password was not changed.');
    }
    await this.users.update(user.id, { passwordHash: await hashPassword(input.newPassword) });
    const ended = await this.webSessions.revokeAllForUser(user.id);
    await this.audit.record({ actor: actorOf(principal), kind: 'auth.password_changed', payload: { webSessionsEnded: ended } });
    return { ok: true };
  }

  async me(principal: Principal): Promise<MeResponse> {
    const user = await this.users.findById(principal.userId);
    if (!user) throw new AppError(ErrorCode.Unauthenticated, 'Your account no longer exists.');
    return { user: toUserView(user, principal.projectIds), csrfToken: principal.csrfToken, via: principal.via };
  }

  /** Establishes who is calling, or explains why nobody is. */
  async authenticate(credentials: Credentials): Promise<Principal> {
    const bearer = /^Bearer\s+(\S+)$/i.exec(credentials.authorization ?? '')?.[1];
    if (credentials.authorization !== undefined && bearer === undefined) {
      throw new AppError(ErrorCode.Unauthenticated, 'The Authorization header must be "Bearer <token>".');
    }
    if (bearer !== undefined) return this.fromToken(bearer, credentials.ip);
    if (credentials.sessionCookie) return this.fromCookie(credentials);
    throw new AppError(ErrorCode.Unauthenticated, 'You need to sign in, or send an API token as "Authorization: Bearer <token>".');
  }

  async createToken(principal: Principal, input: CreateTokenRequest): Promise<CreatedToken> {
    const token = newSecret(TOKEN_PREFIX);
    const row = await this.tokens.create({
      userId: principal.userId,
      name: input.name,
      tokenHash: hashSecret(token),
      prefix: token.slice(0, TOKEN_PREFIX.length + 6),
      expiresAt: new Date(Date.now() + input.expiresInDays * 86_400_000),
    });
    // Made by someone the identity provider vouches for: the provider is asked again at the token's use too.
    const webSession = principal.webSessionId ? await this.webSessions.findById(principal.webSessionId) : undefined;
    const parent = principal.tokenId ? await this.tokens.findById(principal.tokenId) : undefined;
    const bound = await this.oidc.bindToken({ webSession, token: parent }, row.id);
    await this.audit.record({
      actor: actorOf(principal),
      kind: 'auth.token_created',
      payload: { tokenId: row.id, name: row.name, expiresAt: row.expiresAt, ...(bound ? { checkedWithProvider: true } : {}) },
    });
    return { ...toTokenView(row), token };
  }

  async listTokens(principal: Principal): Promise<TokenView[]> {
    return (await this.tokens.listForUser(principal.userId)).map(toTokenView);
  }

  async revokeToken(principal: Principal, tokenId: string): Promise<TokenView> {
    const token = await this.tokens.findById(tokenId);
    // Someone else's token reads as missing: its existence is not the caller's business.
    if (!token || (token.userId !== principal.userId && principal.role !== 'admin')) {
      throw new AppError(ErrorCode.NotFound, `There is no API token ${tokenId} among yours.`);
    }
    if (token.revokedAt) throw new AppError(ErrorCode.Conflict, `The API token "${token.name}" was already revoked.`);
    await this.tokens.revoke(token.id);
    await this.audit.record({ actor: actorOf(principal), kind: 'auth.token_revoked', payload: { tokenId: token.id, owner: token.userId } });
    const after = await this.tokens.findById(token.id);
    return toTokenView(after ?? token);
  }

  private async fromToken(secret: string, ip: string | undefined): Promise<Principal> {
    const token = await this.tokens.findByHash(hashSecret(secret));
    const reject = async (reason: string, sentence: string): Promise<never> => {
      this.metrics.deniedRequests.inc({ code: ErrorCode.Unauthenticated });
      await this.audit.record({ actor: token ? `user:${token.userId}` : 'anonymous', kind: 'auth.token_rejected', payload: { reason, tokenId: token?.id ?? null, ip: ip ?? null } });
      throw new AppError(ErrorCode.Unauthenticated, sentence);
    };
    if (!token) return reject('unknown', 'This API token is not valid.');
    if (token.revokedAt) {
      // Revoking a person revokes their tokens: the CLI then says why, not only that the token is dead.
      const owner = await this.users.findById(token.userId);
      if (owner?.revokedAt) return reject('user_revoked', 'This API token was revoked with its account: an administrator revoked the account.');
      return reject('revoked', 'This API token has been revoked.');
    }
    if (!token.expiresAt || token.expiresAt.getTime() <= Date.now()) return reject('expired', `This API token expired on ${(token.expiresAt ?? new Date(0)).toISOString()}.`);
    const user = await this.users.findById(token.userId);
    if (!user) return reject('no_user', 'This API token belongs to an account that no longer exists.');
    this.refuseInactive(user);
    // Made by someone the identity provider vouches for: asked again, at most every recheckSeconds.
    const checked = await this.oidc.recheckToken(token, user);
    // "Last used" to the minute: one write a minute per token, not one per request.
    if (!token.lastUsedAt || Date.now() - token.lastUsedAt.getTime() >= TOKEN_TOUCH_INTERVAL_MS) await this.tokens.touch(token.id);
    return this.principalFor(checked, { via: 'token', tokenId: token.id, webSessionId: null, csrfToken: null });
  }

  private async fromCookie(credentials: Credentials): Promise<Principal> {
    const id = hashSecret(credentials.sessionCookie ?? '');
    const session = await this.webSessions.findById(id);
    if (!session || session.revokedAt || session.expiresAt.getTime() <= Date.now()) {
      // A person whose account was revoked or disabled is told so, not merely asked to sign in again.
      const owner = session ? await this.users.findById(session.userId) : undefined;
      if (owner) this.refuseInactive(owner);
      throw new AppError(ErrorCode.Unauthenticated, 'Your console session has ended; sign in again.');
    }
    let user = await this.users.findById(session.userId);
    if (!user) throw new AppError(ErrorCode.Unauthenticated, 'Your account no longer exists.');
    this.refuseInactive(user);
    if (!credentials.safeMethod && !safeEqual(credentials.csrfHeader ?? '', session.csrfToken)) {
      this.metrics.deniedRequests.inc({ code: ErrorCode.CsrfMismatch });
      await this.audit.record({ actor: `user:${user.id}`, kind: 'auth.csrf_rejected', payload: { ip: credentials.ip ?? null } });
      throw new AppError(ErrorCode.CsrfMismatch, `This change was refused: it must carry the ${CSRF_HEADER} header given at sign-in.`);
    }
    // Opened through the identity provider: asked again, at most every recheckSeconds (after the cheap checks).
    user = await this.oidc.recheck(session, user);
    return this.principalFor(user, { via: 'cookie', tokenId: null, webSessionId: session.id, csrfToken: session.csrfToken });
  }

  private refuseInactive(user: UserRow): void {
    if (user.revokedAt) throw new AppError(ErrorCode.Unauthenticated, 'This account has been revoked by an administrator; ask one of them if you think it should not have been.');
    if (user.disabledAt) throw new AppError(ErrorCode.Unauthenticated, 'This account is disabled; ask an administrator to enable it again.');
  }

  private async principalFor(user: UserRow, how: Pick<Principal, 'via' | 'tokenId' | 'webSessionId' | 'csrfToken'>): Promise<Principal> {
    const projectIds = await this.memberships.projectIdsOf(user.id);
    return {
      userId: user.id,
      email: user.email,
      role: user.role,
      projectIds,
      ability: defineAbilitiesFor(
        { id: user.id, role: user.role },
        projectIds.map((projectId) => ({ projectId })),
      ),
      ...how,
    };
  }
}
