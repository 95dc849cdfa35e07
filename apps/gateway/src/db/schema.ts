// The gateway's tables, typed for Drizzle. The SQL that creates them lives in
// apps/gateway/migrations/*.sql (applied by migrate.ts); schema.medium.ts fails when the two drift.
//
// Identifiers are text (a random UUID by default) rather than the uuid type: ids arrive from URLs,
// and a malformed one must read as "not found", never as a database type error.
import { sql } from 'drizzle-orm';
import { type AnyPgColumn, bigint, bigserial, boolean, index, integer, jsonb, pgTable, primaryKey, text, timestamp, unique, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { ExecHostState, SandboxRuntime, SessionMode } from '@lemniscate/contracts';
import { storableJsonb } from './json-column';

const id = () =>
  text('id')
    .primaryKey()
    .default(sql`gen_random_uuid()::text`);
const at = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
const createdAt = () => at('created_at').notNull().defaultNow();

const USER_ROLES = ['admin', 'developer', 'security_officer'] as const;
export type UserRole = (typeof USER_ROLES)[number];

export const users = pgTable(
  'users',
  {
    id: id(),
    email: text('email').notNull(),
    displayName: text('display_name').notNull(),
    role: text('role', { enum: USER_ROLES }).notNull(),
    passwordHash: text('password_hash'),
    disabledAt: at('disabled_at'),
    revokedAt: at('revoked_at'),
    /** Set for a person who signs in through the OpenID Provider: (issuer, subject) names them. */
    oidcIssuer: text('oidc_issuer'),
    oidcSubject: text('oidc_subject'),
    createdAt: createdAt(),
  },
  // Case-insensitive uniqueness: "Alice@x" and "alice@x" are the same person.
  (t) => [uniqueIndex('users_email_lower_key').on(sql`lower(${t.email})`)],
);

export const projects = pgTable('projects', {
  id: id(),
  name: text('name').notNull().unique('projects_name_key'),
  repositorySource: text('repository_source').notNull(),
  defaultRef: text('default_ref').notNull().default('HEAD'),
  createdAt: createdAt(),
});

export const projectMemberships = pgTable(
  'project_memberships',
  {
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ name: 'project_memberships_pkey', columns: [t.userId, t.projectId] }), index('project_memberships_project_idx').on(t.projectId)],
);

