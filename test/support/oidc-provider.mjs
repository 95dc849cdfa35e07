// A real OpenID Provider (the oidc-provider package) for the single sign-on tests, run as a process of
// its own: `node test/support/oidc-provider.mjs CONFIG.json`. The configuration names the port, the
// client (id, secret, redirect URIs) and the accounts file; the accounts file is read at every
// sign-in and token refresh, so a test changes a person's groups, or removes the person, by
// rewriting it. Sign-in goes through the provider's development interactions (a login form, then a
// consent form) that the tests fill in over HTTP. It prints `listening <issuer>` once it serves.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;

function accounts() {
  return JSON.parse(readFileSync(config.accountsFile, 'utf8'));
}

const provider = new Provider(issuer, {
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

const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
