import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { z } from 'zod';
import { AuditSinksConfigError, loadAuditSinks, type AuditSinksConfig } from '../audit-sinks/sink-config';
import { loadOidcConfig, OidcConfigError, type OidcConfig } from '../auth/oidc/oidc-config';
import { parseSecretKey, type SecretKeySource } from '../secrets/secret-box';

const Port = z.coerce.number({ error: 'must be a port number (0–65535)' }).int('must be a whole port number').min(0, 'must be a port number (0–65535)').max(65535, 'must be a port number (0–65535)');

const EnvSchema = z.object({
  LEMNISCATE_GATEWAY_PORT: Port.default(7070),
  LEMNISCATE_GATEWAY_HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  LEMNISCATE_DATA_DIR: z.string().min(1).optional(),
  LEMNISCATE_ADMIN_EMAIL: z.email().optional(),
  LEMNISCATE_ADMIN_PASSWORD: z.string().min(12, 'must be at least 12 characters').optional(),
  /** `http://127.0.0.1:PORT`, `https://host:PORT` (mutual TLS) or `unix:/absolute/path.sock`. */
  LEMNISCATE_EXEC_HOST_URL: z
    .string()
    .refine((s) => /^unix:\/[^\0]*$/.test(s) || (/^https?:\/\//.test(s) && URL.canParse(s)), 'must be an http:// or https:// URL or unix:/absolute/path.sock')
    .default('http://127.0.0.1:7071'),
  LEMNISCATE_EXEC_HOST_TOKEN: z.string().min(1).optional(),
  /** "true": exec-hosts register themselves and sessions are placed on them (docs/decisions/0010-exec-host-pool.md). */
  LEMNISCATE_EXEC_HOST_POOL: z.enum(['true', 'false']).default('false'),
  /** Seconds without a heartbeat after which a pool member is lost and its live sessions end as sandbox_lost. */
  LEMNISCATE_EXEC_HOST_LOST_SECONDS: z.coerce.number({ error: 'must be a number of seconds' }).int().min(3).max(3600).default(20),
  /** Set to "true" when the gateway is served over HTTPS (a reverse proxy), so cookies are Secure. */
  LEMNISCATE_COOKIE_SECURE: z.enum(['true', 'false']).default('false'),
  LEMNISCATE_WEB_SESSION_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 30)
    .default(12),
  LEMNISCATE_LOGIN_MAX_FAILURES: z.coerce.number().int().min(1).max(1000).default(5),
  LEMNISCATE_LOGIN_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86_400).default(900),
  /** Reverse proxies in front of the gateway (0: none), so sign-in pacing sees the real client address. */
  LEMNISCATE_TRUST_PROXY_HOPS: z.coerce.number({ error: 'must be a number of proxy hops' }).int().min(0).max(10).default(0),
  LEMNISCATE_LOOP_LEASE_SECONDS: z.coerce.number({ error: 'must be a number of seconds' }).int().min(2).max(3600).default(30),
  LEMNISCATE_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** The key that seals secrets at rest (repository credentials): 32 bytes as base64 or hex. Every gateway of one database needs the same. */
  LEMNISCATE_SECRET_KEY: z.string().min(1).optional(),
  /** A file holding that key; created on first start when neither is set (`<data dir>/secret.key`). */
  LEMNISCATE_SECRET_KEY_FILE: z.string().min(1).optional(),
  /** The model a session runs with when its request names none. */
  LEMNISCATE_DEFAULT_MODEL: z.string().optional(),
  /** A YAML file of model services (keys, endpoints, the scripted model for demos and tests). */
  LEMNISCATE_MODELS_CONFIG: z.string().optional(),
  /** A JSON file of the credentials remote MCP servers are reached with, by name (AG7; see the operator guide). */
  LEMNISCATE_MCP_CREDENTIALS_FILE: z.string().min(1).optional(),
  /** A JSON file naming where the audit log is streamed as it is written (T2; see the operator guide). */
  LEMNISCATE_AUDIT_SINKS_FILE: z.string().min(1).optional(),
  /** Retention (T2): archive and remove audit entries older than this many days... */
  LEMNISCATE_AUDIT_RETENTION_DAYS: z.coerce.number({ error: 'must be a whole number of days' }).int('must be a whole number of days').min(1, 'must be at least 1 day').optional(),
  /** ...or beyond the newest this many. */
  LEMNISCATE_AUDIT_RETENTION_ENTRIES: z.coerce.number({ error: 'must be a whole number of entries' }).int('must be a whole number of entries').min(1, 'must be at least 1').optional(),
  /** A JSON file configuring single sign-on with an OpenID Provider (see the operator guide). */
  LEMNISCATE_OIDC_FILE: z.string().min(1).optional(),
  /** Where the signed archives are written (required with a retention). */
  LEMNISCATE_AUDIT_ARCHIVE_DIR: z.string().min(1).optional(),
  /** An archive is made once at least this many entries are past the retention (fewer, larger files). */
  LEMNISCATE_AUDIT_ARCHIVE_MIN_ENTRIES: z.coerce.number({ error: 'must be a whole number of entries' }).int('must be a whole number of entries').min(1, 'must be at least 1').default(1000),
  /** The Ed25519 private key (PEM) archives are signed with; created beside the archives when absent. */
  LEMNISCATE_AUDIT_ARCHIVE_KEY_FILE: z.string().min(1).optional(),
});

