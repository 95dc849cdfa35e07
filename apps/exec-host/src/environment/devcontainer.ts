import { parse, printParseErrorCode, type ParseError } from 'jsonc-parser';
import * as path from 'node:path';

/**
 * The part of the devcontainer specification (containers.dev, JSON with comments) a Lemniscate
 * environment honours. Everything else is listed as a warning and ignored, never silently honoured:
 * an environment may add files to the sandbox image and set variables, never privileges, mounts,
 * ports or network.
 */

/** Where a repository's devcontainer definition is looked for, in this order (the specification's places). */
export const DEVCONTAINER_PATHS = ['.devcontainer/devcontainer.json', '.devcontainer.json'] as const;

/** One set-up command: a shell string, or an argument vector run without a shell. */
export type SetupCommand = { name: string; shell: string } | { name: string; argv: string[] };

export interface Devcontainer {
  /** The file it was read from, relative to the repository root. */
  path: string;
  /** `image`: a local image (it must derive from the sandbox image). */
  image: string | null;
  /** `build`: paths relative to the repository root. */
  build: { dockerfile: string; context: string; args: Record<string, string> } | null;
  containerEnv: Record<string, string>;
  /** onCreateCommand, updateContentCommand, postCreateCommand, in that order, each possibly several commands. */
  setup: SetupCommand[];
  warnings: string[];
}

export class DevcontainerError extends Error {}

const SETUP_KEYS = ['onCreateCommand', 'updateContentCommand', 'postCreateCommand'] as const;
/** Keys read for what they say, or harmless for a sandbox (names, editor settings). */
const HONOURED = new Set<string>(['image', 'build', 'containerEnv', ...SETUP_KEYS, 'name', '$schema']);
/** Keys that only concern an editor: ignored without a warning. */
const EDITOR_ONLY = new Set<string>(['customizations', 'extensions', 'settings', 'shutdownAction', 'waitFor']);
const BUILD_KEYS = new Set<string>(['dockerfile', 'context', 'args']);
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** Variables the exec-host sets itself for the set-up (the egress proxy, the CA bundle): a devcontainer cannot point them elsewhere. */
export const RESERVED_ENV = new Set<string>([
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'http_proxy',
  'https_proxy',
  'NO_PROXY',
  'no_proxy',
  'ALL_PROXY',
  'all_proxy',
  'npm_config_proxy',
  'npm_config_https_proxy',
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'PIP_CERT',
  'REQUESTS_CA_BUNDLE',
  'npm_config_cafile',
  'LEMNISCATE_SECCOMP_PROFILE',
  'PATH',
  'HOME',
  'LANG',
]);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A path of the devcontainer, relative to the file's directory, as a path inside the repository (never outside it). */
function repoPath(fileDir: string, p: string, what: string): string {
  const joined = path.posix.normalize(path.posix.join(fileDir, p));
  if (joined === '..' || joined.startsWith('../') || path.posix.isAbsolute(p)) throw new DevcontainerError(`${what} "${p}" points outside the repository.`);
  return joined === '' ? '.' : joined;
}

function setupCommands(key: string, value: unknown): SetupCommand[] {
  if (value === undefined) return [];
  if (typeof value === 'string') return value.trim() === '' ? [] : [{ name: key, shell: value }];
  if (Array.isArray(value)) {
    if (value.length === 0) return [];
    if (!value.every((v): v is string => typeof v === 'string')) throw new DevcontainerError(`${key}: an array must hold only strings (a program and its arguments).`);
    return [{ name: key, argv: value }];
  }
  if (isRecord(value)) {
    return Object.entries(value).flatMap(([name, v]) => setupCommands(`${key} ${name}`, v));
  }
  throw new DevcontainerError(`${key} must be a string, an array of strings or an object of named commands.`);
}

/** Reads a devcontainer definition; throws DevcontainerError with a sentence for anything unusable. */
export function parseDevcontainer(filePath: string, text: string): Devcontainer {
  const errors: ParseError[] = [];
  const doc: unknown = parse(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length > 0) {
    const first = errors[0]!;
    const line = text.slice(0, first.offset).split('\n').length;
    throw new DevcontainerError(`${filePath} is not valid JSON with comments: ${printParseErrorCode(first.error)} at line ${line}.`);
  }
  if (!isRecord(doc)) throw new DevcontainerError(`${filePath} must hold an object.`);
  const fileDir = path.posix.dirname(filePath);
  const warnings: string[] = [];
  for (const key of Object.keys(doc)) {
    if (HONOURED.has(key) || EDITOR_ONLY.has(key)) continue;
    warnings.push(`"${key}" is not supported here and was ignored.`);
  }
  let image: string | null = null;
  let build: Devcontainer['build'] = null;
  if (doc.image !== undefined) {
    if (typeof doc.image !== 'string' || doc.image.trim() === '') throw new DevcontainerError('"image" must name a local image.');
    image = doc.image.trim();
  }
  if (doc.build !== undefined) {
    if (!isRecord(doc.build)) throw new DevcontainerError('"build" must be an object with "dockerfile".');
    for (const key of Object.keys(doc.build)) if (!BUILD_KEYS.has(key)) warnings.push(`"build.${key}" is not supported here and was ignored.`);
    const { dockerfile, context, args } = doc.build;
    if (typeof dockerfile !== 'string' || dockerfile.trim() === '') throw new DevcontainerError('"build.dockerfile" must name a Dockerfile.');
    if (context !== undefined && typeof context !== 'string') throw new DevcontainerError('"build.context" must be a path.');
    const buildArgs: Record<string, string> = {};
    if (args !== undefined) {
      if (!isRecord(args)) throw new DevcontainerError('"build.args" must be an object of strings.');
      for (const [k, v] of Object.entries(args)) {
        if (typeof v !== 'string') throw new DevcontainerError(`"build.args.${k}" must be a string.`);
        buildArgs[k] = v;
      }
    }
    build = { dockerfile: repoPath(fileDir, dockerfile, '"build.dockerfile"'), context: repoPath(fileDir, context ?? '.', '"build.context"'), args: buildArgs };
  }
  if (image !== null && build !== null) throw new DevcontainerError('Give either "image" or "build", not both.');
  const containerEnv: Record<string, string> = {};
  if (doc.containerEnv !== undefined) {
    if (!isRecord(doc.containerEnv)) throw new DevcontainerError('"containerEnv" must be an object of strings.');
    for (const [k, v] of Object.entries(doc.containerEnv)) {
      if (!ENV_NAME.test(k)) throw new DevcontainerError(`"containerEnv": "${k}" is not a variable name.`);
      if (typeof v !== 'string') throw new DevcontainerError(`"containerEnv.${k}" must be a string.`);
      if (v.includes('\0')) throw new DevcontainerError(`"containerEnv.${k}" contains a NUL character.`);
      if (RESERVED_ENV.has(k)) {
        warnings.push(`"containerEnv.${k}" is set by the platform (the sandbox's fixed variables, the egress proxy, the CA bundle) and was ignored.`);
        continue;
      }
      containerEnv[k] = v;
    }
  }
  const setup = SETUP_KEYS.flatMap((key) => setupCommands(key, doc[key]));
  return { path: filePath, image, build, containerEnv, setup, warnings };
}

/** How a set-up command reads in a log or a status: its shell text, or its argument vector. */
export function describeCommand(c: SetupCommand): string {
  return 'shell' in c ? c.shell : c.argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}
