import { z } from 'zod';
import { Id, UserRole, IsoTimestamp } from './common';

export const LoginRequest = z
  .object({
    email: z.email().max(254),
    password: z.string().min(1, 'must not be empty').max(1024),
  })
  .strict();
export type LoginRequest = z.infer<typeof LoginRequest>;

export const UserView = z.object({
  id: Id,
  email: z.string(),
  displayName: z.string(),
  role: UserRole,
  projectIds: z.array(Id),
  disabledAt: IsoTimestamp.nullable(),
  revokedAt: IsoTimestamp.nullable(),
  createdAt: IsoTimestamp,
});
export type UserView = z.infer<typeof UserView>;

/** The CSRF token must be echoed in the `x-csrf-token` header on every cookie-authenticated write. */
export const LoginResponse = z.object({ user: UserView, csrfToken: z.string() });
export type LoginResponse = z.infer<typeof LoginResponse>;

/** Whether the gateway offers single sign-on, what its button says, and whether passwords are still accepted. */
export const OidcInfo = z.object({ enabled: z.boolean(), label: z.string().nullable(), localSignIn: z.boolean() });
export type OidcInfo = z.infer<typeof OidcInfo>;

export const OidcStartQuery = z
  .object({
    /** Where the console goes back to after signing in: a path of this site (anything else means "/"). */
    returnTo: z.string().max(500).optional(),
    /** `lemni login --sso`: the port of the CLI's loopback address (127.0.0.1), where the sign-in's one-time code goes. */
    cliPort: z
      .string()
      .regex(/^\d{4,5}$/, 'must be a port number from 1024 to 65535')
      .refine((p) => Number(p) >= 1024 && Number(p) <= 65535, 'must be a port number from 1024 to 65535')
      .optional(),
    /** With cliPort: the base64url SHA-256 of the verifier the CLI will redeem the code with (PKCE's S256). */
    cliChallenge: z
      .string()
      .regex(/^[A-Za-z0-9_-]{43}$/, 'must be the base64url SHA-256 of the verifier (43 characters)')
      .optional(),
  })
  .strict()
  .refine((q) => (q.cliPort === undefined) === (q.cliChallenge === undefined), { message: 'cliPort and cliChallenge go together', path: ['cliChallenge'] });
export type OidcStartQuery = z.infer<typeof OidcStartQuery>;

/** `lemni login --sso`: the one-time code the CLI received on its loopback address, and its verifier. */
export const OidcCliRequest = z
  .object({
    code: z.string().min(20).max(200),
    codeVerifier: z.string().regex(/^[A-Za-z0-9._~-]{43,128}$/, 'must be 43 to 128 characters of A-Z, a-z, 0-9, ".", "_", "~", "-" (RFC 7636)'),
  })
  .strict();
export type OidcCliRequest = z.infer<typeof OidcCliRequest>;

/** The names of the provider's answer the gateway reads. */
export const OIDC_CALLBACK_FIELDS = ['state', 'code', 'iss', 'error', 'error_description'] as const;

/**
 * The provider's answer, as it sends it: state and code, or an error. Providers add parameters of their
 * own (Google: scope, authuser, hd, prompt; Keycloak and Entra: session_state), so other names are
 * accepted, bounded, and never read: only OIDC_CALLBACK_FIELDS go on to the code exchange.
 */
export const OidcCallbackQuery = z
  .object({
    state: z.string().max(512).optional(),
    code: z.string().max(4096).optional(),
    iss: z.string().max(2048).optional(),
    error: z.string().max(200).optional(),
    error_description: z.string().max(1000).optional(),
  })
  .catchall(z.string().max(2000));
export type OidcCallbackQuery = z.infer<typeof OidcCallbackQuery>;

export const MeResponse = z.object({ user: UserView, csrfToken: z.string().nullable(), via: z.enum(['cookie', 'token']) });
export type MeResponse = z.infer<typeof MeResponse>;

export const CreateTokenRequest = z
  .object({
    name: z.string().trim().min(1, 'must not be empty').max(100),
    expiresInDays: z.number().int().min(1).max(366).default(90),
  })
  .strict();
export type CreateTokenRequest = z.infer<typeof CreateTokenRequest>;

export const TokenView = z.object({
  id: Id,
  name: z.string(),
  prefix: z.string(),
  expiresAt: IsoTimestamp,
  revokedAt: IsoTimestamp.nullable(),
  /** When the token was last used, to the minute (written at most once a minute); null if never. */
  lastUsedAt: IsoTimestamp.nullable(),
  createdAt: IsoTimestamp,
});
export type TokenView = z.infer<typeof TokenView>;

/** The secret appears in this response only; the gateway keeps a hash. */
export const CreatedToken = TokenView.extend({ token: z.string() });
export type CreatedToken = z.infer<typeof CreatedToken>;

export const ChangePasswordRequest = z
  .object({
    currentPassword: z.string().min(1, 'must not be empty').max(1024),
    newPassword: z.string().min(12, 'must be at least 12 characters').max(1024),
  })
  .strict()
  .refine((b) => b.currentPassword !== b.newPassword, { message: 'must differ from the current password', path: ['newPassword'] });
export type ChangePasswordRequest = z.infer<typeof ChangePasswordRequest>;