export interface GatewayConfig {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  dataDir: string;
  admin: { email: string | undefined; password: string | undefined };
  execHost: {
    url: string;
    token: string | undefined;
    /** The gateway's client certificate and key and the exec-hosts' CA (PEM), null without them. */
    tls: ExecHostClientTls | null;
    /** Pool mode: exec-hosts register themselves; null when the gateway has the one exec-host `url` names. */
    pool: { lostSeconds: number } | null;
  };
  cookieSecure: boolean;
  webSessionHours: number;
  login: { maxFailures: number; windowSeconds: number };
  logLevel: z.infer<typeof EnvSchema>['LEMNISCATE_LOG_LEVEL'];
  trustProxyHops: number;
  /** How long a session's loop may go without its gateway saying it still runs it (orphans, ADR 0009). */
  loopLeaseSeconds: number;
  /** Where the key that seals secrets at rest comes from (secrets/secret-box.ts). */
  secretKey: SecretKeySource;
  /** Models: the default for a session that names none, and the file that configures the services. */
  models: { default: string | undefined; configFile: string | undefined };
  /**
   * The gateway's own `LEMNISCATE_SESSION_*` variables (L5), read as a session's environment layer
   * when its request brings none (a CLI sends the developer's).
   */
  sessionEnvironment: Record<string, string>;
  /** Where the credentials of remote MCP servers are held (read when a session needs one; never shown). */
  mcpCredentialsFile: string | undefined;
  /** The audit sinks (audit-sinks/sink-config.ts), read at start; null or absent without any. */
  auditSinks?: AuditSinksConfig | null;
  /** Single sign-on (auth/oidc/): null or absent without it. */
  oidc?: OidcConfig | null;
  /** Audit retention (audit-retention/): null or absent keeps every entry in the database. */
  auditRetention?: AuditRetentionConfig | null;
}

export interface AuditRetentionConfig {
  days: number | undefined;
  entries: number | undefined;
  archiveDir: string;
  keyFile: string;
  /** Entries past the retention that make an archive worth writing. */
  minEntries: number;
}

export class ConfigError extends Error {}

export interface ExecHostClientTls {
  cert: string;
  key: string;
  ca: string;
}

const CLIENT_TLS_FILES = [
  ['LEMNISCATE_EXEC_HOST_CLIENT_CERT', "the gateway's client certificate"],
  ['LEMNISCATE_EXEC_HOST_CLIENT_KEY', 'its private key'],
  ['LEMNISCATE_EXEC_HOST_CA', "the CA of the exec-hosts' certificates"],
] as const;

function readPem(variable: string, file: string): string {
  if (!isAbsolute(file)) throw new ConfigError(`The gateway cannot start: ${variable} must be an absolute path to a PEM file, not "${file}".`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`The gateway cannot start: ${variable} names ${file}, which cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}).`);
  }
  if (!text.includes('-----BEGIN ')) throw new ConfigError(`The gateway cannot start: ${variable} names ${file}, which is not a PEM file.`);
  return text;
}

