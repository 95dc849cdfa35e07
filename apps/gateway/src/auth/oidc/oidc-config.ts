// Single sign-on with an OpenID Provider: the JSON file LEMNISCATE_OIDC_FILE names, read once at
// start. A file that cannot be used stops the start with a sentence naming the file and the field.
import { readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { z } from 'zod';

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;
const Url = z.string().refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an https:// URL');
const Groups = z.array(z.string().min(1)).max(100);

const OidcFile = z.strictObject({
  /** The provider's issuer identifier; its discovery document is read from `<issuer>/.well-known/openid-configuration`. */
  issuer: Url,
  clientId: z.string().min(1),
  /** A file holding the client secret (the file, not the secret, is in this document). */
  clientSecretFile: z.string().refine((p) => isAbsolute(p), 'must be an absolute path'),
  /** This gateway's callback as the provider has it registered: `https://GATEWAY/api/v1/auth/oidc/callback`. */
  redirectUri: Url.refine((u) => new URL(u).pathname.endsWith('/api/v1/auth/oidc/callback'), 'must end with /api/v1/auth/oidc/callback'),
  /** Where the browser goes after signing in (the console); default: the redirect URI's origin. */
  consoleUrl: Url.optional(),
  scopes: z.array(z.string().regex(/^[!#-[\]-~]+$/, 'must be a scope name')).default(['openid', 'email', 'profile', 'groups', 'offline_access']),
  /** The claims read from the ID token (or the user info endpoint). */
  claims: z
    .strictObject({ email: z.string().min(1).default('email'), name: z.string().min(1).default('name'), groups: z.string().min(1).default('groups') })
    .default({ email: 'email', name: 'name', groups: 'groups' }),
  /** Groups that give each role; a person in several gets the highest (administrator, then security officer, then developer). */
  roles: z.strictObject({ admin: Groups.default([]), security_officer: Groups.default([]), developer: Groups.default([]) }),
  /** Project memberships by project name: the groups whose members are members. Projects not named here are left as administrators set them. */
  projects: z.record(z.string().min(1), Groups).default({}),
  /** false: the password sign-in is refused for everyone (API tokens still work). */
  localSignIn: z.boolean().default(true),
  /** How often, at most, a console session asks the provider again whether its person may still sign in (0: at every request). */
  recheckSeconds: z.number().int().min(0).max(86_400).default(300),
  /** The words of the console's sign-in button. */
  label: z.string().min(1).max(60).default('Sign in with single sign-on'),
});

export interface OidcConfig extends Omit<z.infer<typeof OidcFile>, 'clientSecretFile'> {
  clientSecret: string;
}

export class OidcConfigError extends Error {}

export function loadOidcConfig(file: string): OidcConfig {
  const fail = (what: string) => new OidcConfigError(`The gateway cannot start: the single sign-on file ${file} ${what}.`);
  if (!isAbsolute(file)) throw new OidcConfigError(`The gateway cannot start: LEMNISCATE_OIDC_FILE must be an absolute path, not "${file}".`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw fail(code ? `cannot be read (${code})` : `is not JSON (${(e as Error).message})`);
  }
  const parsed = OidcFile.safeParse(json);
  if (!parsed.success) throw fail(`is not usable: ${parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'the document'}: ${i.message}`).join('; ')}`);
  const { clientSecretFile, ...rest } = parsed.data;
  for (const [field, value] of [
    ['issuer', rest.issuer],
    ['redirectUri', rest.redirectUri],
  ] as const) {
    const url = new URL(value);
    if (url.protocol === 'http:' && !LOOPBACK.test(url.hostname)) throw fail(`is not usable: ${field}: plain http:// is accepted on this machine only (localhost); use https://`);
  }
  if (!rest.scopes.includes('openid')) throw fail('is not usable: scopes: must include "openid"');
  if (Object.values(rest.roles).every((g) => g.length === 0)) throw fail('is not usable: roles: no group gives any role, so nobody could sign in');
  let clientSecret: string;
  try {
    clientSecret = readFileSync(clientSecretFile, 'utf8').trim();
  } catch (e) {
    throw fail(`is not usable: clientSecretFile (${clientSecretFile}) cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  if (clientSecret === '') throw fail(`is not usable: clientSecretFile (${clientSecretFile}) is empty`);
  return { ...rest, clientSecret };
}
