// Single sign-on against a real OpenID Provider (the oidc-provider package, in a process of its own,
// test/support/oidc-provider.mjs): the authorization code flow with PKCE through the provider's own
// sign-in form, groups mapped to roles and project memberships at every sign-in and check, a person
// removed from their groups or from the provider losing the console at the next check, a replayed or
// unknown state, a provider answer from another issuer or for another client, and passwords disabled.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { GatewayRoutes } from '@lemniscate/contracts';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from '../../../../test/support/git-servers';
import { withTestDatabases } from '../support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, auditKinds, bearer, createProject, startGateway, tokenFor, type Gateway } from '../support/harness';

jest.setTimeout(120_000);

const PROVIDER = path.resolve(__dirname, '../../../../test/support/oidc-provider.mjs');
const CLIENT_SECRET = 'a client secret for the tests, long enough';

interface Provider {
  issuer: string;
  /** Makes the token endpoint answer with an ID token changed this way ('' for none). */
  tamper: (mode: '' | 'aud' | 'iss' | 'expired' | 'nonce' | 'signature' | 'alg-none') => void;
  accounts: (a: Record<string, { email: string; name?: string; groups?: string[]; email_verified?: boolean }>) => void;
  stop(): Promise<void>;
}

async function startProvider(dir: string, port: number, redirectUris: string[], name = 'idp'): Promise<Provider> {
  const accountsFile = path.join(dir, `${name}-accounts.json`);
  fs.writeFileSync(accountsFile, '{}');
  const configFile = path.join(dir, `${name}.json`);
  const tamperFile = path.join(dir, `${name}-tamper`);
  fs.writeFileSync(configFile, JSON.stringify({ port, clientId: 'lemniscate', clientSecret: CLIENT_SECRET, redirectUris, accountsFile, tamperFile }));
  const child: ChildProcess = spawn(process.execPath, [PROVIDER, configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  const deadline = Date.now() + 20_000;
  while (!output.includes('listening ')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the OpenID Provider did not start: ${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    issuer: `http://127.0.0.1:${port}`,
    accounts: (a) => fs.writeFileSync(accountsFile, JSON.stringify(a)),
    tamper: (mode) => fs.writeFileSync(tamperFile, mode),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** A browser without a window: follows redirects by hand and keeps each origin's cookies. */
class Browser {
  private readonly jars = new Map<string, Map<string, string>>();
  readonly visited: string[] = [];
  /** Changes each address before it is visited, as a provider that adds parameters of its own would. */
  constructor(private readonly rewrite: (url: string) => string = (url) => url) {}

  cookie(origin: string, name: string): string | undefined {
    return this.jars.get(origin)?.get(name);
  }

  async go(url: string, init: { method?: string; form?: Record<string, string> } = {}, hops = 15): Promise<{ url: string; status: number; text: string; location: string | null }> {
    let current = url;
    let method = init.method ?? 'GET';
    let body: string | undefined = init.form ? new URLSearchParams(init.form).toString() : undefined;
    for (let i = 0; i < hops; i++) {
      this.visited.push(current);
      const origin = new URL(current).origin;
      const jar = this.jars.get(origin) ?? new Map<string, string>();
      this.jars.set(origin, jar);
      const res = await fetch(current, {
        method,
        redirect: 'manual',
        body,
        headers: { ...(jar.size ? { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } : {}), ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      });
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(';');
        const eq = pair!.indexOf('=');
        const value = pair!.slice(eq + 1);
        if (/expires=Thu, 01 Jan 1970/i.test(c) || value === '') jar.delete(pair!.slice(0, eq));
        else jar.set(pair!.slice(0, eq), value);
      }
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        const next = this.rewrite(new URL(location, current).toString());
        // Stop at the console: these tests look at where the gateway sent the browser, not at the page.
        if (next.includes('/sign-in') || (!next.includes('/api/') && !next.includes('/auth') && !next.includes('/interaction') && !next.includes('/session'))) {
          return { url: current, status: res.status, text: await res.text(), location: next };
        }
        current = next;
        method = 'GET';
        body = undefined;
        continue;
      }
      return { url: current, status: res.status, text: await res.text(), location };
    }
    throw new Error(`too many redirects from ${url}`);
  }

  /** One request, no redirect followed: where it points. */
  async step(url: string): Promise<string> {
    const res = await fetch(url, { redirect: 'manual' });
    return new URL(res.headers.get('location') ?? '', url).toString();
  }

  /**
   * Fills the provider's forms (its sign-in as `login`, then its consent) until the browser leaves
   * the provider; answers where the gateway sent it.
   */
  async through(page: { url: string; status: number; text: string; location: string | null }, login: string): Promise<string> {
    for (let i = 0; i < 5 && !page.location; i++) {
      const action = /<form[^>]*action="([^"]+)"/.exec(page.text)?.[1];
      if (!action) throw new Error(`no form at ${page.url}: ${page.status} ${page.text.slice(0, 300)}`);
      const hidden = Object.fromEntries([...page.text.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
      const fields = page.text.includes('name="login"') ? { ...hidden, login, password: 'any' } : hidden;
      page = await this.go(action, { method: 'POST', form: fields });
    }
    if (!page.location) throw new Error(`the sign-in did not come back to the gateway: ${page.url} ${page.status} ${page.text.slice(0, 300)}`);
    return page.location;
  }

  /** Signs in at the gateway through the provider as `login`; answers where the gateway sent the browser. */
  async signIn(gw: Gateway, login: string, returnTo = '/approvals'): Promise<string> {
    return this.through(await this.go(`${gw.baseUrl}/api/v1/auth/oidc/start?returnTo=${encodeURIComponent(returnTo)}`), login);
  }
}

withTestDatabases((db) => {
  let dir: string;
  let idp: Provider;
  let impostor: Provider;
  let gw: Gateway;
  let admin: string;
  let gatewayPort: number;
  let oidcFile: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-oidc-'));
    const idpPort = await freePort();
    gatewayPort = await freePort();
    const secret = path.join(dir, 'client.secret');
    fs.writeFileSync(secret, CLIENT_SECRET);
    oidcFile = path.join(dir, 'oidc.json');
    const callback = `http://127.0.0.1:${gatewayPort}/api/v1/auth/oidc/callback`;
    fs.writeFileSync(
      oidcFile,
      JSON.stringify({
        issuer: `http://127.0.0.1:${idpPort}`,
        clientId: 'lemniscate',
        clientSecretFile: secret,
        redirectUri: callback,
        consoleUrl: 'http://127.0.0.1:5173',
        roles: { admin: ['lemni-admins'], security_officer: ['secops'], developer: ['engineering'] },
        projects: { payments: ['team-payments'] },
        recheckSeconds: 0,
        label: 'Sign in with Corp SSO',
      }),
    );
    idp = await startProvider(dir, idpPort, [callback]);
    impostor = await startProvider(dir, await freePort(), [callback], 'impostor');
    gw = await startGateway(db(), { LEMNISCATE_OIDC_FILE: oidcFile, LEMNISCATE_GATEWAY_PORT: String(gatewayPort) }, undefined, { port: gatewayPort });
    admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    await createProject(gw, admin, 'payments');
    await createProject(gw, admin, 'billing');
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([idp?.stop(), impostor?.stop()]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const me = async (b: Browser) => {
    const cookie = b.cookie(gw.baseUrl, 'lemni_session');
    return gw
      .http()
      .get('/api/v1/auth/me')
      .set('cookie', cookie ? `lemni_session=${cookie}` : '');
  };

  it('offers single sign-on on the sign-in page', async () => {
    const res = await gw.http().get('/api/v1/auth/oidc');
    expect(res.body).toEqual({ enabled: true, label: 'Sign in with Corp SSO', localSignIn: true });
  });

  it('signs a person in with the authorization code and PKCE, maps groups to a role and projects, and audits it', async () => {
    idp.accounts({ alice: { email: 'Alice@Corp.example', name: 'Alice Admin', groups: ['lemni-admins', 'team-payments'] } });
    const authorize = new URL(await new Browser().step(`${gw.baseUrl}/api/v1/auth/oidc/start?returnTo=/approvals`));
    expect(authorize.origin).toBe(idp.issuer);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('state')).toMatch(/.{20,}/);
    expect(authorize.searchParams.get('nonce')).toMatch(/.{20,}/);
    const landed = await new Browser().signIn(gw, 'alice');
    expect(landed).toBe('http://127.0.0.1:5173/approvals');
    const signedIn = new Browser();
    await signedIn.signIn(gw, 'alice');
    const res = await me(signedIn);
    expect(res.status).toBe(200);
    expect(res.body.user).toMatchObject({ email: 'alice@corp.example', displayName: 'Alice Admin', role: 'admin' });
    const projects = (await gw.http().get('/api/v1/projects').set(bearer(admin))).body as Array<{ id: string; name: string }>;
    const payments = projects.find((p) => p.name === 'payments')!.id;
    expect(res.body.user.projectIds).toEqual([payments]);
    const logins = (await auditKinds(gw, ['auth.login'])).filter((e) => (e.payload as { via?: string }).via === 'oidc');
    expect(logins.at(-1)?.payload).toMatchObject({ via: 'oidc', issuer: idp.issuer, subject: 'alice', groups: ['lemni-admins', 'team-payments'], role: 'admin' });
    expect((await auditKinds(gw, ['auth.oidc_mapping'])).at(-1)?.payload).toMatchObject({ groups: ['lemni-admins', 'team-payments'], projectsAdded: ['payments'] });
  });

  it('a group removed at the provider changes the role and the memberships at the next check; no mapped group left ends the session', async () => {
    idp.accounts({ bob: { email: 'bob@corp.example', groups: ['engineering', 'team-payments'] } });
    const b = new Browser();
    await b.signIn(gw, 'bob');
    expect((await me(b)).body.user).toMatchObject({ role: 'developer' });
    expect((await me(b)).body.user.projectIds).toHaveLength(1);
    idp.accounts({ bob: { email: 'bob@corp.example', groups: ['secops'] } });
    const now = await me(b);
    expect(now.body.user).toMatchObject({ role: 'security_officer', projectIds: [] });
    expect((await auditKinds(gw, ['auth.oidc_mapping'])).at(-1)?.payload).toMatchObject({ at: 'check', role: { before: 'developer', after: 'security_officer' }, projectsRemoved: ['payments'] });
    idp.accounts({ bob: { email: 'bob@corp.example', groups: ['marketing'] } });
    const ended = await me(b);
    expect(ended.status).toBe(401);
    expect(ended.body.message).toBe('Your account at the identity provider is no longer in any group this deployment gives a role to; your console session was ended.');
    expect((await me(b)).status).toBe(401);
    expect((await auditKinds(gw, ['auth.oidc_session_ended'])).at(-1)?.payload).toMatchObject({ reason: 'oidc_no_role', groups: ['marketing'] });
    // And signing in again is refused with the groups named.
    const refused = await new Browser().signIn(gw, 'bob');
    expect(decodeURIComponent(refused)).toContain('/sign-in?sso_error=Your account at the identity provider is in no group this deployment gives a role to (your groups: marketing)');
  });

  it('a person removed at the provider loses the console at the next check', async () => {
    idp.accounts({ carol: { email: 'carol@corp.example', groups: ['engineering'] } });
    const b = new Browser();
    await b.signIn(gw, 'carol');
    expect((await me(b)).status).toBe(200);
    idp.accounts({});
    const gone = await me(b);
    expect(gone.status).toBe(401);
    expect(gone.body.message).toMatch(/^The identity provider no longer accepts your sign-in \(invalid_grant\); your console session was ended\. Sign in again\.$/);
  });

  it("a provider's own parameters on its answer (Google's scope, authuser, prompt; session_state) are accepted and not read; an overlong one is refused", async () => {
    idp.accounts({ erin: { email: 'erin@corp.example', groups: ['engineering'] } });
    const withExtras = (extra: string) => (url: string) => (url.includes('/api/v1/auth/oidc/callback?') ? `${url}&${extra}` : url);
    const b = new Browser(withExtras('scope=openid+email+profile&authuser=0&prompt=consent&session_state=abc.def&hd=corp.example'));
    expect(await b.signIn(gw, 'erin')).toBe('http://127.0.0.1:5173/approvals');
    expect((await me(b)).body.user).toMatchObject({ email: 'erin@corp.example', role: 'developer' });
    const long = new Browser(withExtras(`scope=${'x'.repeat(2001)}`));
    // The gateway answers 400 at its callback (no redirect to the console, no session).
    await expect(long.signIn(gw, 'erin')).rejects.toThrow(/no form at http:\/\/127\.0\.0\.1:\d+\/api\/v1\/auth\/oidc\/callback\?.*: 400 .*query\.scope/);
    expect(long.cookie(gw.baseUrl, 'lemni_session')).toBeUndefined();
  });

  it('a replayed callback, an unknown state and a state from elsewhere are refused and audited', async () => {
    idp.accounts({ dave: { email: 'dave@corp.example', groups: ['engineering'] } });
    const b = new Browser();
    await b.signIn(gw, 'dave');
    const callback = b.visited.find((u) => u.includes('/api/v1/auth/oidc/callback'))!;
    const replay = await new Browser().go(callback);
    expect(decodeURIComponent(replay.location ?? '')).toContain('sso_error=This sign-in link was already used (or it expired)');
    const unknown = await new Browser().go(callback.replace(/state=[^&]+/, 'state=made-up-state'));
    expect(decodeURIComponent(unknown.location ?? '')).toContain('sso_error=This sign-in did not start here (its state is unknown)');
    const reasons = (await auditKinds(gw, ['auth.login_failed'])).map((e) => (e.payload as { reason?: string }).reason);
    expect(reasons).toEqual(expect.arrayContaining(['oidc_state_reused', 'oidc_state_unknown']));
  });

  it("an answer from another provider (another issuer and keys) is refused: the code is not this provider's", async () => {
    impostor.accounts({ alice: { email: 'alice@corp.example', groups: ['lemni-admins'] } });
    // Start at the gateway (a real state), but sign in at the impostor, which sends its code back.
    const b = new Browser();
    const real = new URL(await b.step(`${gw.baseUrl}/api/v1/auth/oidc/start`));
    const back = await b.through(await b.go(`${impostor.issuer}/auth${real.search}`), 'alice');
    expect(decodeURIComponent(back)).toMatch(/sso_error=The identity provider's answer was refused: .*Nothing was signed in\./);
    expect((await auditKinds(gw, ['auth.login_failed'])).at(-1)?.payload).toMatchObject({ via: 'oidc', reason: 'oidc_token_rejected' });
  });

  it('an ID token for another client, from another issuer, expired, with another nonce, altered, or unsigned is refused; nobody is signed in', async () => {
    idp.accounts({ frank: { email: 'frank@corp.example', groups: ['engineering'] } });
    const cases = [
      ['aud', /the ID token was issued for another client \(its "aud" claim\)/],
      ['iss', /the ID token names another issuer \(its "iss" claim\)/],
      ['expired', /"exp"|expir/i],
      ['nonce', /the ID token belongs to another sign-in \(its "nonce" claim\)/],
      ['signature', /JWS signature verification failed|signature/i],
      ['alg-none', /unexpected JWT "alg" header parameter|alg/i],
    ] as const;
    try {
      for (const [mode, why] of cases) {
        idp.tamper(mode);
        const b = new Browser();
        const landed = decodeURIComponent(await b.signIn(gw, 'frank'));
        expect([mode, landed]).toEqual([mode, expect.stringMatching(/\/sign-in\?sso_error=The identity provider's answer was refused: /)]);
        expect([mode, landed]).toEqual([mode, expect.stringMatching(why)]);
        expect([mode, b.cookie(gw.baseUrl, 'lemni_session')]).toEqual([mode, undefined]);
        expect((await auditKinds(gw, ['auth.login_failed'])).at(-1)?.payload).toMatchObject({ via: 'oidc', reason: 'oidc_token_rejected' });
      }
    } finally {
      idp.tamper('');
    }
    // The same person, untampered, signs in: the refusals were about the tokens.
    const b = new Browser();
    expect(await b.signIn(gw, 'frank')).toBe('http://127.0.0.1:5173/approvals');
    expect(b.cookie(gw.baseUrl, 'lemni_session')).toBeDefined();
  });

  const CLI = path.join(__dirname, '..', '..', '..', 'cli', 'bin', 'lemni.js');
  const challengeOf = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');
  /** A CLI sign-in started by hand (as `lemni login --sso` does), followed through the provider's forms as `login`: where the gateway sent the browser. */
  const cliSignIn = async (login: string, verifier: string, port = 45678) => {
    const b = new Browser();
    return b.through(await b.go(`${gw.baseUrl}/api/v1/auth/oidc/start?cliPort=${port}&cliChallenge=${challengeOf(verifier)}`), login);
  };
  const redeem = (code: string, codeVerifier: string) => gw.http().post('/api/v1/auth/oidc/cli').send({ code, codeVerifier });

  it('lemni login --sso: the browser signs in at the provider, the answer comes back to the CLI on 127.0.0.1, and the token it stores is checked with the provider at each use', async () => {
    idp.accounts({ frank: { email: 'frank@corp.example', name: 'Frank Dev', groups: ['engineering'] } });
    const home = fs.mkdtempSync(path.join(dir, 'home-'));
    const cli = spawn(process.execPath, [CLI, 'login', '--gateway', gw.baseUrl, '--sso', '--no-browser'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    cli.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    cli.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => cli.on('exit', resolve));
    const deadline = Date.now() + 30_000;
    while (!/http:\/\/\S+\/api\/v1\/auth\/oidc\/start\S+/.test(stderr) && Date.now() < deadline && cli.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    const start = /http:\/\/\S+\/api\/v1\/auth\/oidc\/start\S+/.exec(stderr)?.[0];
    expect(start).toBeDefined();
    const startUrl = new URL(start!);
    expect(startUrl.searchParams.get('cliChallenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const b = new Browser();
    const back = await b.through(await b.go(start!), 'frank');
    expect(back).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${startUrl.searchParams.get('cliPort')}/callback\\?code=[A-Za-z0-9_-]{20,}$`));
    // The browser lands on the CLI's page; the CLI redeems the code and stores its token.
    const landing = await fetch(back);
    expect(landing.status).toBe(200);
    expect(await landing.text()).toContain('Lemniscate received your sign-in. You can close this tab and return to the terminal.');
    expect(await exited).toBe(0);
    expect(stdout).toContain(`Logged in to ${gw.baseUrl} as frank@corp.example (developer)`);
    expect(stderr).toContain('the identity provider is asked again as it is used');
    const token = /token: (\S+)/.exec(fs.readFileSync(path.join(home, '.lemniscate', 'config.yaml'), 'utf8'))?.[1];
    expect(token).toMatch(/^lemni_/);
    expect((await gw.http().get('/api/v1/auth/me').set(bearer(token!))).body.user).toMatchObject({ email: 'frank@corp.example', role: 'developer' });
    const logins = (await auditKinds(gw, ['auth.login'])).filter((e) => (e.payload as { client?: string }).client === 'cli');
    expect(logins.at(-1)?.payload).toMatchObject({ via: 'oidc', client: 'cli', subject: 'frank' });
    // Removed at the provider: the token stops at its next use, and stays revoked.
    idp.accounts({});
    const gone = await gw.http().get('/api/v1/auth/me').set(bearer(token!));
    expect(gone.status).toBe(401);
    expect(gone.body.message).toBe('The identity provider no longer accepts your sign-in (invalid_grant); this API token was revoked. Sign in again (`lemni login --sso`).');
    expect((await gw.http().get('/api/v1/auth/me').set(bearer(token!))).body.message).toBe('This API token has been revoked.');
    expect((await auditKinds(gw, ['auth.oidc_session_ended'])).at(-1)?.payload).toMatchObject({ reason: 'oidc_refresh_refused', tokenId: expect.any(String) });
  }, 60_000);

  it("the CLI's one-time code is redeemed only with the verifier of its start, once; an unknown code is refused; each refusal audited", async () => {
    idp.accounts({ gina: { email: 'gina@corp.example', groups: ['engineering'] } });
    const verifier = randomBytes(32).toString('base64url');
    const code = new URL(await cliSignIn('gina', verifier)).searchParams.get('code')!;
    const wrong = await redeem(code, randomBytes(32).toString('base64url'));
    expect(wrong.status).toBe(401);
    expect(wrong.body.message).toBe(
      'This sign-in code was redeemed with another verifier than the one its sign-in started with: only the CLI that asked for it can use it. Run `lemni login --sso` again.',
    );
    // The wrong attempt used the code up: the right verifier after it is too late.
    expect((await redeem(code, verifier)).body.message).toBe('This sign-in code was already used, or it expired: run `lemni login --sso` again.');
    const verifier2 = randomBytes(32).toString('base64url');
    const code2 = new URL(await cliSignIn('gina', verifier2)).searchParams.get('code')!;
    const ok = await redeem(code2, verifier2);
    expect(ok.status).toBe(200);
    expect(ok.body.user).toMatchObject({ email: 'gina@corp.example', role: 'developer' });
    expect(GatewayRoutes.oidcCli.response.safeParse(ok.body).error?.issues).toBeUndefined();
    expect(ok.headers['set-cookie']?.[0]).toMatch(/^lemni_session=/);
    expect((await redeem(code2, verifier2)).status).toBe(401);
    const unknown = await redeem(randomBytes(32).toString('base64url'), verifier2);
    expect(unknown.body.message).toBe('This sign-in code was not given by this gateway: run `lemni login --sso` again.');
    const reasons = (await auditKinds(gw, ['auth.login_failed'])).filter((e) => (e.payload as { client?: string }).client === 'cli').map((e) => (e.payload as { reason: string }).reason);
    expect(reasons).toEqual(expect.arrayContaining(['oidc_cli_verifier_mismatch', 'oidc_cli_code_reused', 'oidc_cli_code_unknown']));
  });

  it("a CLI sign-in the provider's groups refuse is told to the CLI, on its loopback address", async () => {
    idp.accounts({ hank: { email: 'hank@corp.example', groups: ['marketing'] } });
    const back = new URL(await cliSignIn('hank', randomBytes(32).toString('base64url'), 45999));
    expect(back.origin).toBe('http://127.0.0.1:45999');
    expect(back.searchParams.get('code')).toBeNull();
    expect(back.searchParams.get('error')).toBe('Your account at the identity provider is in no group this deployment gives a role to (your groups: marketing); ask an administrator.');
  });

  it('a start for the CLI names a port above 1023 and a well-formed challenge, both or neither', async () => {
    const good = challengeOf('x'.repeat(43));
    for (const query of [
      `cliPort=80&cliChallenge=${good}`,
      `cliPort=70000&cliChallenge=${good}`,
      'cliPort=4000',
      `cliChallenge=${good}`,
      'cliPort=4000&cliChallenge=short',
      `cliPort=4000&cliChallenge=${good}&cliHost=evil.example`,
    ]) {
      const res = await gw.http().get(`/api/v1/auth/oidc/start?${query}`);
      expect({ query, status: res.status }).toEqual({ query, status: 400 });
    }
  });

  it('an API token made in a console session opened through the provider is checked with the provider too', async () => {
    idp.accounts({ ivy: { email: 'ivy@corp.example', groups: ['engineering'] } });
    const b = new Browser();
    await b.signIn(gw, 'ivy');
    const cookie = `lemni_session=${b.cookie(gw.baseUrl, 'lemni_session')}`;
    const csrf = (await gw.http().get('/api/v1/auth/me').set('cookie', cookie)).body.csrfToken as string;
    const made = await gw.http().post('/api/v1/auth/tokens').set('cookie', cookie).set('x-csrf-token', csrf).send({ name: 'laptop', expiresInDays: 30 });
    expect(made.status).toBe(201);
    expect((await gw.http().get('/api/v1/auth/me').set(bearer(made.body.token))).status).toBe(200);
    expect((await auditKinds(gw, ['auth.token_created'])).at(-1)?.payload).toMatchObject({ name: 'laptop', checkedWithProvider: true });
    idp.accounts({ ivy: { email: 'ivy@corp.example', groups: ['marketing'] } });
    const refused = await gw.http().get('/api/v1/auth/me').set(bearer(made.body.token));
    expect(refused.status).toBe(401);
    expect(refused.body.message).toBe('Your account at the identity provider is no longer in any group this deployment gives a role to; this API token was revoked.');
    // The administrator's own token (a password sign-in) is not tied to the provider.
    expect((await gw.http().get('/api/v1/auth/me').set(bearer(admin))).status).toBe(200);
  });

  it('returnTo never leaves the console', async () => {
    idp.accounts({ erin: { email: 'erin@corp.example', groups: ['engineering'] } });
    for (const target of ['//evil.example/x', 'https://evil.example/', '/\\evil.example', 'javascript:alert(1)']) {
      expect(await new Browser().signIn(gw, 'erin', target)).toBe('http://127.0.0.1:5173/');
    }
  });
});

withTestDatabases(
  (db) => {
    it('with passwords disabled, a password sign-in is refused with where to sign in instead; API tokens still work', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lemni-oidc-local-'));
      try {
        const secret = path.join(dir, 'client.secret');
        fs.writeFileSync(secret, CLIENT_SECRET);
        const file = path.join(dir, 'oidc.json');
        const base = { issuer: 'http://127.0.0.1:9', clientId: 'x', clientSecretFile: secret, redirectUri: 'http://127.0.0.1:9/api/v1/auth/oidc/callback', roles: { admin: ['a'] } };
        // First an administrator with a token, then the same database with passwords off.
        const open = await startGateway(db());
        const token = (await tokenFor(open, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
        await open.close();
        fs.writeFileSync(file, JSON.stringify({ ...base, localSignIn: false }));
        const gw = await startGateway(db(), { LEMNISCATE_OIDC_FILE: file });
        try {
          const res = await gw.http().post('/api/v1/auth/login').send({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
          expect(res.status).toBe(403);
          expect(res.body.message).toBe('This deployment signs people in through 127.0.0.1:9 only: use "Sign in with single sign-on" on the console.');
          expect((await gw.http().get('/api/v1/auth/oidc')).body).toEqual({ enabled: true, label: 'Sign in with single sign-on', localSignIn: false });
          expect((await gw.http().get('/api/v1/auth/me').set(bearer(token))).status).toBe(200);
          // A provider that cannot be reached: the start says so, on the sign-in page.
          const start = await fetch(`${gw.baseUrl}/api/v1/auth/oidc/start`, { redirect: 'manual' });
          expect(decodeURIComponent(start.headers.get('location') ?? '')).toMatch(/\/sign-in\?sso_error=The identity provider http:\/\/127\.0\.0\.1:9 cannot be reached/);
        } finally {
          await gw.close();
        }
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  },
  ['pglite'],
);
