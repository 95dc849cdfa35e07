import { z } from 'zod';
import { RepositoryAccess } from './repository';
import { SessionId } from './common';
import { MirrorUrl } from './environment';
import { Limits, limitedText } from './limits';

/**
 * The exec-host control channel (HTTP, JSON). Only the gateway calls it. Every route requires
 * `Authorization: Bearer <LEMNISCATE_EXEC_HOST_TOKEN>`; errors use ErrorBody from ./common with one of
 * ExecHostErrorCode as `code`.
 *
 * Routes (all under the exec-host's base URL):
 *   GET    /healthz                                → { status: 'ok' } (liveness)
 *   GET    /v1/health                              → ExecHostHealth
 *   POST   /v1/sandboxes                           CreateSandboxRequest → SandboxInfo (201)
 *   GET    /v1/sandboxes                           → SandboxList
 *   GET    /v1/sandboxes/:id                       → SandboxInfo
 *   DELETE /v1/sandboxes/:id                       → DestroySandboxResponse (200, also when already gone)
 *   POST   /v1/sandboxes/:id/exec                  ExecRequest → NDJSON stream of ExecStreamChunk
 *   POST   /v1/sandboxes/:id/exec?stream=false     ExecRequest → ExecResult
 *   POST   /v1/sandboxes/:id/files/read            ReadFileRequest → ReadFileResponse
 *   POST   /v1/sandboxes/:id/files/list            ListFilesRequest → ListFilesResponse
 *   POST   /v1/sandboxes/:id/files/search          SearchFilesRequest → SearchFilesResponse
 *   POST   /v1/sandboxes/:id/files/propose-write   ProposeWriteRequest → ProposedChange
 *   POST   /v1/sandboxes/:id/files/propose-edit    ProposeEditRequest → ProposedChange
 *   POST   /v1/sandboxes/:id/files/apply           ApplyDiffRequest → ApplyDiffResponse
 *   GET    /v1/sandboxes/:id/changes               → ChangesResponse
 *   POST   /v1/sandboxes/:id/changes/accept        ChangePathsRequest → ChangePathsResponse
 *   POST   /v1/sandboxes/:id/changes/revert        ChangePathsRequest → ChangePathsResponse
 *   GET    /v1/sandboxes/:id/patch                 → PatchResponse
 *   POST   /v1/environments/status                 EnvironmentRequest → EnvironmentStatus
 *   POST   /v1/environments/prepare                PrepareEnvironmentRequest → EnvironmentStatus (202)
 *   GET    /v1/environments/jobs/:jobId/log?offset → EnvironmentLog
 *   GET    /metrics                                → Prometheus text (sandboxes, capacity, the warm pool, warm and cold starts, creation and command latency)
 *
 * Over TCP beyond loopback the channel is mutual TLS (docs/decisions/0010-exec-host-pool.md): the
 * exec-host requires a client certificate from its client CA whose common name it allows, then the token.
 */
export const ExecHostRoutes = {
  health: () => '/v1/health',
  sandboxes: () => '/v1/sandboxes',
  sandbox: (id: string) => `/v1/sandboxes/${encodeURIComponent(id)}`,
  exec: (id: string) => `/v1/sandboxes/${encodeURIComponent(id)}/exec`,
  file: (id: string, op: FileOperation) => `/v1/sandboxes/${encodeURIComponent(id)}/files/${op}`,
  changes: (id: string) => `/v1/sandboxes/${encodeURIComponent(id)}/changes`,
  acceptChanges: (id: string) => `/v1/sandboxes/${encodeURIComponent(id)}/changes/accept`,
  revertChanges: (id: string) => `/v1/sandboxes/${encodeURIComponent(id)}/changes/revert`,
  patch: (id: string) => `/v1/sandboxes/${encodeURIComponent(id)}/patch`,
  mcp: (id: string) => `/v1/sandboxes/${encodeURIComponent(id)}/mcp`,
  mcpProcess: (id: string, processId: string) => `/v1/sandboxes/${encodeURIComponent(id)}/mcp/${encodeURIComponent(processId)}`,
  mcpMessages: (id: string, processId: string) => `/v1/sandboxes/${encodeURIComponent(id)}/mcp/${encodeURIComponent(processId)}/messages`,
  environmentStatus: () => '/v1/environments/status',
  prepareEnvironment: () => '/v1/environments/prepare',
  environmentLog: (jobId: string, offset = 0) => `/v1/environments/jobs/${encodeURIComponent(jobId)}/log?offset=${offset}`,
  repositoryDirectory: () => '/v1/repository/directory',
  metrics: () => '/metrics',
} as const;

