import { createHash } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { LoginResponse, OidcCliRequest } from '@lemniscate/contracts';
import type { Role } from '@lemniscate/policy';
import * as client from 'openid-client';
import { AuditService } from '../../audit/audit.service';
import { AppError, ErrorCode } from '../../common/errors';
import { GATEWAY_CONFIG, type GatewayConfig } from '../../config/config';
import { ApiTokensRepository } from '../../db/repositories/api-tokens.repository';
import { OidcLoginsRepository } from '../../db/repositories/oidc-logins.repository';
import { ProjectMembershipsRepository } from '../../db/repositories/project-memberships.repository';
import { ProjectsRepository } from '../../db/repositories/projects.repository';
import { UsersRepository } from '../../db/repositories/users.repository';
import { WebSessionsRepository } from '../../db/repositories/web-sessions.repository';
import type { ApiTokenRow, UserRow, WebSessionRow } from '../../db/schema';
import { SECRET_BOX, type SecretBox } from '../../secrets/secret-box';
import type { CookieJar } from '../auth.service';
import { hashSecret, newSecret, safeEqual } from '../password';
import { toUserView } from '../views';
import type { OidcConfig } from './oidc-config';

const LOGIN_TTL_MS = 10 * 60 * 1000;
/** How long the one-time code sent to a CLI's loopback address can be redeemed. */
const CLI_CODE_TTL_MS = 2 * 60 * 1000;
const ROLE_ORDER: Role[] = ['admin', 'security_officer', 'developer'];
const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/**
 * A sign-in that did not happen, with the sentence the person reads on the console's sign-in page,
 * or, for `lemni login --sso`, that the CLI prints (its loopback port set).
 */
export class OidcSignInError extends Error {
  constructor(
    message: string,
    readonly cliPort: number | null = null,
  ) {
    super(message);
  }
}

/** What a provider check works on: a console session or an API token made from one. */
interface CheckedHolder {
  /** Deduplicates concurrent checks of the same holder. */
  key: string;
  refreshToken: string | null;
  checkedAt: Date | null;
  /** The sealing context of its refresh token. */
  context: string;
  /** The end of the sentence when the answer is no (`your console session was ended`), and what to do then. */
  ended: string;
  again: string;
  /** While the provider does not answer. */
  kept: string;
  end(): Promise<unknown>;
  checked(sealedRefreshToken: string): Promise<void>;
  audit: Record<string, unknown>;
}

interface Mapped {
  role: Role | null;
  groups: string[];
  /** Project names this person's groups make them a member of (among the projects the mapping names). */
  projects: string[];
}

/**
 * Single sign-on with an OpenID Provider, authorization code flow with PKCE (S256), state and nonce
 * (openid-client validates the ID token: issuer, audience, expiry, nonce, and, with its
 * non-repudiation checks on, the signature against the provider's published keys). Roles and the memberships of the projects the mapping names come from the groups
 * claim at every sign-in and every check; a console session keeps the provider's refresh token
 * (sealed) and asks the provider again every `recheckSeconds`, so a person removed there, or from
 * every mapped group, loses the console at the next check. Every sign-in, refusal and change of role
 * or membership is audited.
 */
@Injectable()
export class OidcService {
  private readonly logger = new Logger('Oidc');
  private readonly config: OidcConfig | null;
  private discovered: Promise<client.Configuration> | undefined;
  private readonly checking = new Map<string, Promise<UserRow>>();

  constructor(
    @Inject(GATEWAY_CONFIG) private readonly gateway: GatewayConfig,
    private readonly logins: OidcLoginsRepository,
    private readonly users: UsersRepository,
    private readonly memberships: ProjectMembershipsRepository,
    private readonly projects: ProjectsRepository,
    private readonly webSessions: WebSessionsRepository,
    private readonly tokens: ApiTokensRepository,
    private readonly audit: AuditService,
    @Inject(SECRET_BOX) private readonly box: SecretBox,
  ) {
    this.config = gateway.oidc ?? null;
  }

  get enabled(): boolean {
    return this.config !== null;
  }