/** The client side of mutual TLS with exec-hosts: all three files or none, read now. */
function loadExecHostTls(env: NodeJS.ProcessEnv, url: string, urlGiven: boolean): ExecHostClientTls | null {
  const given = CLIENT_TLS_FILES.filter(([v]) => (env[v] ?? '').trim() !== '');
  if (given.length === 0) {
    if (url.startsWith('https:')) {
      throw new ConfigError(
        `The gateway cannot start: LEMNISCATE_EXEC_HOST_URL (${url}) is https://, and an exec-host over TLS requires the gateway's client certificate: set LEMNISCATE_EXEC_HOST_CLIENT_CERT, LEMNISCATE_EXEC_HOST_CLIENT_KEY and LEMNISCATE_EXEC_HOST_CA.`,
      );
    }
    return null;
  }
  if (given.length < CLIENT_TLS_FILES.length) {
    const missing = CLIENT_TLS_FILES.filter(([v]) => !given.some(([g]) => g === v)).map(([v, what]) => `${v} (${what})`);
    throw new ConfigError(
      `The gateway cannot start: mutual TLS with exec-hosts needs all three of LEMNISCATE_EXEC_HOST_CLIENT_CERT, LEMNISCATE_EXEC_HOST_CLIENT_KEY and LEMNISCATE_EXEC_HOST_CA; missing: ${missing.join(', ')}.`,
    );
  }
  if (urlGiven && !url.startsWith('https:')) {
    throw new ConfigError(
      `The gateway cannot start: LEMNISCATE_EXEC_HOST_CLIENT_CERT, _CLIENT_KEY and LEMNISCATE_EXEC_HOST_CA are set but LEMNISCATE_EXEC_HOST_URL (${url}) is not https://: they apply to an exec-host over mutual TLS.`,
    );
  }
  const [cert, key, ca] = CLIENT_TLS_FILES.map(([v]) => readPem(v, env[v]!.trim())) as [string, string, string];
  for (const [variable, pem] of [
    ['LEMNISCATE_EXEC_HOST_CLIENT_CERT', cert],
    ['LEMNISCATE_EXEC_HOST_CA', ca],
  ] as const) {
    try {
      new X509Certificate(pem);
    } catch (e) {
      throw new ConfigError(`The gateway cannot start: ${variable} names ${env[variable]}, which holds no readable certificate (${(e as Error).message}).`);
    }
  }
  try {
    createSecureContext({ cert, key, ca });
  } catch (e) {
    throw new ConfigError(
      `The gateway cannot start: LEMNISCATE_EXEC_HOST_CLIENT_KEY (${env.LEMNISCATE_EXEC_HOST_CLIENT_KEY}) is not the private key of LEMNISCATE_EXEC_HOST_CLIENT_CERT (${env.LEMNISCATE_EXEC_HOST_CLIENT_CERT}): ${(e as Error).message}.`,
    );
  }
  return { cert, key, ca };
}