export const FileOperation = z.enum(['read', 'list', 'search', 'propose-write', 'propose-edit', 'apply']);
export type FileOperation = z.infer<typeof FileOperation>;

/** Each control-channel path as a template (`/v1/sandboxes/{id}/exec`), for naming spans and metrics by route, never by id. */
const EXEC_HOST_TEMPLATES: { template: string; pattern: RegExp }[] = (() => {
  const HOLE = '\u0000';
  const templates = [
    ExecHostRoutes.health(),
    ExecHostRoutes.sandboxes(),
    ExecHostRoutes.sandbox(HOLE),
    ExecHostRoutes.exec(HOLE),
    ...FileOperation.options.map((op) => ExecHostRoutes.file(HOLE, op)),
    ExecHostRoutes.changes(HOLE),
    ExecHostRoutes.acceptChanges(HOLE),
    ExecHostRoutes.revertChanges(HOLE),
    ExecHostRoutes.patch(HOLE),
    ExecHostRoutes.mcp(HOLE),
    ExecHostRoutes.mcpProcess(HOLE, HOLE),
    ExecHostRoutes.mcpMessages(HOLE, HOLE),
    ExecHostRoutes.environmentStatus(),
    ExecHostRoutes.prepareEnvironment(),
    ExecHostRoutes.environmentLog(HOLE).split('?')[0]!,
    ExecHostRoutes.repositoryDirectory(),
    ExecHostRoutes.metrics(),
  ];
  return templates.map((t) => ({
    template: t.replaceAll('%00', '{id}'),
    pattern: new RegExp(
      `^${t
        .split('%00')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('[^/]+')}$`,
    ),
  }));
})();

/** The template of a control-channel path (its query ignored), or undefined for a path the exec-host does not serve. */
export function execHostRouteOf(path: string): string | undefined {
  const bare = path.split('?')[0] ?? path;
  return EXEC_HOST_TEMPLATES.find((t) => t.pattern.test(bare))?.template;
}

/** Machine-readable error codes of the exec-host (ErrorBody.code). */
export const ExecHostErrorCode = z.enum([
  'unauthorized', // 401: token missing or wrong; no detail is given
  'invalid_request', // 400: malformed body; the message names the field
  'repository_not_found', // 400: the repository source does not exist or cannot be read
  'repository_ref_not_found', // 400: the ref does not exist in the repository
  'uncommitted_patch_does_not_apply', // 400: the developer's uncommitted patch does not apply on the base commit
  'patch_does_not_apply', // 409: an approved diff no longer applies to the working copy
  'sandbox_not_found', // 404
  'sandbox_busy', // 409: a command is already running in this sandbox
  'sandbox_lost', // 410: the container disappeared or stopped on its own
  'session_has_sandbox', // 409: one sandbox per session (S1); destroy the existing one first
  'runtime_unavailable', // 400: the requested runtime is not registered with the engine
  'sandbox_limit_reached', // 429: the exec-host runs as many sandboxes as it is allowed to
  'outside_working_copy', // 403: a path resolves outside /workspace (symlink or ..)
  'file_not_found', // 404
  'not_a_file', // 400: a directory where a file was expected, or the reverse
  'file_too_large', // 413
  'binary_file', // 422: the operation needs text
  'edit_not_unique', // 422: old_string occurs more than once
  'edit_not_found', // 422: old_string does not occur
  'invalid_pattern', // 400: a search regex that does not compile
  'change_not_found', // 404: accept or revert of a path that has no pending change
  'unreviewed_changes', // 409: a diff would be applied over changes nobody has reviewed yet
  'engine_unavailable', // 503: the container engine does not answer
  'sandbox_setup_failed', // 500: the sandbox could not be prepared; nothing is left running
  'environment_not_ready', // 409: the project's environment is not prepared (or its preparation failed) for its current inputs
  'environment_invalid', // 422: the repository's devcontainer cannot be used (unreadable, an image not on this host, a build that fails)
  'job_not_found', // 404: no environment preparation with this id
  'mcp_process_not_found', // 404: no MCP server process with this id in this sandbox (never started, or ended and collected)
  'internal', // 500
]);
export type ExecHostErrorCode = z.infer<typeof ExecHostErrorCode>;

