import { ExecHostAddress, ExecHostId } from '@lemniscate/contracts';
import { createHash, X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createSecureContext } from 'node:tls';
import { z } from 'zod';
import { DEFAULT_MEMORY_FLOOR_PERCENT, defaultMaxSandboxes, MAX_SANDBOXES_LIMIT, readHostResources, type CapacitySource } from './capacity';
import { StartupError } from './errors';

export type Listen = { kind: 'tcp'; host: string; port: number } | { kind: 'socket'; path: string };

/** Mutual TLS of the control channel (PEM read from the files at start). */
export interface ExecHostTls {
  cert: string;
  key: string;
  /** The CA client certificates must be signed by. */
  clientCa: string;
  /** The common names a client certificate may carry (LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES). */
  clientNames: string[];
}

/** Registration with a pool gateway (LEMNISCATE_GATEWAY_URL), null without it. */
export interface ExecHostRegistration {
  gatewayUrl: string;
  id: string;
  /** Where the gateway calls this exec-host. */
  address: string;
  heartbeatMs: number;
  /** A CA (PEM) to verify an https gateway with, besides the system's. */
  gatewayCa: string | null;
}

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
  /** The cap on live sandboxes: LEMNISCATE_EXEC_HOST_MAX_SANDBOXES, else computed at start from the host (capacity.ts). */
  maxSandboxes: number;
  /** Sandboxes made ahead of their sessions (LEMNISCATE_EXEC_HOST_WARM_POOL, _WARM_RUNTIMES). */
  warmPool: WarmPoolConfig;
  maxSandboxesFrom: CapacitySource;
  /** New sandboxes are refused while the host's available memory is below this share of its total (0: never). */
  memoryFloorPercent: number;
  /** Where the kernel's /proc is read for the capacity checks ("/proc"; tests: a tree of their own). */
  procRoot: string;
  reaperIntervalMs: number;
  /** A CA bundle (PEM) the set-up containers trust besides the image's, for mirrors behind a TLS-intercepting proxy. */
  egressCaBundle: string | null;
  /** Ready environments kept per project (the most recently used); older ones and their images are removed. */
  environmentsKept: number;
  /** How containers' cgroups are reached (LEMNISCATE_CGROUP_LAYOUT): the layout the host has, or one forced. */
  cgroupLayout: CgroupLayoutSetting;
  /** Commands through each sandbox's runner (LEMNISCATE_SANDBOX_RUNNER=on, the default) or an engine exec each (off). */
  commandRunner: boolean;
  /** Mutual TLS of the control channel; null: plain HTTP on loopback or the unix socket. */
  tls: ExecHostTls | null;
  registration: ExecHostRegistration | null;
}

export interface WarmPoolConfig {
  /** Warm sandboxes kept per kind (image, runtime, resource profile); 0 disables the pool. */
  size: number;
  /** The runtimes whose sandbox-image kind is kept warm from start-up; other kinds once asked for. */
  runtimes: ('runc' | 'runsc')[];
  /** Kinds kept warm at once (the most recently asked for). */
  maxKeys: number;
  /** A kind nobody asked for in this long is no longer kept warm. */
  idleKeyMinutes: number;
  /** A warm sandbox older than this is replaced. */
  maxAgeMinutes: number;
  /** No warm sandbox is made while the host has less than this fraction of its memory available. */
  memoryFloor: number;
  /** How often, at most, the ref of a repository kept checked out ahead is read for a new commit. */
  refCheckSeconds: number;
}

export const DEFAULT_WARM_POOL = 2;
const MAX_WARM_POOL = 64;

export const CgroupLayoutSetting = z.enum(['auto', 'v1', 'v2', 'engine']);
export type CgroupLayoutSetting = z.infer<typeof CgroupLayoutSetting>;

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