  /** What the console's sign-in page shows. */
  info(): { enabled: boolean; label: string | null; localSignIn: boolean } {
    return { enabled: this.enabled, label: this.config?.label ?? null, localSignIn: this.config?.localSignIn ?? true };
  }

  /** Password sign-in refused by the deployment (`localSignIn: false`): the sentence, else null. */
  passwordRefusal(): string | null {
    return this.config && !this.config.localSignIn ? `This deployment signs people in through ${new URL(this.config.issuer).host} only: use "${this.config.label}" on the console.` : null;
  }

  private provider(): Promise<client.Configuration> {
    const c = this.config!;
    this.discovered ??= client
      .discovery(new URL(c.issuer), c.clientId, undefined, client.ClientSecretBasic(c.clientSecret), {
        // The ID token's signature is checked against the provider's keys even though it comes
        // straight from the token endpoint (OpenID Connect lets a client rely on TLS alone there; a
        // forged token must fail here too). Plain http only for a provider on this machine.
        execute: LOOPBACK.test(new URL(c.issuer).hostname) ? [client.allowInsecureRequests, client.enableNonRepudiationChecks] : [client.enableNonRepudiationChecks],
      })
      .catch((e: unknown) => {
        this.discovered = undefined;
        throw new OidcSignInError(
          `The identity provider ${c.issuer} cannot be reached or does not describe itself as an OpenID Provider (${describe(e)}); try again shortly, or ask an administrator.`,
        );
      });
    return this.discovered;
  }

  /** Where the browser goes to sign in: the provider's authorization endpoint, with this sign-in's state. */
  async start(returnTo: string | undefined, cli?: { port: number; challenge: string }): Promise<string> {
    const c = this.requireConfig();
    const provider = await this.provider();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const codeVerifier = client.randomPKCECodeVerifier();
    await this.logins.create({
      stateHash: hashSecret(state),
      codeVerifier,
      nonce,
      returnTo: safeReturn(returnTo),
      expiresAt: new Date(Date.now() + LOGIN_TTL_MS),
      cliPort: cli?.port ?? null,
      cliChallenge: cli?.challenge ?? null,
    });
    return client
      .buildAuthorizationUrl(provider, {
        redirect_uri: c.redirectUri,
        scope: c.scopes.join(' '),
        state,
        nonce,
        code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
        ...(c.scopes.includes('offline_access') ? { prompt: 'consent' } : {}),
      })
      .toString();
  }

  /**
   * The provider's answer: the state taken (once), the code exchanged with the PKCE verifier, the ID
   * token validated, the person mapped and a console session opened. Answers where the browser goes.
   */
  async callback(query: URLSearchParams, ip: string, jar: CookieJar): Promise<string> {
    const c = this.requireConfig();
    const state = query.get('state') ?? '';
    const fail = async (reason: string, sentence: string, extra: Record<string, unknown> = {}): Promise<never> => {
      await this.audit.record({ actor: 'anonymous', kind: 'auth.login_failed', payload: { via: 'oidc', ip, reason, ...extra } });
      throw new OidcSignInError(sentence);
    };
    const refusal = this.audit.refusal();
    if (refusal) throw new OidcSignInError(refusal);
    if (query.get('error')) {
      return fail('oidc_provider_error', `The identity provider did not sign you in: ${query.get('error_description') ?? query.get('error')}.`, { error: query.get('error') });
    }
    const login = state ? await this.logins.take(hashSecret(state)) : undefined;
    if (!login) {
      const known = state ? await this.logins.find(hashSecret(state)) : undefined;
      return fail(
        known ? 'oidc_state_reused' : 'oidc_state_unknown',
        known ? 'This sign-in link was already used (or it expired): start again from the sign-in page.' : 'This sign-in did not start here (its state is unknown): start again from the sign-in page.',
      );
    }
    try {
      return await this.signIn(c, login, query, state, ip, jar, fail);
    } catch (e) {
      // A sign-in the CLI started is told to the CLI, on its loopback address.
      if (e instanceof OidcSignInError && login.cliPort) throw new OidcSignInError(e.message, login.cliPort);
      throw e;
    }
  }