// ───────────────────────────── health

export const SandboxRuntime = z.enum(['runc', 'runsc']);
export type SandboxRuntime = z.infer<typeof SandboxRuntime>;

/**
 * How the exec-host reaches its containers' cgroups, chosen at its start: the files of cgroup v1 or
 * of the unified hierarchy (v2), or only the container engine (pause, its process list, its events).
 */
export const CgroupLayout = z.enum(['v1', 'v2', 'engine']);
export type CgroupLayout = z.infer<typeof CgroupLayout>;

export const ExecHostHealth = z.object({
  status: z.enum(['ok', 'degraded']),
  engine: z.object({ reachable: z.boolean(), version: z.string().nullable(), message: z.string().optional() }),
  runtimes: z.object({ runc: z.boolean(), runsc: z.boolean() }),
  image: z.object({ name: z.string(), present: z.boolean() }),
  seccomp: z.object({ path: z.string(), valid: z.boolean(), message: z.string().optional() }),
  /** `enforced` when the host kernel has AppArmor and the profile is loaded; `unavailable` otherwise. */
  apparmor: z.object({ state: z.enum(['enforced', 'unavailable', 'failed']), profile: z.string(), message: z.string().optional() }),
  diskCap: z.object({ mechanism: z.literal('ext4-loop'), available: z.boolean(), message: z.string().optional() }),
  /** `message`: what is weaker than the cgroup files (always set under `engine`). */
  /** Optional for the gateway: an exec-host from before cgroup layouts answers without it (rolling upgrades). */
  cgroups: z.object({ layout: CgroupLayout, message: z.string().optional() }).optional(),
  sandboxes: z.int().nonnegative(),
  /** Sandboxes made ahead of their sessions (optional for the gateway: older exec-hosts have none). */
  warmPool: z
    .object({
      /** Warm sandboxes kept per kind; 0: the pool is off. */
      size: z.int().nonnegative(),
      /** Warm sandboxes wanted now (size × kinds, within the capacity left) and ready. */
      target: z.int().nonnegative(),
      ready: z.int().nonnegative(),
      /** Sessions that started warm, and those that found none. */
      hits: z.int().nonnegative(),
      misses: z.int().nonnegative(),
      /** Why the pool is below its target, when it is held (memory, capacity). */
      held: z.string().nullable(),
    })
    .optional(),
});
export type ExecHostHealth = z.infer<typeof ExecHostHealth>;

// ───────────────────────────── create

/** Resource caps of one sandbox. Each field has a default and a hard maximum enforced by the exec-host. */
export const SandboxLimits = z.object({
  cpus: z.number().positive().max(64),
  memoryMb: z.int().min(64).max(65_536),
  pids: z.int().min(16).max(32_768),
  diskMb: z.int().min(16).max(102_400),
  commandTimeoutSeconds: z.int().min(1).max(7_200),
  outputCapBytes: z.int().min(1_024).max(Limits.toolOutputBytes),
  lifetimeMinutes: z
    .int()
    .min(1)
    .max(24 * 60),
});
export type SandboxLimits = z.infer<typeof SandboxLimits>;

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = {
  cpus: 2,
  memoryMb: 2_048,
  pids: 512,
  diskMb: 2_048,
  commandTimeoutSeconds: 600,
  outputCapBytes: 1024 * 1024,
  lifetimeMinutes: 60,
};