export const policyVersions = pgTable(
  'policy_versions',
  {
    id: id(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    version: integer('version').notNull(),
    document: jsonb('document').$type<unknown>().notNull(),
    sourceText: text('source_text').notNull(),
    authorId: text('author_id').references(() => users.id, { onDelete: 'set null' }),
    comment: text('comment'),
    createdAt: createdAt(),
  },
  (t) => [unique('policy_versions_project_version_key').on(t.projectId, t.version)],
);

export const apiTokens = pgTable(
  'api_tokens',
  {
    id: id(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    tokenHash: text('token_hash').notNull().unique('api_tokens_token_hash_key'),
    prefix: text('prefix').notNull(),
    expiresAt: at('expires_at'),
    revokedAt: at('revoked_at'),
    lastUsedAt: at('last_used_at'),
    createdAt: createdAt(),
    /** Made from a console session opened through the provider (0017_oidc_cli): its refresh token, sealed, and the last check. */
    oidcRefreshToken: text('oidc_refresh_token'),
    oidcCheckedAt: at('oidc_checked_at'),
  },
  (t) => [index('api_tokens_user_idx').on(t.userId)],
);

export const webSessions = pgTable(
  'web_sessions',
  {
    /** A hash of the cookie value: a database dump never yields a usable cookie. */
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    csrfToken: text('csrf_token').notNull(),
    expiresAt: at('expires_at').notNull(),
    revokedAt: at('revoked_at'),
    /** Opened through the OpenID Provider: its refresh token, sealed, and when it was last used to check the person. */
    oidcRefreshToken: text('oidc_refresh_token'),
    oidcCheckedAt: at('oidc_checked_at'),
    createdAt: createdAt(),
  },
  (t) => [index('web_sessions_user_idx').on(t.userId)],
);

const SESSION_STATUSES = ['running', 'completed', 'stopped', 'failed'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** How a session was started (L4, 0007_session_mode): the values of SessionMode in libs/contracts. */
const SESSION_MODES = SessionMode.options as [SessionMode, ...SessionMode[]];

export const sessions = pgTable(
  'sessions',
  {
    id: id(),
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'restrict' }),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'restrict' }),
    parentSessionId: text('parent_session_id').references((): AnyPgColumn => sessions.id, { onDelete: 'set null' }),
    depth: integer('depth').notNull().default(0),
    agent: text('agent').notNull(),
    instruction: text('instruction').notNull(),
    policyVersionId: text('policy_version_id').references(() => policyVersions.id, { onDelete: 'restrict' }),
    status: text('status', { enum: SESSION_STATUSES }).notNull().default('running'),
    stopReason: text('stop_reason'),
    /** No default: every insert says how the session was started. */
    mode: text('mode', { enum: SESSION_MODES }).notNull(),
    /** mode = 'headless' (a CHECK keeps them together): approvals are refused at once. */
    headless: boolean('headless').notNull().default(false),
    actionsUsed: integer('actions_used').notNull().default(0),
    extensionsUsed: integer('extensions_used').notNull().default(0),
    startedAt: at('started_at').notNull().defaultNow(),
    endedAt: at('ended_at'),
    baseCommit: text('base_commit'),
    branch: text('branch'),
    includedUncommitted: boolean('included_uncommitted').notNull().default(false),
    fingerprintStart: text('fingerprint_start'),
    fingerprintEnd: text('fingerprint_end'),
    finalPatch: text('final_patch'),
    summary: text('summary'),
    sandboxId: text('sandbox_id'),
    /** The gateway process running the loop, and when it last said so (0005_session_runner_lease). */
    runner: text('runner'),
    runnerSeenAt: at('runner_seen_at'),
    /** The exec-host the session's sandbox was placed on (0010_exec_hosts); null with a fixed exec-host. */
    execHost: text('exec_host'),
  },
  (t) => [
    index('sessions_project_idx').on(t.projectId, t.startedAt),
    index('sessions_user_idx').on(t.userId, t.startedAt),
    index('sessions_parent_idx').on(t.parentSessionId),
    index('sessions_status_idx').on(t.status),
    index('sessions_exec_host_idx')
      .on(t.execHost)
      .where(sql`status = 'running'`),
  ],
);

export const toolCalls = pgTable(
  'tool_calls',
  {
    id: id(),
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id, { onDelete: 'cascade' }),
    seq: integer('seq').notNull(),
    name: text('name').notNull(),
    arguments: storableJsonb('arguments').$type<Record<string, unknown>>().notNull(),
    decision: jsonb('decision').$type<unknown>(),
    result: storableJsonb('result').$type<unknown>(),
    agent: text('agent').notNull(),
    createdAt: createdAt(),
  },
  (t) => [unique('tool_calls_session_seq_key').on(t.sessionId, t.seq)],
);

const APPROVAL_KINDS = ['command', 'write', 'changes', 'third_party', 'extension', 'question'] as const;
export type ApprovalKind = (typeof APPROVAL_KINDS)[number];
const APPROVAL_STATES = ['pending', 'approved', 'rejected', 'expired', 'refused_headless'] as const;
export type ApprovalState = (typeof APPROVAL_STATES)[number];