  private async signIn(
    c: OidcConfig,
    login: NonNullable<Awaited<ReturnType<OidcLoginsRepository['take']>>>,
    query: URLSearchParams,
    state: string,
    ip: string,
    jar: CookieJar,
    fail: (reason: string, sentence: string, extra?: Record<string, unknown>) => Promise<never>,
  ): Promise<string> {
    const provider = await this.provider();
    const callbackUrl = new URL(c.redirectUri);
    for (const [k, v] of query) callbackUrl.searchParams.append(k, v);
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(provider, callbackUrl, { pkceCodeVerifier: login.codeVerifier, expectedState: state, expectedNonce: login.nonce, idTokenExpected: true });
    } catch (e) {
      return fail('oidc_token_rejected', `The identity provider's answer was refused: ${describe(e)}. Nothing was signed in.`);
    }
    const claims = tokens.claims()!;
    const issuer = claims.iss;
    const subject = claims.sub;
    const mapped = this.map(claims);
    const email = stringClaim(claims, c.claims.email)?.toLowerCase();
    if (!email) return fail('oidc_no_email', `The identity provider did not say your email (claim "${c.claims.email}"), which this deployment names people by; ask an administrator.`, { subject });
    if (!mapped.role) {
      return fail('oidc_no_role', `Your account at the identity provider is in no group this deployment gives a role to (your groups: ${mapped.groups.join(', ') || 'none'}); ask an administrator.`, {
        subject,
        email,
        groups: mapped.groups,
      });
    }
    let user = await this.users.findByOidc(issuer, subject);
    let linked = false;
    if (!user) {
      const byEmail = await this.users.findByEmail(email);
      if (byEmail) {
        if (byEmail.oidcSubject) return fail('oidc_email_taken', `The email ${email} belongs to another single sign-on identity here; ask an administrator.`, { subject, email });
        if (claims.email_verified !== true)
          return fail('oidc_email_unverified', `The identity provider has not verified ${email}, so it cannot be joined to the existing account with that email; ask an administrator.`, {
            subject,
            email,
          });
        user = (await this.users.update(byEmail.id, { oidcIssuer: issuer, oidcSubject: subject }))!;
        linked = true;
      } else {
        user = await this.users.create({ email, displayName: stringClaim(claims, c.claims.name) ?? email, role: mapped.role, passwordHash: null, oidcIssuer: issuer, oidcSubject: subject });
        await this.audit.record({ actor: 'system', kind: 'user.create', payload: { userId: user.id, email, role: mapped.role, via: 'oidc', issuer, subject } });
      }
    }
    if (user.revokedAt || user.disabledAt) {
      return fail('oidc_account_inactive', user.revokedAt ? 'This account has been revoked by an administrator.' : 'This account is disabled; ask an administrator to enable it again.', {
        userId: user.id,
      });
    }
    user = await this.apply(user, mapped, { linked, at: 'sign-in' });
    if (login.cliPort) {
      // `lemni login --sso`: a one-time code to the CLI's loopback address, redeemed with its verifier.
      const code = newSecret('');
      const codeHash = hashSecret(code);
      await this.logins.handToCli(login.stateHash, {
        codeHash,
        userId: user.id,
        refreshToken: tokens.refresh_token ? this.box.seal(tokens.refresh_token, `oidc-refresh:cli:${codeHash}`) : null,
        expiresAt: new Date(Date.now() + CLI_CODE_TTL_MS),
      });
      await this.audit.record({ actor: `user:${user.id}`, kind: 'auth.login', payload: { ip, via: 'oidc', client: 'cli', issuer, subject, groups: mapped.groups, role: user.role } });
      return `http://127.0.0.1:${login.cliPort}/callback?code=${encodeURIComponent(code)}`;
    }
    await this.openSession(user.id, tokens.refresh_token ?? null, jar);
    await this.audit.record({ actor: `user:${user.id}`, kind: 'auth.login', payload: { ip, via: 'oidc', issuer, subject, groups: mapped.groups, role: user.role } });
    return `${this.consoleOrigin()}${login.returnTo}`;
  }

  /**
   * `lemni login --sso`: the one-time code the sign-in sent to the CLI's loopback address, taken once,
   * redeemed only with the verifier whose SHA-256 the CLI gave at the start, opens a session as a
   * password sign-in does (the CLI makes its API token from it; the provider's refresh token goes with it).
   */
  async cliSession(body: OidcCliRequest, ip: string, jar: CookieJar): Promise<LoginResponse> {
    this.requireConfig();
    const fail = async (reason: string, sentence: string, extra: Record<string, unknown> = {}): Promise<never> => {
      await this.audit.record({ actor: 'anonymous', kind: 'auth.login_failed', payload: { via: 'oidc', client: 'cli', ip, reason, ...extra } });
      throw new AppError(ErrorCode.Unauthenticated, sentence);
    };
    const codeHash = hashSecret(body.code);
    const row = await this.logins.takeCliCode(codeHash);
    if (!row) {
      const known = await this.logins.findCliCode(codeHash);
      return fail(
        known ? 'oidc_cli_code_reused' : 'oidc_cli_code_unknown',
        known ? 'This sign-in code was already used, or it expired: run `lemni login --sso` again.' : 'This sign-in code was not given by this gateway: run `lemni login --sso` again.',
      );
    }
    const challenge = createHash('sha256').update(body.codeVerifier).digest('base64url');
    if (!row.cliChallenge || !safeEqual(challenge, row.cliChallenge)) {
      return fail(
        'oidc_cli_verifier_mismatch',
        'This sign-in code was redeemed with another verifier than the one its sign-in started with: only the CLI that asked for it can use it. Run `lemni login --sso` again.',
        {
          userId: row.cliUserId,
        },
      );
    }
    const user = row.cliUserId ? await this.users.findById(row.cliUserId) : undefined;
    if (!user) return fail('no_user', 'The account this sign-in was for no longer exists.');
    if (user.revokedAt || user.disabledAt) {
      return fail('oidc_account_inactive', user.revokedAt ? 'This account has been revoked by an administrator.' : 'This account is disabled; ask an administrator to enable it again.', {
        userId: user.id,
      });
    }
    const csrfToken = await this.openSession(user.id, row.cliRefreshToken ? this.box.open(row.cliRefreshToken, `oidc-refresh:cli:${codeHash}`) : null, jar);
    return { user: toUserView(user, await this.memberships.projectIdsOf(user.id)), csrfToken };
  }

  /** A console session the provider vouches for: its cookie set, the refresh token sealed for it; answers its CSRF token. */
  private async openSession(userId: string, refreshToken: string | null, jar: CookieJar): Promise<string> {
    const cookie = newSecret('');
    const csrfToken = newSecret('');
    const maxAgeMs = this.gateway.webSessionHours * 3600_000;
    const sessionId = hashSecret(cookie);
    await this.webSessions.create({
      id: sessionId,
      userId,
      csrfToken,
      expiresAt: new Date(Date.now() + maxAgeMs),
      oidcRefreshToken: refreshToken ? this.box.seal(refreshToken, `oidc-refresh:${sessionId}`) : null,
      oidcCheckedAt: new Date(),
    });
    jar.set(cookie, maxAgeMs);
    return csrfToken;
  }

  /**
   * An API token made by a session (or a token) that the provider vouches for keeps its refresh token,
   * so the token is checked with the provider like the session: a person removed there loses it.
   * Answers whether the token was bound.
   */
  async bindToken(source: { webSession: WebSessionRow | undefined; token: ApiTokenRow | undefined }, tokenId: string): Promise<boolean> {
    const from = source.webSession?.oidcRefreshToken
      ? { sealed: source.webSession.oidcRefreshToken, context: `oidc-refresh:${source.webSession.id}`, checkedAt: source.webSession.oidcCheckedAt }
      : source.token?.oidcRefreshToken
        ? { sealed: source.token.oidcRefreshToken, context: `oidc-refresh:token:${source.token.id}`, checkedAt: source.token.oidcCheckedAt }
        : null;
    if (!from) return false;
    await this.tokens.oidcChecked(tokenId, this.box.seal(this.box.open(from.sealed, from.context), `oidc-refresh:token:${tokenId}`), from.checkedAt ?? new Date());
    return true;
  }

  /** An API token bound to the provider (bindToken), checked as a console session is. */
  async recheckToken(token: ApiTokenRow, user: UserRow): Promise<UserRow> {
    return this.recheckHolder(
      {
        key: `token:${token.id}`,
        refreshToken: token.oidcRefreshToken,
        checkedAt: token.oidcCheckedAt,
        context: `oidc-refresh:token:${token.id}`,
        ended: 'this API token was revoked',
        again: 'Sign in again (`lemni login --sso`).',
        kept: 'This API token is kept; it cannot be used until the provider answers.',
        end: () => this.tokens.revoke(token.id),
        checked: (sealed) => this.tokens.oidcChecked(token.id, sealed),
        audit: { tokenId: token.id },
      },
      user,
    );
  }

  /**
   * Asks the provider again whether the person of a console session may still sign in, when the last
   * check is older than `recheckSeconds`: the refresh token is used (a person removed at the provider
   * is refused there), the groups mapped again. Ends the session, with the reason, when the answer is
   * no; answers the person as they are now.
   */
  async recheck(session: WebSessionRow, user: UserRow): Promise<UserRow> {
    return this.recheckHolder(
      {
        key: session.id,
        refreshToken: session.oidcRefreshToken,
        checkedAt: session.oidcCheckedAt,
        context: `oidc-refresh:${session.id}`,
        ended: 'your console session was ended',
        again: 'Sign in again.',
        kept: 'Your console session is kept; it cannot be used until the provider answers.',
        end: () => this.webSessions.revoke(session.id),
        checked: (sealed) => this.webSessions.oidcChecked(session.id, sealed),
        audit: {},
      },
      user,
    );
  }

  private async recheckHolder(holder: CheckedHolder, user: UserRow): Promise<UserRow> {
    const c = this.config;
    if (!c || !holder.refreshToken) return user;
    if (holder.checkedAt && Date.now() - holder.checkedAt.getTime() < c.recheckSeconds * 1000) return user;
    let running = this.checking.get(holder.key);
    if (!running) {
      running = this.check(holder, user).finally(() => this.checking.delete(holder.key));
      this.checking.set(holder.key, running);
    }
    return running;
  }

  private async check(holder: CheckedHolder, user: UserRow): Promise<UserRow> {
    const end = async (reason: string, sentence: string, extra: Record<string, unknown> = {}): Promise<never> => {
      await holder.end();
      await this.audit.record({ actor: `user:${user.id}`, kind: 'auth.oidc_session_ended', payload: { reason, ...holder.audit, ...extra } });
      throw new AppError(ErrorCode.Unauthenticated, sentence);
    };
    const provider = await this.provider().catch((e: Error) => {
      throw new AppError(ErrorCode.Unauthenticated, `${e.message} ${holder.kept}`);
    });
    let refreshed: Awaited<ReturnType<typeof client.refreshTokenGrant>>;
    try {
      refreshed = await client.refreshTokenGrant(provider, this.box.open(holder.refreshToken!, holder.context));
    } catch (e) {
      if (e instanceof client.ResponseBodyError) {
        return end('oidc_refresh_refused', `The identity provider no longer accepts your sign-in (${e.error}); ${holder.ended}. ${holder.again}`, { error: e.error });
      }
      throw new AppError(ErrorCode.Unauthenticated, `Your sign-in cannot be checked with the identity provider right now (${describe(e)}); try again shortly.`);
    }
    let claims: Record<string, unknown> | undefined = refreshed.claims();
    if (!claims || claims.sub !== user.oidcSubject) {
      claims = (await client.fetchUserInfo(provider, refreshed.access_token, user.oidcSubject ?? client.skipSubjectCheck).catch(() => undefined)) as Record<string, unknown> | undefined;
    }
    if (!claims) return end('oidc_claims_unavailable', `The identity provider did not say who you are any more; ${holder.ended}. ${holder.again}`);
    const mapped = this.map(claims);
    if (!mapped.role) {
      return end('oidc_no_role', `Your account at the identity provider is no longer in any group this deployment gives a role to; ${holder.ended}.`, { groups: mapped.groups });
    }
    const now = await this.apply(user, mapped, { linked: false, at: 'check' });
    // A provider that rotates refresh tokens sends a new one; one that does not keeps the sealed one valid.
    await holder.checked(refreshed.refresh_token ? this.box.seal(refreshed.refresh_token, holder.context) : holder.refreshToken!);
    return now;
  }

  /** The role and project memberships the groups give; changes are made and audited. */
  private async apply(user: UserRow, mapped: Mapped, how: { linked: boolean; at: 'sign-in' | 'check' }): Promise<UserRow> {
    const c = this.config!;
    let current = user;
    const changes: Record<string, unknown> = {};
    if (mapped.role && mapped.role !== user.role) {
      current = (await this.users.update(user.id, { role: mapped.role })) ?? user;
      changes.role = { before: user.role, after: mapped.role };
    }
    const added: string[] = [];
    const removed: string[] = [];
    const mine = new Set(await this.memberships.projectIdsOf(user.id));
    for (const name of Object.keys(c.projects)) {
      const project = await this.projects.findByName(name);
      if (!project) continue;
      const should = mapped.projects.includes(name);
      if (should && !mine.has(project.id)) {
        await this.memberships.add(user.id, project.id);
        added.push(name);
      } else if (!should && mine.has(project.id)) {
        await this.memberships.remove(user.id, project.id);
        removed.push(name);
      }
    }
    if (added.length) changes.projectsAdded = added;
    if (removed.length) changes.projectsRemoved = removed;
    if (how.linked) changes.linked = true;
    if (Object.keys(changes).length > 0) {
      await this.audit.record({ actor: 'system', kind: 'auth.oidc_mapping', payload: { userId: user.id, at: how.at, groups: mapped.groups, ...changes } });
    }
    return current;
  }

  private map(claims: Record<string, unknown>): Mapped {
    const c = this.config!;
    const raw = claims[c.claims.groups];
    const groups = Array.isArray(raw) ? raw.filter((g): g is string => typeof g === 'string') : typeof raw === 'string' ? [raw] : [];
    const role = ROLE_ORDER.find((r) => c.roles[r].some((g) => groups.includes(g))) ?? null;
    const projects = Object.entries(c.projects)
      .filter(([, gs]) => gs.some((g) => groups.includes(g)))
      .map(([name]) => name);
    return { role, groups, projects };
  }

  private requireConfig(): OidcConfig {
    if (!this.config) throw new AppError(ErrorCode.NotFound, 'Single sign-on is not configured on this gateway.');
    return this.config;
  }

  /** Where the console is: its configured URL, else the redirect URI's origin. */
  consoleOrigin(): string {
    const c = this.requireConfig();
    return (c.consoleUrl ?? new URL(c.redirectUri).origin).replace(/\/+$/, '');
  }
}