/**
 * The resource profile a session asks for under the policy's defaults (the `sandbox` section of
 * libs/policy, as the gateway sends it): the exec-host keeps this profile warm from start-up, so the
 * sessions of a policy that does not change it start warm. `test/unit/warm-profile.spec.ts` fails
 * when the policy's defaults and this profile part.
 */
export const SESSION_DEFAULT_PROFILE: Pick<SandboxLimits, 'cpus' | 'memoryMb' | 'pids' | 'diskMb'> = { cpus: 2, memoryMb: 2_048, pids: 256, diskMb: 2_048 };

/**
 * Context exclusions applied to every working copy (S5). A request's `contextExclusions` are added to
 * these, never substituted: a project can exclude more, not less. Globs are picomatch globs matched
 * against the repository-relative path; a glob without "/" matches the file name at any depth.
 */
export const DEFAULT_CONTEXT_EXCLUSIONS: readonly string[] = [
  '.env',
  '.env.*',
  '*.env',
  '.envrc',
  '*.pem',
  '*.key',
  '*.p12',
  '*.pfx',
  '*.jks',
  '*.keystore',
  '*.kdbx',
  'id_rsa',
  'id_dsa',
  'id_ecdsa',
  'id_ed25519',
  'id_*',
  '**/secrets/**',
  '**/.secrets/**',
  '**/.ssh/**',
  '**/.aws/**',
  '**/.gnupg/**',
  '**/.docker/config.json',
  '**/.kube/config',
  '.npmrc',
  '.pypirc',
  '.netrc',
  '.git-credentials',
  '.htpasswd',
  'credentials.json',
  'service-account*.json',
  '*.tfstate',
  '*.tfstate.*',
  '*.tfvars',
];

export const RepositorySource = z.object({
  /** An absolute local path to a git repository, or a git URL (https://, ssh://, git@host:path) the exec-host can reach. */
  source: z.string().min(1).max(4096),
  /** Branch, tag or commit; the repository's HEAD when absent. */
  ref: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[^\s\0-]/, 'must not start with "-" or whitespace')
    .optional(),
  /**
   * How to fetch a git URL: the gateway's credential, known hosts and CA for the project. Used by the
   * exec-host's own git outside the sandbox for this one fetch; never written to the working copy,
   * a record or a log.
   */
  access: RepositoryAccess.optional(),
});
export type RepositorySource = z.infer<typeof RepositorySource>;

/** What identifies a project's environment: its repository at the default ref, and where set-up may reach. */
export const EnvironmentRequest = z.object({
  projectId: z.string().min(1).max(64),
  /** The repository and the project's default ref, whose `.devcontainer/devcontainer.json` defines the environment. */
  repository: RepositorySource,
  runtime: SandboxRuntime.default('runc'),
  /** The package mirrors the set-up may reach (the policy's `environment.mirrors`); nothing else resolves or connects. */
  mirrors: z.array(MirrorUrl).max(50).default([]),
  /** Limits of the set-up container (the session's sandbox limits; the lifetime is the set-up's time limit). */
  limits: SandboxLimits.partial().optional(),
  /** Time allowed for the whole set-up (every command). */
  setupTimeoutSeconds: z
    .int()
    .min(10)
    .max(6 * 3600)
    .default(1800),
});
export type EnvironmentRequest = z.input<typeof EnvironmentRequest>;
export type EnvironmentRequestParsed = z.output<typeof EnvironmentRequest>;

/**
 * The files of one directory of a repository at a ref (the project's `.lemniscate/agents/` at its
 * default ref, AG1), read by the exec-host, which reaches the repository, with the project's access.
 */