export const approvals = pgTable(
  'approvals',
  {
    id: id(),
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id, { onDelete: 'cascade' }),
    toolCallId: text('tool_call_id').references(() => toolCalls.id, { onDelete: 'set null' }),
    kind: text('kind', { enum: APPROVAL_KINDS }).notNull(),
    payload: storableJsonb('payload').$type<unknown>().notNull(),
    flags: jsonb('flags').$type<unknown>().notNull().default({}),
    agent: text('agent').notNull(),
    state: text('state', { enum: APPROVAL_STATES }).notNull().default('pending'),
    decidedBy: text('decided_by').references(() => users.id, { onDelete: 'set null' }),
    decidedAt: at('decided_at'),
    reason: text('reason'),
    response: text('response'),
    createdAt: createdAt(),
  },
  (t) => [index('approvals_session_state_idx').on(t.sessionId, t.state), index('approvals_state_idx').on(t.state, t.createdAt)],
);

/** Failed sign-ins, per `account:EMAIL` and `ip:ADDRESS`, for pacing shared by every replica (0006). */
export const loginFailures = pgTable('login_failures', {
  key: text('key').notNull(),
  at: at('at').notNull().defaultNow(),
});

export const approvedCommands = pgTable(
  'approved_commands',
  {
    sessionId: text('session_id')
      .notNull()
      .references(() => sessions.id, { onDelete: 'cascade' }),
    command: text('command').notNull(),
    /** Where the command runs: the same text elsewhere is another command (0008). */
    workingDirectory: text('working_directory').notNull().default('/workspace'),
    /** The approval whose "approve identical commands" answer this is (0008). */
    approvalId: text('approval_id').references(() => approvals.id, { onDelete: 'set null' }),
    approvedBy: text('approved_by').references(() => users.id, { onDelete: 'set null' }),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ name: 'approved_commands_pkey', columns: [t.sessionId, t.workingDirectory, t.command] })],
);

/**
 * The tamper-evident log (T2). `seq` is assigned by the chainer under the chain-head lock, so it has
 * no gaps; project and session carry no foreign key because the log must outlive what it describes.
 * `payload` is the canonical JSON text that was hashed, kept byte for byte (jsonb would re-encode it
 * and refuses strings containing U+0000, which command output can hold). `entryKey` (0012) is not
 * hashed: the receipt by which the writer of an entry finds it (null before 0012).
 */
export const auditLog = pgTable(
  'audit_log',
  {
    seq: bigint('seq', { mode: 'number' }).primaryKey(),
    at: at('at').notNull(),
    actor: text('actor').notNull(),
    kind: text('kind').notNull(),
    projectId: text('project_id'),
    sessionId: text('session_id'),
    payload: text('payload').notNull(),
    prevHash: text('prev_hash').notNull(),
    hash: text('hash').notNull(),
    entryKey: uuid('entry_key'),
  },
  (t) => [
    index('audit_log_project_idx').on(t.projectId, t.seq),
    index('audit_log_session_idx').on(t.sessionId, t.seq),
    index('audit_log_actor_idx').on(t.actor, t.seq),
    index('audit_log_kind_idx').on(t.kind, t.seq),
    index('audit_log_at_idx').on(t.at),
    uniqueIndex('audit_log_entry_key_idx').on(t.entryKey),
  ],
);

/**
 * Entries committed by a replica while another one was chaining (0012): durable, not yet in the
 * chain. The chainer moves them into `audit_log` oldest first (`id`) and deletes them in the same
 * transaction. The key is a random UUID made by the writer, never read from a URL.
 */
export const auditPending = pgTable('audit_pending', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  entryKey: uuid('entry_key').notNull().unique('audit_pending_entry_key_key'),
  actor: text('actor').notNull(),
  kind: text('kind').notNull(),
  projectId: text('project_id'),
  sessionId: text('session_id'),
  payload: text('payload').notNull(),
  queuedAt: at('queued_at')
    .notNull()
    .default(sql`clock_timestamp()`),
});

/** One row per chain: the row lock every chaining round holds, and the head a truncation is checked against. */
export const auditChainHead = pgTable('audit_chain_head', {
  chain: text('chain').primaryKey(),
  seq: bigint('seq', { mode: 'number' }).notNull(),
  hash: text('hash').notNull(),
});