function stringClaim(claims: Record<string, unknown>, name: string): string | undefined {
  const v = claims[name];
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

/** Only a path of this site: never another origin (`//evil`, `https://…`, `\\evil`). */
function safeReturn(returnTo: string | undefined): string {
  if (!returnTo || !returnTo.startsWith('/') || returnTo.startsWith('//') || returnTo.includes('\\') || /[\r\n]/.test(returnTo)) return '/';
  return returnTo.slice(0, 500);
}

/** What went wrong, in words; for a claim the ID token got wrong, which claim (never its value). */
function describe(e: unknown): string {
  type Detail = { error?: string; error_description?: string; code?: string; message?: string; cause?: Detail & { claim?: unknown } };
  const err = e as Detail;
  if (err?.error) return `${err.error}${err.error_description ? `: ${err.error_description}` : ''}`;
  // openid-client wraps oauth4webapi's error, whose own cause names the claim it compared.
  const inner = err?.cause?.message ? err.cause : err;
  const claim = [err?.cause?.cause?.claim, err?.cause?.claim].find((c): c is string => typeof c === 'string');
  const why: Record<string, string> = {
    aud: 'the ID token was issued for another client (its "aud" claim)',
    iss: 'the ID token names another issuer (its "iss" claim)',
    nonce: 'the ID token belongs to another sign-in (its "nonce" claim)',
    azp: 'the ID token was issued for another party (its "azp" claim)',
  };
  if (claim && why[claim]) return why[claim]!;
  const message = inner?.message ?? String(e);
  return claim ? `${message} (the "${claim}" claim)` : message;
}