export const RepositoryDirectoryRequest = z.object({
  /** The project whose repository it is: in a pool, the read goes to the project's environment host. */
  projectId: z.string().min(1).max(64),
  repository: RepositorySource,
  directory: z
    .string()
    .min(1)
    .max(256)
    .regex(/^(?!\/)(?!.*(^|\/)\.\.?(\/|$))[^\0\\]+$/, 'must be a relative path inside the repository, without "." or ".." parts'),
  /** Only file names ending so (".md"); every file when empty. */
  suffix: z.string().max(16).default(''),
  maxFiles: z.int().min(1).max(500).default(200),
  maxFileBytes: z
    .int()
    .min(1)
    .max(1024 * 1024)
    .default(256 * 1024),
});
export type RepositoryDirectoryRequest = z.input<typeof RepositoryDirectoryRequest>;
export type RepositoryDirectoryRequestParsed = z.output<typeof RepositoryDirectoryRequest>;

export const RepositoryDirectory = z.object({
  /** The commit the ref named when it was read. */
  commit: z.string(),
  /** Regular files directly in the directory, by name; none when the directory does not exist. */
  files: z.array(z.object({ name: z.string(), text: z.string() })),
  /** Files left out: over maxFileBytes, not UTF-8 text, or beyond maxFiles. */
  skipped: z.array(z.object({ name: z.string(), reason: z.string() })),
});
export type RepositoryDirectory = z.infer<typeof RepositoryDirectory>;

export const PrepareEnvironmentRequest = EnvironmentRequest.extend({
  /** Prepare again even when these inputs are already prepared (a failed job is never retried without it or a change). */
  force: z.boolean().default(false),
});
export type PrepareEnvironmentRequest = z.input<typeof PrepareEnvironmentRequest>;
export type PrepareEnvironmentRequestParsed = z.output<typeof PrepareEnvironmentRequest>;

export const EnvironmentLogQuery = z.object({ offset: z.coerce.number().int().nonnegative().default(0) });

export const CreateSandboxRequest = z.object({
  sessionId: SessionId,
  repository: RepositorySource,
  /**
   * The project's environment: its sessions start from the environment prepared for the devcontainer
   * at `environment.repository.ref` (the default ref, not the session's), or from the sandbox image
   * when the repository has none. Refused with `environment_not_ready` when it is not prepared.
   */
  environment: EnvironmentRequest.optional(),
  /** The developer's uncommitted changes, as `git diff --binary HEAD` output, applied over the base commit. */
  uncommittedPatch: limitedText('startingPatchBytes').optional(),
  contextExclusions: z.array(z.string().min(1).max(512)).max(500).optional(),
  limits: SandboxLimits.partial().optional(),
  runtime: SandboxRuntime.default('runc'),
});
export type CreateSandboxRequest = z.input<typeof CreateSandboxRequest>;
export type CreateSandboxRequestParsed = z.output<typeof CreateSandboxRequest>;

export const SandboxState = z.enum(['ready', 'busy', 'lost']);
export type SandboxState = z.infer<typeof SandboxState>;

/** The answer to create and to GET /v1/sandboxes/:id (X3: where the working copy stood at the start). */
export const SandboxInfo = z.object({
  sandboxId: z.string().min(1),
  sessionId: SessionId,
  runtime: SandboxRuntime,
  state: SandboxState,
  baseCommit: z.string().regex(/^[0-9a-f]{40,64}$/),
  branch: z.string().nullable(),
  includedUncommitted: z.boolean(),
  /** `sha256:<hex>` over the (mode, blob id, path) of every file the sandbox received. */
  fingerprint: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  /** Repository paths left out of the working copy by the context exclusions (S5). */
  excluded: z.array(z.string()),
  /** The environment the sandbox started from: its key (null: the sandbox image, no devcontainer) and image. */
  environment: z.object({ key: z.string().nullable(), image: z.string() }).optional(),
  limits: SandboxLimits,
  /** True when the sandbox was made ahead, in the exec-host's warm pool, and taken by this session. */
  pooled: z.boolean().optional(),
  createdAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
});
export type SandboxInfo = z.infer<typeof SandboxInfo>;

