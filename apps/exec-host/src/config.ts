import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { StartupError } from './errors';

export type Listen = { kind: 'tcp'; host: string; port: number } | { kind: 'socket'; path: string };

export interface ExecHostConfig {
  token: string;
  listen: Listen;
  image: string;
  seccompProfilePath: string;
  seccompSchemaPath: string;
  apparmorProfilePath: string;
  stateDir: string;
  /** Distinguishes this exec-host's containers from another one's on the same engine (label). */
  instance: string;
  maxSandboxes: number;
  reaperIntervalMs: number;
  /** A CA bundle (PEM) the set-up containers trust besides the image's, for mirrors behind a TLS-intercepting proxy. */
  egressCaBundle: string | null;
  /** Ready environments kept per project (the most recently used); older ones and their images are removed. */
  environmentsKept: number;
}

export const EXEC_HOST_CONFIG = Symbol('EXEC_HOST_CONFIG');
export const DEFAULT_IMAGE = 'lemniscate/sandbox:current';
const DEFAULT_PORT = 7071;
const MIN_TOKEN_LENGTH = 16;

/** The repository root, found from this file whether it runs from src (tests) or dist. */
export function repositoryRoot(): string {
  return path.resolve(__dirname, '..', '..', '..');
}

function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  return isRoot ? '/var/lib/lemniscate/exec-host' : path.join(env.HOME ?? os.homedir(), '.lemniscate', 'exec-host');
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): ExecHostConfig {
  const token = env.LEMNISCATE_EXEC_HOST_TOKEN ?? '';
  if (token.trim() === '') {
    throw new StartupError('The exec-host will not start without LEMNISCATE_EXEC_HOST_TOKEN: set it to the secret the gateway sends as its bearer token.');
  }
  if (token.length < MIN_TOKEN_LENGTH) {
    throw new StartupError(`The exec-host will not start with a LEMNISCATE_EXEC_HOST_TOKEN shorter than ${MIN_TOKEN_LENGTH} characters: use a long random secret.`);
  }
  let listen: Listen;
  if (env.LEMNISCATE_EXEC_HOST_SOCKET) {
    if (!path.isAbsolute(env.LEMNISCATE_EXEC_HOST_SOCKET)) {
      throw new StartupError('LEMNISCATE_EXEC_HOST_SOCKET must be an absolute path to the unix socket to create.');
    }
    listen = { kind: 'socket', path: env.LEMNISCATE_EXEC_HOST_SOCKET };
  } else {
    const raw = env.LEMNISCATE_EXEC_HOST_PORT ?? String(DEFAULT_PORT);
    const port = Number(raw);
    if (!/^\d+$/.test(raw) || port < 1 || port > 65535) {
      throw new StartupError(`LEMNISCATE_EXEC_HOST_PORT must be a port number between 1 and 65535, not "${raw}".`);
    }
    listen = { kind: 'tcp', host: '127.0.0.1', port };
  }
  const root = repositoryRoot();
  const seccompProfilePath = path.resolve(env.LEMNISCATE_SECCOMP_PROFILE ?? path.join(root, 'images/sandbox/seccomp.json'));
  const stateDir = path.resolve(env.LEMNISCATE_EXEC_HOST_STATE_DIR ?? defaultStateDir(env));
  const maxRaw = env.LEMNISCATE_EXEC_HOST_MAX_SANDBOXES ?? '50';
  const maxSandboxes = Number(maxRaw);
  if (!/^\d+$/.test(maxRaw) || maxSandboxes < 1) {
    throw new StartupError(`LEMNISCATE_EXEC_HOST_MAX_SANDBOXES must be a positive whole number, not "${maxRaw}".`);
  }
  const reaperRaw = env.LEMNISCATE_EXEC_HOST_REAPER_SECONDS ?? '30';
  const reaperSeconds = Number(reaperRaw);
  if (!/^\d+(\.\d+)?$/.test(reaperRaw) || reaperSeconds < 0.1 || reaperSeconds > 86_400) {
    throw new StartupError(`LEMNISCATE_EXEC_HOST_REAPER_SECONDS must be a number of seconds between 0.1 and 86400, not "${reaperRaw}".`);
  }
  const caBundle = env.LEMNISCATE_EGRESS_CA_BUNDLE?.trim() || null;
  if (caBundle !== null && !path.isAbsolute(caBundle)) throw new StartupError('LEMNISCATE_EGRESS_CA_BUNDLE must be an absolute path to a PEM file of CA certificates.');
  if (caBundle !== null && !existsSync(caBundle)) throw new StartupError(`LEMNISCATE_EGRESS_CA_BUNDLE names ${caBundle}, which does not exist.`);
  const keptRaw = env.LEMNISCATE_ENVIRONMENTS_KEPT ?? '2';
  const environmentsKept = Number(keptRaw);
  if (!/^\d+$/.test(keptRaw) || environmentsKept < 1 || environmentsKept > 100) {
    throw new StartupError(`LEMNISCATE_ENVIRONMENTS_KEPT must be a whole number between 1 and 100, not "${keptRaw}".`);
  }
  return {
    token,
    listen,
    image: env.LEMNISCATE_SANDBOX_IMAGE ?? DEFAULT_IMAGE,
    seccompProfilePath,
    seccompSchemaPath: path.resolve(env.LEMNISCATE_SECCOMP_SCHEMA ?? path.join(path.dirname(seccompProfilePath), 'seccomp.schema.json')),
    apparmorProfilePath: path.join(root, 'images/sandbox/apparmor/lemniscate-sandbox'),
    stateDir,
    instance: instanceLabel(stateDir),
    maxSandboxes,
    reaperIntervalMs: Math.round(reaperSeconds * 1000),
    egressCaBundle: caBundle,
    environmentsKept,
  };
}

/** A short stable name for the state directory: two exec-hosts never reap each other's sandboxes. */
export function instanceLabel(stateDir: string): string {
  return createHash('sha256').update(path.resolve(stateDir)).digest('hex').slice(0, 16);
}