/** Where each archive of the oldest audit entries ended (0015_audit_archives): verify() starts after the last. */
export const auditArchives = pgTable('audit_archives', {
  throughSeq: bigint('through_seq', { mode: 'number' }).primaryKey(),
  throughHash: text('through_hash').notNull(),
  firstSeq: bigint('first_seq', { mode: 'number' }).notNull(),
  file: text('file').notNull(),
  sha256: text('sha256').notNull(),
  archivedAt: at('archived_at').notNull().defaultNow(),
});

/** Sign-ins started with the OpenID Provider (0016_oidc): each state is used once. */
export const oidcLogins = pgTable('oidc_logins', {
  stateHash: text('state_hash').primaryKey(),
  codeVerifier: text('code_verifier').notNull(),
  nonce: text('nonce').notNull(),
  returnTo: text('return_to').notNull(),
  createdAt: createdAt(),
  expiresAt: at('expires_at').notNull(),
  usedAt: at('used_at'),
  /** `lemni login --sso` (0017_oidc_cli): the CLI's loopback port and the SHA-256 of its verifier. */
  cliPort: integer('cli_port'),
  cliChallenge: text('cli_challenge'),
  /** The one-time code sent to the CLI, whom it signs in, the sealed refresh token, until when, when used. */
  cliCodeHash: text('cli_code_hash'),
  cliUserId: text('cli_user_id').references(() => users.id, { onDelete: 'cascade' }),
  cliRefreshToken: text('cli_refresh_token'),
  cliCodeExpiresAt: at('cli_code_expires_at'),
  cliCodeUsedAt: at('cli_code_used_at'),
});

/** Where each audit sink stands (audit-sinks/): its cursor, the gateway holding its lease, its failure. */
export const auditSinkCursors = pgTable('audit_sink_cursors', {
  name: text('name').primaryKey(),
  seq: bigint('seq', { mode: 'number' }).notNull().default(0),
  holder: text('holder'),
  leaseUntil: at('lease_until'),
  deliveredAt: at('delivered_at'),
  failingSince: at('failing_since'),
  lastError: text('last_error'),
  lastAttemptAt: at('last_attempt_at'),
  updatedAt: at('updated_at').notNull().defaultNow(),
});

/** Live events, kept so a WebSocket client that reconnects with its last seq gets what it missed. */
export const events = pgTable(
  'events',
  {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    sessionId: text('session_id'),
    projectId: text('project_id'),
    type: text('type').notNull(),
    payload: storableJsonb('payload').$type<unknown>().notNull(),
    at: at('at').notNull().defaultNow(),
  },
  (t) => [index('events_session_idx').on(t.sessionId, t.seq), index('events_project_idx').on(t.projectId, t.seq)],
);

const ENVIRONMENT_JOB_STATES = ['preparing', 'ready', 'failed', 'lost'] as const;
/** `lost`: the exec-host no longer reports the job's result (its inputs changed, or it lost the job). */
export type EnvironmentJobState = (typeof ENVIRONMENT_JOB_STATES)[number];

/**
 * Preparations of a project's environment (S8, 0009): a row per project and job, whose state leaves
 * `preparing` once, so each end is audited once; the final state and the log's last 64 KiB outlive
 * the exec-host's cache.
 */
export const environmentJobs = pgTable(
  'environment_jobs',
  {
    projectId: text('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    jobId: text('job_id').notNull(),
    key: text('key').notNull(),
    /** Who asked (a person, or the developer whose session start asked for it); null when only seen. */
    requestedBy: text('requested_by').references(() => users.id, { onDelete: 'set null' }),
    state: text('state', { enum: ENVIRONMENT_JOB_STATES }).notNull().default('preparing'),
    message: text('message'),
    startedAt: at('started_at').notNull(),
    finishedAt: at('finished_at'),
    logTail: text('log_tail'),
    /** The byte offset in the job's log where `logTail` begins. */
    logTailOffset: bigint('log_tail_offset', { mode: 'number' }),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ name: 'environment_jobs_pkey', columns: [t.projectId, t.jobId] }), index('environment_jobs_state_idx').on(t.projectId, t.state)],
);