export const SandboxList = z.object({ sandboxes: z.array(SandboxInfo) });
export type SandboxList = z.infer<typeof SandboxList>;

/**
 * DELETE is idempotent: 200 with `destroyed: true` when this call removed it, `destroyed: false` when
 * it was already gone (the caller's intent, "it no longer exists", holds either way). Never 404.
 */
export const DestroySandboxResponse = z.object({ sandboxId: z.string(), destroyed: z.boolean() });
export type DestroySandboxResponse = z.infer<typeof DestroySandboxResponse>;

// ───────────────────────────── exec

export const ExecRequest = z.object({
  command: limitedText('commandBytes').min(1),
  /** Lower than the sandbox's commandTimeoutSeconds or ignored: no argument can raise a limit (X1). */
  timeoutMs: z.int().positive().optional(),
});
export type ExecRequest = z.infer<typeof ExecRequest>;

/** Why a command ended abnormally, for automation (X2). The most significant one when several apply. */
export const ExecClass = z.enum(['timeout', 'oom', 'pids_limit', 'disk_full', 'file_size_limit', 'output_truncated', 'sandbox_lost']);
export type ExecClass = z.infer<typeof ExecClass>;

export const ExecOutputChunk = z.object({ type: z.enum(['stdout', 'stderr']), data: z.string() });
export type ExecOutputChunk = z.infer<typeof ExecOutputChunk>;

export const ExecExit = z.object({
  type: z.literal('exit'),
  /** null when the command never produced an exit status (sandbox lost). */
  exitCode: z.int().nullable(),
  durationMs: z.int().nonnegative(),
  timedOut: z.boolean(),
  /** True when output went over outputCapBytes; the streams then end with a marker line saying so. */
  truncated: z.boolean(),
  class: ExecClass.nullable(),
  /** Every class that applies, most significant first (class is the first one). */
  classes: z.array(ExecClass),
  /** One sentence for people when class is set. */
  message: z.string().optional(),
});
export type ExecExit = z.infer<typeof ExecExit>;

// ───────────────────────────── local MCP servers (AG7)

/** A JSON-RPC 2.0 message as MCP's stdio transport carries it, one per line; its meaning is the gateway's. */
export const McpMessage = z.record(z.string(), z.unknown()).refine((m) => m.jsonrpc === '2.0', { message: 'a JSON-RPC 2.0 message has jsonrpc: "2.0"' });
export type McpMessage = z.infer<typeof McpMessage>;

/**
 * Starts a local MCP server inside the sandbox, as the sandbox user in /workspace, with its stdin and
 * stdout relayed. It is a command like any other (S1–S6: no network, the sandbox's caps, one at a
 * time): it lives at most `timeoutMs` (never past the sandbox's command timeout) and every process of
 * the sandbox user is killed when it ends, so nothing runs in the sandbox between the agent's actions.
 */
export const McpOpenRequest = z.object({
  server: z.string().regex(/^[a-z][a-z0-9-]{0,30}$/, 'a server name is a lower-case letter followed by up to 30 lower-case letters, digits or -'),
  command: z.array(z.string().min(1).max(4096)).min(1).max(64),
  /** The server process's data segment cap (RLIMIT_DATA), within the sandbox's own memory cap. */
  memoryMb: z
    .int()
    .min(16)
    .max(64 * 1024),
  timeoutMs: z.int().positive(),
});
export type McpOpenRequest = z.infer<typeof McpOpenRequest>;
export const McpOpenResponse = z.object({ processId: z.string() });
export type McpOpenResponse = z.infer<typeof McpOpenResponse>;