export interface LoadConfigOptions {
  /** Where the kernel's /proc is, for the host's memory and process ids ("/proc"; tests: a tree of their own). */
  procRoot?: string;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: LoadConfigOptions = {}): ExecHostConfig {
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
    const host = env.LEMNISCATE_EXEC_HOST_BIND ?? '127.0.0.1';
    if (net.isIP(host) === 0) {
      throw new StartupError(`LEMNISCATE_EXEC_HOST_BIND must be an IP address to listen on (127.0.0.1, 0.0.0.0, ::, or one of this machine's), not "${host}".`);
    }
    listen = { kind: 'tcp', host, port };
  }
  const tls = loadTls(env);
  if (tls && listen.kind === 'socket') {
    throw new StartupError(
      'LEMNISCATE_EXEC_HOST_TLS_* apply to a TCP address, and LEMNISCATE_EXEC_HOST_SOCKET is set: a unix socket is reached only on this machine, its mode 600 protects it; unset one of them.',
    );
  }
  if (!tls && listen.kind === 'tcp' && !isLoopback(listen.host)) {
    throw new StartupError(
      `The exec-host will not listen on ${listen.host} (LEMNISCATE_EXEC_HOST_BIND) without mutual TLS: set LEMNISCATE_EXEC_HOST_TLS_CERT, LEMNISCATE_EXEC_HOST_TLS_KEY and LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA, or bind 127.0.0.1.`,
    );
  }
  const root = repositoryRoot();
  const seccompProfilePath = path.resolve(env.LEMNISCATE_SECCOMP_PROFILE ?? path.join(root, 'images/sandbox/seccomp.json'));
  const stateDir = path.resolve(env.LEMNISCATE_EXEC_HOST_STATE_DIR ?? defaultStateDir(env));
  const floorRaw = env.LEMNISCATE_EXEC_HOST_MEMORY_FLOOR_PERCENT ?? String(DEFAULT_MEMORY_FLOOR_PERCENT);
  const memoryFloorPercent = Number(floorRaw);
  if (!/^\d+$/.test(floorRaw) || memoryFloorPercent > 90) {
    throw new StartupError(`LEMNISCATE_EXEC_HOST_MEMORY_FLOOR_PERCENT must be a whole percentage between 0 (no floor) and 90, not "${floorRaw}".`);
  }
  const procRoot = options.procRoot ?? '/proc';
  const maxRaw = env.LEMNISCATE_EXEC_HOST_MAX_SANDBOXES;
  let maxSandboxes: number;
  let maxSandboxesFrom: CapacitySource;
  if (maxRaw === undefined || maxRaw.trim() === '') {
    ({ max: maxSandboxes, from: maxSandboxesFrom } = defaultMaxSandboxes(readHostResources(procRoot), memoryFloorPercent));
  } else {
    maxSandboxes = Number(maxRaw);
    maxSandboxesFrom = 'setting';
    if (!/^\d+$/.test(maxRaw) || maxSandboxes < 1 || maxSandboxes > MAX_SANDBOXES_LIMIT) {
      throw new StartupError(`LEMNISCATE_EXEC_HOST_MAX_SANDBOXES must be a whole number between 1 and ${MAX_SANDBOXES_LIMIT}, or unset to compute it from this host, not "${maxRaw}".`);
    }
  }
  const warmRaw = env.LEMNISCATE_EXEC_HOST_WARM_POOL ?? String(DEFAULT_WARM_POOL);
  const warmSize = Number(warmRaw);
  if (!/^\d+$/.test(warmRaw) || warmSize > MAX_WARM_POOL) {
    throw new StartupError(`LEMNISCATE_EXEC_HOST_WARM_POOL must be the number of warm sandboxes kept per kind, a whole number from 0 (no pool) to ${MAX_WARM_POOL}, not "${warmRaw}".`);
  }
  const warmRuntimesRaw = env.LEMNISCATE_EXEC_HOST_WARM_RUNTIMES ?? 'runc,runsc';
  const warmRuntimes = warmRuntimesRaw
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean);
  const badRuntime = warmRuntimes.find((r) => r !== 'runc' && r !== 'runsc');
  if (badRuntime !== undefined) {
    throw new StartupError(`LEMNISCATE_EXEC_HOST_WARM_RUNTIMES lists runtimes kept warm from start-up, separated by commas (runc, runsc, or empty for none), not "${badRuntime}".`);
  }
  const refCheckRaw = env.LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS ?? '10';
  const refCheckSeconds = Number(refCheckRaw);
  if (!/^\d+(\.\d+)?$/.test(refCheckRaw) || refCheckSeconds < 0.5 || refCheckSeconds > 86_400) {
    throw new StartupError(
      `LEMNISCATE_EXEC_HOST_WARM_REF_CHECK_SECONDS must be how often, in seconds, the ref of a repository kept checked out ahead is read for a new commit, a number between 0.5 and 86400, not "${refCheckRaw}".`,
    );
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
  const layout = CgroupLayoutSetting.safeParse(env.LEMNISCATE_CGROUP_LAYOUT ?? 'auto');
  if (!layout.success) {
    throw new StartupError(`LEMNISCATE_CGROUP_LAYOUT must be auto (the layout this host has), v1, v2 or engine (the container engine only), not "${env.LEMNISCATE_CGROUP_LAYOUT}".`);
  }
  const runnerSetting = env.LEMNISCATE_SANDBOX_RUNNER ?? 'on';
  if (runnerSetting !== 'on' && runnerSetting !== 'off') {
    throw new StartupError(`LEMNISCATE_SANDBOX_RUNNER must be on (commands through each sandbox's runner) or off (an engine exec per command), not "${runnerSetting}".`);
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
    warmPool: { size: warmSize, runtimes: [...new Set(warmRuntimes)] as ('runc' | 'runsc')[], maxKeys: 8, idleKeyMinutes: 30, maxAgeMinutes: 60, memoryFloor: 0.2, refCheckSeconds },
    maxSandboxesFrom,
    memoryFloorPercent,
    procRoot,
    reaperIntervalMs: Math.round(reaperSeconds * 1000),
    egressCaBundle: caBundle,
    environmentsKept,
    cgroupLayout: layout.data,
    commandRunner: runnerSetting === 'on',
    tls,
    registration: loadRegistration(env, listen, tls),
  };
}

