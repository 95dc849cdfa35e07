// A real OpenID Provider (the oidc-provider package) for the single sign-on tests, run as a process of
// its own: `node test/support/oidc-provider.mjs CONFIG.json`. The configuration names the port, the
// client (id, secret, redirect URIs) and the accounts file; the accounts file is read at every
// sign-in and token refresh, so a test changes a person's groups, or removes the person, by
// rewriting it. Sign-in goes through the provider's development interactions (a login form, then a
// consent form) that the tests fill in over HTTP. It prints `listening <issuer>` once it serves.
//
// `tamperFile`, when it holds a mode, makes the token endpoint answer with an ID token changed the
// way a forger or a misconfigured provider would (re-signed with the provider's own key unless the
// mode is about the signature): `aud`, `iss`, `expired`, `nonce`, `signature`, `alg-none`.
import { existsSync, readFileSync } from 'node:fs';
import { exportJWK, generateKeyPair, SignJWT, decodeJwt, decodeProtectedHeader } from 'jose';
import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;

function accounts() {
  return JSON.parse(readFileSync(config.accountsFile, 'utf8'));
}

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: 'test-key', use: 'sig', alg: 'RS256' };

function tamperMode() {
  return config.tamperFile && existsSync(config.tamperFile) ? readFileSync(config.tamperFile, 'utf8').trim() : '';
}

async function tampered(idToken, mode) {
  const claims = decodeJwt(idToken);
  const header = decodeProtectedHeader(idToken);
  const now = Math.floor(Date.now() / 1000);
  const resign = (c) => new SignJWT(c).setProtectedHeader(header).sign(privateKey);
  switch (mode) {
    case 'aud':
      return resign({ ...claims, aud: 'another-client' });
    case 'iss':
      return resign({ ...claims, iss: 'https://impostor.example' });
    case 'expired':
      return resign({ ...claims, iat: now - 7200, exp: now - 3600 });
    case 'nonce':
      return resign({ ...claims, nonce: 'a-nonce-from-another-sign-in' });
    case 'signature': {
      const [h, p, sig] = idToken.split('.');
      const body = Buffer.from(JSON.stringify({ ...claims, groups: ['lemni-admins'] })).toString('base64url');
      return `${h}.${body}.${sig}`;
    }
    case 'alg-none': {
      const h = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
      const p = Buffer.from(JSON.stringify({ ...claims, groups: ['lemni-admins'] })).toString('base64url');
      return `${h}.${p}.`;
    }
    default:
      return idToken;
  }
}

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: [
    {
      client_id: config.clientId,
      client_secret: config.clientSecret,
      redirect_uris: config.redirectUris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  ttl: { IdToken: config.idTokenSeconds ?? 3600, AccessToken: 600, AuthorizationCode: 60, RefreshToken: 86400, Grant: 86400, Session: 3600, Interaction: 600 },
  issueRefreshToken: async () => true,
  async findAccount(_ctx, id) {
    const account = accounts()[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        const now = accounts()[id];
        if (!now) return { sub: id };
        return { sub: id, email: now.email, email_verified: now.email_verified ?? true, name: now.name, groups: now.groups ?? [] };
      },
    };
  },
  loadExistingGrant: async (ctx) => {
    // Consent is the test's, once per client and account: an existing grant covers every scope asked.
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups offline_access');
    grant.addOIDCClaims(['email', 'email_verified', 'name', 'groups']);
    await grant.save();
    return grant;
  },
});
// A person removed from the accounts file is unknown to findAccount: their refresh tokens are refused
// (invalid_grant), as a real directory's would be.

provider.use(async (ctx, next) => {
  await next();
  const mode = tamperMode();
  if (mode && ctx.path === '/token' && ctx.body && typeof ctx.body === 'object' && ctx.body.id_token) {
    ctx.body = { ...ctx.body, id_token: await tampered(ctx.body.id_token, mode) };
  }
});

const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