const EXEC_HOST_STATES = ExecHostState.options as [ExecHostState, ...ExecHostState[]];

/** The exec-host pool (0010_exec_hosts): what each host last said about itself, and its state. */
export const execHosts = pgTable('exec_hosts', {
  id: text('id').primaryKey(),
  address: text('address').notNull(),
  runtimes: jsonb('runtimes').$type<SandboxRuntime[]>().notNull(),
  images: jsonb('images').$type<string[]>().notNull(),
  environments: jsonb('environments').$type<string[]>().notNull(),
  capacity: integer('capacity').notNull(),
  load: integer('load').notNull(),
  /** Its warm pool at the last heartbeat (0012_exec_host_warm_pool); null: none reported. */
  warm: jsonb('warm').$type<{ ready: number; target: number } | null>(),
  version: text('version').notNull(),
  state: text('state', { enum: EXEC_HOST_STATES }).notNull().default('active'),
  /** Who drained it (an actor), while it is kept drained. */
  drainedBy: text('drained_by'),
  drainReason: text('drain_reason'),
  stateChangedAt: at('state_changed_at').notNull().defaultNow(),
  registeredAt: at('registered_at').notNull().defaultNow(),
  lastHeartbeatAt: at('last_heartbeat_at').notNull().defaultNow(),
});

/** How a project's repository is fetched (0011_repository_access): the sealed credential and what may be shown. */
export const repositoryAccess = pgTable('repository_access', {
  projectId: text('project_id')
    .primaryKey()
    .references(() => projects.id, { onDelete: 'cascade' }),
  credentialKind: text('credential_kind', { enum: ['https', 'ssh'] }),
  /** SecretBox.seal output; opened only to hand the credential to an exec-host for one fetch. */
  credentialSealed: text('credential_sealed'),
  username: text('username'),
  keyFingerprint: text('key_fingerprint'),
  knownHosts: text('known_hosts'),
  caPem: text('ca_pem'),
  updatedBy: text('updated_by').references(() => users.id, { onDelete: 'set null' }),
  updatedAt: at('updated_at').notNull().defaultNow(),
});

export type UserRow = typeof users.$inferSelect;
export type NewUser = typeof users.$inferInsert;
export type ProjectRow = typeof projects.$inferSelect;
export type NewProject = typeof projects.$inferInsert;
export type ProjectMembershipRow = typeof projectMemberships.$inferSelect;
export type PolicyVersionRow = typeof policyVersions.$inferSelect;
export type ApiTokenRow = typeof apiTokens.$inferSelect;
export type NewApiToken = typeof apiTokens.$inferInsert;
export type WebSessionRow = typeof webSessions.$inferSelect;
export type NewWebSession = typeof webSessions.$inferInsert;
export type SessionRow = typeof sessions.$inferSelect;
export type NewSession = typeof sessions.$inferInsert;
export type ToolCallRow = typeof toolCalls.$inferSelect;
export type NewToolCall = typeof toolCalls.$inferInsert;
export type ApprovalRow = typeof approvals.$inferSelect;
export type NewApproval = typeof approvals.$inferInsert;
export type ApprovedCommandRow = typeof approvedCommands.$inferSelect;
export type AuditLogRow = typeof auditLog.$inferSelect;
export type AuditPendingRow = typeof auditPending.$inferSelect;
export type AuditSinkCursorRow = typeof auditSinkCursors.$inferSelect;
export type AuditArchiveRow = typeof auditArchives.$inferSelect;
export type EventRow = typeof events.$inferSelect;
export type NewEvent = typeof events.$inferInsert;
export type EnvironmentJobRow = typeof environmentJobs.$inferSelect;
export type ExecHostRow = typeof execHosts.$inferSelect;
export type RepositoryAccessRow = typeof repositoryAccess.$inferSelect;
