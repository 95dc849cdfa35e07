import { chmodSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse, stringify } from 'yaml';
import { z } from 'zod';
import { CliError } from '../errors';

const ProfileName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be letters, digits, ".", "-" or "_"');

const Profile = z
  .object({
    gateway: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }),
    token: z.string().min(1, 'must not be empty'),
    project: z.string().min(1).optional(),
  })
  .strict();
type Profile = z.infer<typeof Profile>;

export const CliConfig = z
  .object({
    profiles: z.record(ProfileName, Profile).default({}),
    defaultProfile: ProfileName.optional(),
    /** The developer's `execution:` settings (L5), sent with each session; the gateway validates them. */
    execution: z.record(z.string(), z.unknown()).optional(),
  })
  .strict()
  .refine((c) => c.defaultProfile === undefined || c.profiles[c.defaultProfile] !== undefined, {
    message: 'names a profile that is not defined under "profiles"',
    path: ['defaultProfile'],
  });
export type CliConfig = z.infer<typeof CliConfig>;

export type Env = Record<string, string | undefined>;

/** `~/.lemniscate/config.yaml`, where `~` is `$HOME` so tests and CI can point it elsewhere. */
export function configPath(env: Env): string {
  return join(env.HOME && env.HOME !== '' ? env.HOME : homedir(), '.lemniscate', 'config.yaml');
}

/**
 * Reads the configuration. A missing file is an empty configuration. The file holds API tokens, so
 * a file other users can write is refused (they could point the CLI at a gateway of their choosing),
 * and one they can read is used with a warning.
 */
export function loadConfig(path: string, warn: (line: string) => void): CliConfig {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: {} };
    throw new CliError(`Cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'}).`, 'config');
  }
  if ((mode & 0o022) !== 0) {
    throw new CliError(`Refusing to use ${path}: other users can modify it; run \`chmod 600 ${path}\` and check its content.`, 'config');
  }
  if ((mode & 0o044) !== 0) {
    warn(`Warning: ${path} holds API tokens and other users can read it; run \`chmod 600 ${path}\`.`);
  }
  let raw: unknown;
  try {
    raw = parse(readFileSync(path, 'utf8')) ?? {};
  } catch (error) {
    throw new CliError(`${path} is not valid YAML: ${(error as Error).message.split('\n')[0]}`, 'config');
  }
  const parsed = CliConfig.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.join('.') : '(top level)';
    throw new CliError(`${path} is not a valid configuration: ${where} ${issue?.message ?? 'is invalid'}.`, 'config');
  }
  return parsed.data;
}

/** Writes atomically with mode 600 in a directory with mode 700: the file holds secrets. */
export function saveConfig(path: string, config: CliConfig): void {
  const valid = CliConfig.parse(config);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, stringify(valid), { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export interface ConnectionFlags {
  profile?: string | undefined;
  gateway?: string | undefined;
  token?: string | undefined;
  project?: string | undefined;
}

export interface Connection {
  gateway: string;
  token: string | undefined;
  project: string | undefined;
  /** The profile the values came from, when one was used. */
  profile: string | undefined;
}

function normaliseGateway(url: string, source: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`The gateway URL from ${source} is not a URL: "${url}" (expected e.g. http://127.0.0.1:7070).`, 'usage');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new CliError(`The gateway URL from ${source} must start with http:// or https:// (got "${url}").`, 'usage');
  }
  return url.replace(/\/+$/, '');
}

/** Flags win over the environment, which wins over the profile (`--profile`, else the default profile). */
export function resolveConnection(flags: ConnectionFlags, env: Env, config: CliConfig, path: string): Connection {
  const profileName = flags.profile ?? env.LEMNISCATE_PROFILE ?? config.defaultProfile;
  let profile: Profile | undefined;
  if (profileName !== undefined) {
    profile = config.profiles[profileName];
    if (!profile) {
      const known = Object.keys(config.profiles);
      throw new CliError(`No profile named "${profileName}" in ${path}; ${known.length > 0 ? `known profiles: ${known.join(', ')}` : 'run `lemni login` to create one'}.`, 'config');
    }
  }
  const pick = (flag: string | undefined, envName: string, fromProfile: string | undefined): [string | undefined, string] => {
    if (flag !== undefined && flag !== '') return [flag, 'the command line'];
    const fromEnv = env[envName];
    if (fromEnv !== undefined && fromEnv !== '') return [fromEnv, envName];
    return [fromProfile, `profile "${profileName}" in ${path}`];
  };
  const [gateway, gatewaySource] = pick(flags.gateway, 'LEMNISCATE_GATEWAY', profile?.gateway);
  if (gateway === undefined) {
    throw new CliError('No gateway configured: run `lemni login`, pass --gateway URL, or set LEMNISCATE_GATEWAY.', 'config');
  }
  const [token] = pick(flags.token, 'LEMNISCATE_TOKEN', profile?.token);
  const [project] = pick(flags.project, 'LEMNISCATE_PROJECT', profile?.project);
  return { gateway: normaliseGateway(gateway, gatewaySource), token, project, profile: profileName };
}

/** Adds or replaces a profile; the first profile saved becomes the default. */
export function withProfile(config: CliConfig, name: string, profile: Profile, makeDefault: boolean): CliConfig {
  const profiles = { ...config.profiles, [name]: Profile.parse(profile) };
  const defaultProfile = makeDefault || config.defaultProfile === undefined ? name : config.defaultProfile;
  return { ...config, profiles, defaultProfile };
}
