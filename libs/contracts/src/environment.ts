import { z } from 'zod';
import { IsoTimestamp } from './api/common';

/**
 * A project's environment (S7, P5): the image and dependency state its sessions start from, defined
 * by `.devcontainer/devcontainer.json` at the project's default ref and prepared before any session,
 * with network to the administrator's mirrors only. Shared by the exec-host's control channel and the
 * gateway's API.
 */

/** A package mirror the set-up may reach: an http(s) origin, optionally with a path (`https://npm.corp.example/`). */
export const MirrorUrl = z
  .string()
  .max(2048)
  .refine(
    (s) => {
      try {
        const u = new URL(s);
        return (u.protocol === 'http:' || u.protocol === 'https:') && !u.username && !u.password && !u.search && !u.hash && u.hostname.length > 0;
      } catch {
        return false;
      }
    },
    { message: 'must be an http:// or https:// URL without credentials, query or fragment' },
  );
export type MirrorUrl = z.infer<typeof MirrorUrl>;

/**
 * Where a project's environment stands for its default ref now:
 * - `base`: the repository has no `.devcontainer/devcontainer.json`; sessions use the sandbox image;
 * - `ready`: prepared for exactly these inputs; sessions start from it;
 * - `preparing`: a preparation for these inputs is running;
 * - `failed`: the last preparation for these inputs failed; sessions are refused until one succeeds;
 * - `not_prepared`: nothing prepared for these inputs yet (a changed lock file, a new devcontainer).
 */
export const EnvironmentState = z.enum(['base', 'ready', 'preparing', 'failed', 'not_prepared']);
export type EnvironmentState = z.infer<typeof EnvironmentState>;

export const EnvironmentPhase = z.enum(['queued', 'reading', 'image', 'setup', 'snapshot', 'done']);
export type EnvironmentPhase = z.infer<typeof EnvironmentPhase>;

export const EnvironmentJobView = z.object({
  jobId: z.string(),
  /** The hash of the inputs this job prepares (devcontainer files, lock files and manifests, base image). */
  key: z.string(),
  state: z.enum(['preparing', 'ready', 'failed']),
  phase: EnvironmentPhase,
  /** Steps done out of all steps known so far (reading, image, each set-up command, snapshot). */
  progress: z.object({ done: z.number().int().nonnegative(), total: z.number().int().positive(), label: z.string() }),
  startedAt: IsoTimestamp,
  finishedAt: IsoTimestamp.nullable(),
  /** A sentence: why it failed, or what it produced. */
  message: z.string().nullable(),
  warnings: z.array(z.string()),
});
export type EnvironmentJobView = z.infer<typeof EnvironmentJobView>;

export const EnvironmentStatus = z.object({
  state: EnvironmentState,
  /** The ref and commit the environment was read from (the project's default ref). */
  ref: z.string(),
  commit: z.string().nullable(),
  /** Null when the state is `base`. */
  key: z.string().nullable(),
  devcontainer: z
    .object({
      path: z.string(),
      /** The image named by `image`, or the one `build.dockerfile` produces. */
      image: z.string().nullable(),
      setupCommands: z.array(z.string()),
      warnings: z.array(z.string()),
    })
    .nullable(),
  /** The latest preparation of these inputs, if any. */
  job: EnvironmentJobView.nullable(),
  /** One sentence for a person: what a session started now gets, or why it would be refused. */
  message: z.string(),
});
export type EnvironmentStatus = z.infer<typeof EnvironmentStatus>;

export const EnvironmentLog = z.object({
  jobId: z.string(),
  /** Log text from `offset` (bytes of UTF-8). */
  text: z.string(),
  offset: z.number().int().nonnegative(),
  nextOffset: z.number().int().nonnegative(),
  /** True once the job is over and the log will not grow. */
  complete: z.boolean(),
});
export type EnvironmentLog = z.infer<typeof EnvironmentLog>;