/** How a server process ended: as a command's exit, with the end of what it wrote on stderr. */
export const McpExit = z.object({
  exitCode: z.int().nullable(),
  class: ExecClass.nullable(),
  /** The last lines the server wrote on stderr (at most 4 KiB): content of the sandbox, not of the platform. */
  stderr: z.string(),
  /** Lines on stdout that were not JSON-RPC messages, dropped. */
  dropped: z.int().nonnegative(),
  message: z.string().optional(),
});
export type McpExit = z.infer<typeof McpExit>;

/**
 * Writes `message` (if any) to the server's stdin, then answers what the server wrote since the last
 * answer: at once for a notification or a response, else when the response with id `waitFor` arrives,
 * the server asks something of the client, or it ends (bounded by its lifetime).
 */
export const McpMessageRequest = z.object({
  message: McpMessage.optional(),
  waitFor: z.union([z.string(), z.int()]).optional(),
});
export type McpMessageRequest = z.infer<typeof McpMessageRequest>;
export const McpMessageResponse = z.object({ messages: z.array(McpMessage), exited: McpExit.nullable() });
export type McpMessageResponse = z.infer<typeof McpMessageResponse>;

/** One line of the NDJSON stream (content-type application/x-ndjson): output chunks, then one exit. */
export const ExecStreamChunk = z.discriminatedUnion('type', [ExecOutputChunk, ExecExit]);
export type ExecStreamChunk = z.infer<typeof ExecStreamChunk>;

export const ExecResult = ExecExit.omit({ type: true }).extend({ stdout: z.string(), stderr: z.string() });
export type ExecResult = z.infer<typeof ExecResult>;

// ───────────────────────────── files

/**
 * Paths are relative to the working copy, or absolute under /workspace (what commands see). Anything
 * that resolves elsewhere, through ".." or a symlink, is refused with `outside_working_copy`.
 */
export const WorkspacePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes('\0'), 'must not contain NUL');

export const ReadFileRequest = z.object({
  path: WorkspacePath,
  /** First line to return, 0-based. */
  offset: z.int().nonnegative().optional(),
  /** Maximum number of lines to return. */
  limit: z.int().positive().max(100_000).optional(),
});
export type ReadFileRequest = z.infer<typeof ReadFileRequest>;

export const ReadFileResponse = z.object({
  path: z.string(),
  content: z.string(),
  offset: z.int().nonnegative(),
  lines: z.int().nonnegative(),
  totalLines: z.int().nonnegative(),
  size: z.int().nonnegative(),
  /** True when the answer stops before the file's end (limit or the byte cap). */
  truncated: z.boolean(),
});
export type ReadFileResponse = z.infer<typeof ReadFileResponse>;

export const ListFilesRequest = z.object({ path: WorkspacePath.default('.') });
export type ListFilesRequest = z.input<typeof ListFilesRequest>;

export const FileEntry = z.object({
  name: z.string(),
  type: z.enum(['file', 'directory', 'symlink', 'other']),
  size: z.int().nonnegative(),
});
export const ListFilesResponse = z.object({ path: z.string(), entries: z.array(FileEntry), truncated: z.boolean() });
export type ListFilesResponse = z.infer<typeof ListFilesResponse>;

export const SearchFilesRequest = z.object({
  pattern: z.string().min(1).max(1024),
  path: WorkspacePath.optional(),
  /** false (default): the pattern is a literal string; true: a JavaScript regular expression, run under a time limit. */
  regex: z.boolean().default(false),
  caseSensitive: z.boolean().default(true),
  maxMatches: z.int().positive().max(5_000).default(200),
});
export type SearchFilesRequest = z.input<typeof SearchFilesRequest>;

export const SearchMatch = z.object({ path: z.string(), line: z.int().positive(), text: z.string() });
export const SearchFilesResponse = z.object({
  matches: z.array(SearchMatch),
  filesScanned: z.int().nonnegative(),
  skippedBinary: z.int().nonnegative(),
  skippedLarge: z.int().nonnegative(),
  /** True when a bound (matches, bytes, files or time) stopped the search early. */
  truncated: z.boolean(),
  stoppedBy: z.enum(['max_matches', 'max_bytes', 'max_files', 'time_limit']).nullable(),
});
export type SearchFilesResponse = z.infer<typeof SearchFilesResponse>;