/** Reads the environment once; a value that cannot be read stops the start with its name, never a silent default. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`The gateway cannot start because of its environment: ${lines.join('; ')}.`);
  }
  const e = parsed.data;
  if (e.LEMNISCATE_EXEC_HOST_POOL === 'true' && present.LEMNISCATE_EXEC_HOST_URL !== undefined) {
    throw new ConfigError(
      'The gateway cannot start because of its environment: LEMNISCATE_EXEC_HOST_POOL=true places sessions on the exec-hosts that register, so LEMNISCATE_EXEC_HOST_URL (one fixed exec-host) must not be set as well.',
    );
  }
  if (e.LEMNISCATE_EXEC_HOST_POOL === 'true' && (e.LEMNISCATE_EXEC_HOST_TOKEN ?? '').length < 16) {
    throw new ConfigError(
      'The gateway cannot start because of its environment: a pool (LEMNISCATE_EXEC_HOST_POOL=true) needs LEMNISCATE_EXEC_HOST_TOKEN, at least 16 characters, which exec-hosts present to register.',
    );
  }
  if (e.LEMNISCATE_SECRET_KEY !== undefined && e.LEMNISCATE_SECRET_KEY_FILE !== undefined) {
    throw new ConfigError('The gateway cannot start because of its environment: set LEMNISCATE_SECRET_KEY or LEMNISCATE_SECRET_KEY_FILE, not both.');
  }
  let secretKey: SecretKeySource;
  try {
    secretKey =
      e.LEMNISCATE_SECRET_KEY !== undefined
        ? { kind: 'value', key: parseSecretKey(e.LEMNISCATE_SECRET_KEY, 'LEMNISCATE_SECRET_KEY') }
        : e.LEMNISCATE_SECRET_KEY_FILE !== undefined
          ? { kind: 'file', path: e.LEMNISCATE_SECRET_KEY_FILE, createIfMissing: false }
          : { kind: 'file', path: join(e.LEMNISCATE_DATA_DIR ?? join(homedir(), '.lemniscate', 'data'), 'secret.key'), createIfMissing: true };
  } catch (err) {
    throw new ConfigError(`The gateway cannot start because of its environment: ${(err as Error).message}`);
  }
  const execHostUrl = e.LEMNISCATE_EXEC_HOST_URL.replace(/\/+$/, '');
  const execHostTls = loadExecHostTls(env, execHostUrl, present.LEMNISCATE_EXEC_HOST_URL !== undefined);
  return {
    port: e.LEMNISCATE_GATEWAY_PORT,
    host: e.LEMNISCATE_GATEWAY_HOST,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.LEMNISCATE_DATA_DIR ?? join(homedir(), '.lemniscate', 'data'),
    admin: { email: e.LEMNISCATE_ADMIN_EMAIL, password: e.LEMNISCATE_ADMIN_PASSWORD },
    execHost: {
      url: execHostUrl,
      token: e.LEMNISCATE_EXEC_HOST_TOKEN,
      tls: execHostTls,
      pool: e.LEMNISCATE_EXEC_HOST_POOL === 'true' ? { lostSeconds: e.LEMNISCATE_EXEC_HOST_LOST_SECONDS } : null,
    },
    cookieSecure: e.LEMNISCATE_COOKIE_SECURE === 'true',
    webSessionHours: e.LEMNISCATE_WEB_SESSION_HOURS,
    login: { maxFailures: e.LEMNISCATE_LOGIN_MAX_FAILURES, windowSeconds: e.LEMNISCATE_LOGIN_WINDOW_SECONDS },
    logLevel: e.LEMNISCATE_LOG_LEVEL,
    trustProxyHops: e.LEMNISCATE_TRUST_PROXY_HOPS,
    loopLeaseSeconds: e.LEMNISCATE_LOOP_LEASE_SECONDS,
    secretKey,
    models: { default: e.LEMNISCATE_DEFAULT_MODEL, configFile: e.LEMNISCATE_MODELS_CONFIG },
    mcpCredentialsFile: e.LEMNISCATE_MCP_CREDENTIALS_FILE,
    auditSinks: e.LEMNISCATE_AUDIT_SINKS_FILE === undefined ? null : fileOrStop(loadAuditSinks, AuditSinksConfigError, e.LEMNISCATE_AUDIT_SINKS_FILE),
    auditRetention: auditRetention(e),
    oidc: e.LEMNISCATE_OIDC_FILE === undefined ? null : fileOrStop(loadOidcConfig, OidcConfigError, e.LEMNISCATE_OIDC_FILE),
    // Taken as they are, empty values included: the execution settings say which value they refuse.
    sessionEnvironment: Object.fromEntries(Object.entries(env).filter((v): v is [string, string] => v[0].startsWith('LEMNISCATE_SESSION_') && typeof v[1] === 'string')),
  };
}

function auditRetention(e: z.infer<typeof EnvSchema>): AuditRetentionConfig | null {
  const stop = (why: string) => new ConfigError(`The gateway cannot start because of its environment: ${why}.`);
  const { LEMNISCATE_AUDIT_RETENTION_DAYS: days, LEMNISCATE_AUDIT_RETENTION_ENTRIES: entries, LEMNISCATE_AUDIT_ARCHIVE_DIR: dir, LEMNISCATE_AUDIT_ARCHIVE_KEY_FILE: key } = e;
  if (days === undefined && entries === undefined) {
    if (dir !== undefined || key !== undefined)
      throw stop('LEMNISCATE_AUDIT_ARCHIVE_DIR and _KEY_FILE apply to a retention: set LEMNISCATE_AUDIT_RETENTION_DAYS or LEMNISCATE_AUDIT_RETENTION_ENTRIES as well');
    return null;
  }
  if (dir === undefined) throw stop('a retention (LEMNISCATE_AUDIT_RETENTION_DAYS or _ENTRIES) archives what it removes: set LEMNISCATE_AUDIT_ARCHIVE_DIR to the directory that keeps the archives');
  if (!isAbsolute(dir)) throw stop(`LEMNISCATE_AUDIT_ARCHIVE_DIR must be an absolute path, not "${dir}"`);
  if (key !== undefined && !isAbsolute(key)) throw stop(`LEMNISCATE_AUDIT_ARCHIVE_KEY_FILE must be an absolute path, not "${key}"`);
  return { days, entries, archiveDir: dir, keyFile: key ?? join(dir, 'archive-signing-key.pem'), minEntries: e.LEMNISCATE_AUDIT_ARCHIVE_MIN_ENTRIES };
}

/** A configuration file's loader whose refusal (of the kind `refusal`) stops the start like the environment's own. */
function fileOrStop<T>(load: (file: string) => T, refusal: new (message: string) => Error, file: string): T {
  try {
    return load(file);
  } catch (e) {
    if (e instanceof refusal) throw new ConfigError(e.message);
    throw e;
  }
}

export const GATEWAY_CONFIG = Symbol('GATEWAY_CONFIG');
