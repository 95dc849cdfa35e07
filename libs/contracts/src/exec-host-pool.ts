import { z } from 'zod';
import { IsoTimestamp } from './api/common';
import { SandboxRuntime } from './exec-host';

/**
 * The exec-host pool (S1, S3, S6, G07): exec-hosts that register with the platform and heartbeat,
 * sessions placed on one of them, every call of a session sent to the host that holds its sandbox.
 *
 * An exec-host started with LEMNISCATE_GATEWAY_URL sends an ExecHostHeartbeat to
 *   POST /api/v1/exec-hosts/heartbeat   (Authorization: Bearer <LEMNISCATE_EXEC_HOST_TOKEN>)
 * every LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS (its first heartbeat registers it). A gateway in pool
 * mode (LEMNISCATE_EXEC_HOST_POOL=true) answers with ExecHostHeartbeatResponse; one with a fixed
 * exec-host (LEMNISCATE_EXEC_HOST_URL) refuses registrations (409).
 */

/**
 * An exec-host's name in the pool: a lower-case DNS name (labels of letters, digits and "-" joined by
 * "."), so a Kubernetes node name such as `ip-10-0-1-2.ec2.internal` can be one.
 */
export const ExecHostId = z
  .string()
  .max(253, 'must be at most 253 characters')
  .regex(
    /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/,
    'must be a lower-case DNS name: labels of 1–63 letters, digits or "-" (not at either end), joined by "."',
  );
export type ExecHostId = z.infer<typeof ExecHostId>;

/**
 * Where the gateway calls an exec-host: `https://host:port` (mutual TLS), `http://host:port` (only
 * accepted for loopback addresses) or `unix:/absolute/path.sock` (one machine).
 */
export const ExecHostAddress = z
  .string()
  .max(2048)
  .refine((s) => /^unix:\/[^\0]*$/.test(s) || /^https?:\/\/[^/?#\s]+\/?$/.test(s), 'must be an https:// or http:// origin (no path) or unix:/absolute/path');
export type ExecHostAddress = z.infer<typeof ExecHostAddress>;

/** What an exec-host tells the pool about itself, at registration and at every heartbeat. */
export const ExecHostHeartbeat = z.strictObject({
  id: ExecHostId,
  address: ExecHostAddress,
  /** The runtimes the host's engine has registered (runsc: gVisor). */
  runtimes: z.array(SandboxRuntime).min(1).max(8),
  /** The sandbox image tags present on the host's engine. */
  images: z.array(z.string().min(1).max(256)).max(256),
  /** The projects whose environment is ready on this host (their prepared image is present). */
  environments: z.array(z.string().min(1).max(64)).max(10_000),
  /** How many sandboxes the host runs at most: LEMNISCATE_EXEC_HOST_MAX_SANDBOXES, else computed at its start from its memory and process ids. */
  capacity: z.int().min(1).max(100_000),
  /** How many sandboxes it runs now. */
  load: z.int().min(0).max(100_000),
  /** Its warm pool: sandboxes made ahead and ready, and how many it wants now (absent from older exec-hosts). */
  warm: z.strictObject({ ready: z.int().min(0).max(100_000), target: z.int().min(0).max(100_000) }).optional(),
  /** The exec-host's version (its package.json). */
  version: z.string().min(1).max(64),
});
export type ExecHostHeartbeat = z.infer<typeof ExecHostHeartbeat>;

/**
 * `active`: sessions may be placed on it. `draining`: an operator drained it: no new session, the
 * live ones finish. `lost`: it stopped heartbeating: no new session, its live sessions ended as
 * `sandbox_lost`; its next heartbeat makes it `active` again (a drained host stays drained).
 */
export const ExecHostState = z.enum(['active', 'draining', 'lost']);
export type ExecHostState = z.infer<typeof ExecHostState>;

export const ExecHostHeartbeatResponse = z.object({
  id: ExecHostId,
  state: ExecHostState,
  /** How often the gateway expects a heartbeat; a host silent for `lostAfterSeconds` is lost. */
  heartbeatSeconds: z.int().positive(),
  lostAfterSeconds: z.int().positive(),
});
export type ExecHostHeartbeatResponse = z.infer<typeof ExecHostHeartbeatResponse>;

/** One exec-host as `lemni admin exec-hosts list` and the console's Exec-hosts page show it. */
export const ExecHostView = z.object({
  id: ExecHostId,
  address: z.string(),
  /** `registered`: a pool member. `fixed`: the one exec-host a gateway without a pool is configured with (LEMNISCATE_EXEC_HOST_URL). */
  kind: z.enum(['registered', 'fixed']),
  state: ExecHostState,
  runtimes: z.array(SandboxRuntime),
  images: z.array(z.string()),
  environments: z.array(z.string()),
  capacity: z.int().nonnegative(),
  /** The sandboxes the host reported at its last heartbeat. */
  load: z.int().nonnegative(),
  /** The live sessions placed on it, as the platform counts them (placement uses this). */
  liveSessions: z.int().nonnegative(),
  /** Its warm pool at its last heartbeat; null when it reported none. */
  warm: z.object({ ready: z.int().nonnegative(), target: z.int().nonnegative() }).nullable(),
  version: z.string().nullable(),
  registeredAt: IsoTimestamp.nullable(),
  lastHeartbeatAt: IsoTimestamp.nullable(),
  /** For `draining`: who drained it and why; for `lost`: when it was declared lost. */
  drainedBy: z.string().nullable(),
  drainReason: z.string().nullable(),
  stateChangedAt: IsoTimestamp.nullable(),
});
export type ExecHostView = z.infer<typeof ExecHostView>;

export const ExecHostParams = z.strictObject({ hostId: ExecHostId });
export type ExecHostParams = z.infer<typeof ExecHostParams>;

export const DrainExecHostRequest = z.strictObject({
  /** Said in the audit log and on the host's row. */
  reason: z.string().trim().min(1).max(500).optional(),
});
export type DrainExecHostRequest = z.infer<typeof DrainExecHostRequest>;