export const ProposeWriteRequest = z.object({ path: WorkspacePath, content: limitedText('fileWriteBytes') });
export type ProposeWriteRequest = z.infer<typeof ProposeWriteRequest>;

export const ProposeEditRequest = z.object({
  path: WorkspacePath,
  old_string: limitedText('fileWriteBytes').min(1),
  new_string: limitedText('fileWriteBytes'),
});
export type ProposeEditRequest = z.infer<typeof ProposeEditRequest>;

/** A proposal: nothing in the working copy changed. `diff` is a git-style unified diff (a/ b/ prefixes). */
export const ProposedChange = z.object({
  path: z.string(),
  diff: z.string(),
  created: z.boolean(),
  binary: z.boolean(),
});
export type ProposedChange = z.infer<typeof ProposedChange>;

export const ApplyDiffRequest = z.object({ diff: limitedText('applyDiffBytes').min(1) });
export type ApplyDiffRequest = z.infer<typeof ApplyDiffRequest>;

/** An applied diff was approved by a person: its files are written and accepted (checkpointed) at once. */
export const ApplyDiffResponse = z.object({ applied: z.array(z.string()) });
export type ApplyDiffResponse = z.infer<typeof ApplyDiffResponse>;

// ───────────────────────────── changes and patch

export const ChangeStatus = z.enum(['added', 'modified', 'deleted', 'renamed', 'mode']);
export type ChangeStatus = z.infer<typeof ChangeStatus>;

export const FileChange = z.object({
  path: z.string(),
  oldPath: z.string().optional(),
  status: ChangeStatus,
  /** git-style unified diff against the last checkpoint; for a binary file, the header and a "Binary files … differ" line. */
  diff: z.string(),
  binary: z.boolean(),
  /** Size in bytes of the file now (0 when deleted). */
  size: z.int().nonnegative(),
  diffBytes: z.int().nonnegative(),
  /**
   * Set when the path is now a symbolic link: its target as written, and whether it points outside
   * the working copy once every link on its way is followed (resolveWorkspaceLink).
   */
  symlink: z.object({ target: z.string(), outside: z.boolean() }).optional(),
});
export type FileChange = z.infer<typeof FileChange>;

/** What commands changed since the last checkpoint (accepted changes and applied diffs are the checkpoint). */
export const ChangesResponse = z.object({ files: z.array(FileChange), truncated: z.boolean() });
export type ChangesResponse = z.infer<typeof ChangesResponse>;

export const ChangePathsRequest = z.object({ paths: z.array(WorkspacePath).min(1).max(10_000) });
export type ChangePathsRequest = z.infer<typeof ChangePathsRequest>;

export const ChangePathsResponse = z.object({ paths: z.array(z.string()) });
export type ChangePathsResponse = z.infer<typeof ChangePathsResponse>;

export const PatchResponse = z.object({
  baseCommit: z.string(),
  /** Everything accepted, against baseCommit (`git diff --cached --binary`); applies with `git apply` on a clone at baseCommit. */
  patch: z.string(),
  includedUncommitted: z.boolean(),
  /**
   * Only what was accepted during the session, against the starting point (baseCommit plus the
   * developer's uncommitted patch). Equal to `patch` when no uncommitted patch was included.
   */
  sessionPatch: z.string(),
  /**
   * X3: the fingerprint of the tree `patch` gives on baseCommit, computed as SandboxInfo.fingerprint
   * is (the excluded files left out): equal to it when nothing was accepted. Read with the patch.
   */
  fingerprint: z.string().regex(/^sha256:[0-9a-f]{64}$/),
});
export type PatchResponse = z.infer<typeof PatchResponse>;