const TLS_FILES = [
  ['LEMNISCATE_EXEC_HOST_TLS_CERT', 'its certificate'],
  ['LEMNISCATE_EXEC_HOST_TLS_KEY', 'its private key'],
  ['LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA', "the CA of the gateway's client certificates"],
] as const;

/** The common name of the gateway's client certificate (deploy/certs/make-certs.sh). */
export const DEFAULT_CLIENT_NAME = 'lemniscate-gateway';

/** A PEM file named by `variable`, read now: a sentence naming the variable when it cannot be. */
export function readPemFile(variable: string, file: string): string {
  if (!path.isAbsolute(file)) throw new StartupError(`${variable} must be an absolute path to a PEM file, not "${file}".`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new StartupError(`${variable} names ${file}, which cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}).`);
  }
  if (!text.includes('-----BEGIN ')) throw new StartupError(`${variable} names ${file}, which is not a PEM file.`);
  return text;
}

function loadTls(env: NodeJS.ProcessEnv): ExecHostTls | null {
  const given = TLS_FILES.filter(([v]) => (env[v] ?? '').trim() !== '');
  if (given.length === 0) {
    if (env.LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES)
      throw new StartupError('LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES is set without LEMNISCATE_EXEC_HOST_TLS_CERT, _KEY and _CLIENT_CA: client names apply only to mutual TLS.');
    return null;
  }
  if (given.length < TLS_FILES.length) {
    const missing = TLS_FILES.filter(([v]) => !given.some(([g]) => g === v)).map(([v, what]) => `${v} (${what})`);
    throw new StartupError(`Mutual TLS needs all three of LEMNISCATE_EXEC_HOST_TLS_CERT, LEMNISCATE_EXEC_HOST_TLS_KEY and LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA; missing: ${missing.join(', ')}.`);
  }
  const [cert, key, clientCa] = TLS_FILES.map(([v]) => readPemFile(v, env[v]!.trim())) as [string, string, string];
  for (const [variable, pem] of [
    ['LEMNISCATE_EXEC_HOST_TLS_CERT', cert],
    ['LEMNISCATE_EXEC_HOST_TLS_CLIENT_CA', clientCa],
  ] as const) {
    try {
      new X509Certificate(pem);
    } catch (e) {
      throw new StartupError(`${variable} names ${env[variable]}, which holds no readable certificate (${(e as Error).message}).`);
    }
  }
  try {
    createSecureContext({ cert, key, ca: clientCa });
  } catch (e) {
    throw new StartupError(
      `LEMNISCATE_EXEC_HOST_TLS_KEY (${env.LEMNISCATE_EXEC_HOST_TLS_KEY}) is not the private key of LEMNISCATE_EXEC_HOST_TLS_CERT (${env.LEMNISCATE_EXEC_HOST_TLS_CERT}): ${(e as Error).message}.`,
    );
  }
  const rawNames = env.LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES ?? DEFAULT_CLIENT_NAME;
  const clientNames = rawNames
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  if (clientNames.length === 0 || clientNames.some((n) => !/^[A-Za-z0-9._-]{1,64}$/.test(n))) {
    throw new StartupError(`LEMNISCATE_EXEC_HOST_TLS_CLIENT_NAMES must be a comma-separated list of certificate common names (letters, digits, ".", "_", "-"), not "${rawNames}".`);
  }
  return { cert, key, clientCa, clientNames };
}

/** True for an address only this machine reaches: 127.0.0.0/8, ::1 and IPv4-mapped loopback. */
export function isLoopback(address: string): boolean {
  const a = address.replace(/^\[|\]$/g, '').toLowerCase();
  if (a === 'localhost' || a === '::1') return true;
  const v4 = a.startsWith('::ffff:') ? a.slice(7) : a;
  return net.isIPv4(v4) && v4.startsWith('127.');
}

/** A pool name from the machine's host name: lower case, anything else than letters and digits a "-". */
export function idFromHostname(hostname: string): string {
  const id = hostname
    .toLowerCase()
    .split('.')[0]!
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .slice(0, 63)
    .replace(/^-+|-+$/g, '');
  return ExecHostId.safeParse(id).success ? id : 'exec-host';
}

function loadRegistration(env: NodeJS.ProcessEnv, listen: Listen, tls: ExecHostTls | null): ExecHostRegistration | null {
  const rawId = env.LEMNISCATE_EXEC_HOST_ID;
  if (rawId !== undefined && !ExecHostId.safeParse(rawId).success) {
    throw new StartupError(`LEMNISCATE_EXEC_HOST_ID must be a lower-case DNS name (labels of 1–63 letters, digits or "-", not at either end, joined by "."), not "${rawId}".`);
  }
  const id = rawId ?? idFromHostname(os.hostname());
  const rawAddress = env.LEMNISCATE_EXEC_HOST_ADVERTISE_URL?.replace(/\/+$/, '');
  if (rawAddress !== undefined && !ExecHostAddress.safeParse(rawAddress).success) {
    throw new StartupError(
      `LEMNISCATE_EXEC_HOST_ADVERTISE_URL must be an https:// or http:// origin without a path (https://exec-1.example:7071) or unix:/absolute/path.sock, not "${env.LEMNISCATE_EXEC_HOST_ADVERTISE_URL}".`,
    );
  }
  const address = rawAddress ?? defaultAddress(listen, tls);
  const beatRaw = env.LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS ?? '5';
  const beat = Number(beatRaw);
  if (!/^\d+$/.test(beatRaw) || beat < 1 || beat > 300) {
    throw new StartupError(`LEMNISCATE_EXEC_HOST_HEARTBEAT_SECONDS must be a whole number of seconds between 1 and 300, not "${beatRaw}".`);
  }
  const caPath = env.LEMNISCATE_GATEWAY_CA?.trim() || null;
  const gatewayCa = caPath === null ? null : readPemFile('LEMNISCATE_GATEWAY_CA', caPath);
  const rawGateway = env.LEMNISCATE_GATEWAY_URL?.trim();
  if (!rawGateway) {
    if (caPath !== null) throw new StartupError('LEMNISCATE_GATEWAY_CA is set without LEMNISCATE_GATEWAY_URL: it verifies the gateway this exec-host registers with.');
    return null;
  }
  let url: URL;
  try {
    url = new URL(rawGateway);
  } catch {
    throw new StartupError(`LEMNISCATE_GATEWAY_URL must be the gateway's http:// or https:// URL (https://lemniscate.example), not "${rawGateway}".`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.search || url.hash || url.username || url.password) {
    throw new StartupError(`LEMNISCATE_GATEWAY_URL must be the gateway's http:// or https:// URL without credentials, query or fragment (https://lemniscate.example), not "${rawGateway}".`);
  }
  if (gatewayCa && url.protocol !== 'https:') throw new StartupError(`LEMNISCATE_GATEWAY_CA is set but LEMNISCATE_GATEWAY_URL (${rawGateway}) is not https://: the CA verifies an https gateway.`);
  return { gatewayUrl: rawGateway.replace(/\/+$/, ''), id, address, heartbeatMs: beat * 1000, gatewayCa };
}

function defaultAddress(listen: Listen, tls: ExecHostTls | null): string {
  if (listen.kind === 'socket') return `unix:${listen.path}`;
  const host = tls ? os.hostname().toLowerCase() : listen.host.includes(':') ? `[${listen.host}]` : listen.host;
  return `${tls ? 'https' : 'http'}://${host}:${listen.port}`;
}

/** A short stable name for the state directory: two exec-hosts never reap each other's sandboxes. */
export function instanceLabel(stateDir: string): string {
  return createHash('sha256').update(path.resolve(stateDir)).digest('hex').slice(0, 16);
}
