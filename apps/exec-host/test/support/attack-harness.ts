// The real exec-host, started as the gateway would find it: a built child process on a loopback
// port, spoken to over HTTP by the gateway's own client, every response validated by the contract's
// schemas. Nothing here imports the exec-host's sources: the battery attacks the service, not its classes.
import {
  ExecHostHealth,
  ExecHostRoutes,
  ExecResult,
  SandboxInfo,
  SandboxList,
  type CreateSandboxRequest,
  type ExecExit,
  type ExecRequest,
  type ExecStreamChunk,
  type SandboxRuntime,
} from '@lemniscate/contracts';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, rmdirSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { z } from 'zod';
import { ExecHostCallError } from '@lemniscate/gateway/src/exec-host/exec-host.port';
import { HttpExecHost, refusalOf } from '@lemniscate/gateway/src/exec-host/http-exec-host';

const execFileAsync = promisify(execFile);

/** How long the teardown waits for each sandbox's destroy (see `stop`). */
const TEARDOWN_DESTROY_MS = 120_000;

export const REPO_ROOT = resolve(__dirname, '../../../..');
const EXEC_HOST_DIR = join(REPO_ROOT, 'apps/exec-host');
const EXEC_HOST_BIN = join(EXEC_HOST_DIR, 'bin/lemni-exec-host.js');
export const RUNTIMES: readonly SandboxRuntime[] = ['runc', 'runsc'];

// ───────────────────────────── the images

/** A sandbox image under attack, and the build route that made it (S7). */
export interface SandboxImage {
  route: 'build-offline.sh' | 'Dockerfile';
  tag: string;
}

/**
 * The battery attacks cold sandboxes on the offline build's image and warm ones (made ahead in the
 * exec-host's pool, then taken) on the Dockerfile's: both kinds of start meet every attack, on both
 * runtimes, without running the battery twice per image.
 */
export function pooledRoute(image: SandboxImage): boolean {
  return image.route === 'Dockerfile';
}

/**
 * The images the battery attacks: always the offline build (LEMNISCATE_SANDBOX_IMAGE), and the
 * Dockerfile build when LEMNISCATE_SANDBOX_IMAGE_DOCKERFILE names it (`npm test` always does). Under
 * CI a missing Dockerfile image is an error, so a run can never pass having attacked one route only.
 */
export function sandboxImages(env: NodeJS.ProcessEnv = process.env): SandboxImage[] {
  const images: SandboxImage[] = [{ route: 'build-offline.sh', tag: env.LEMNISCATE_SANDBOX_IMAGE ?? 'lemniscate/sandbox:current' }];
  const dockerfile = env.LEMNISCATE_SANDBOX_IMAGE_DOCKERFILE;
  if (dockerfile) images.push({ route: 'Dockerfile', tag: dockerfile });
  else if (env.CI && env.CI !== 'false' && env.CI !== '0') {
    throw new Error(
      "LEMNISCATE_SANDBOX_IMAGE_DOCKERFILE is not set, so the sandbox image built from images/sandbox/Dockerfile would go unattacked: under CI the battery runs on the images of both build routes (`npm test` builds both; `node scripts/setup.mjs --tests` prints the Dockerfile image's tag).",
    );
  }
  return images;
}

export const SANDBOX_IMAGES: readonly SandboxImage[] = sandboxImages();

// ───────────────────────────── build

let built = false;

/**
 * `tsc -b` of the exec-host, once per Jest worker. Workers of the same run may build at the same
 * time; a directory lock (mkdir is atomic) keeps two compilers from writing dist/ together.
 */
export function buildExecHost(): void {
  if (built) return;
  const lock = join(tmpdir(), 'lemniscate-exec-host-build.lock');
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (Date.now() > deadline) throw new Error(`another build has held ${lock} for three minutes; remove it if no build is running`);
      // No event announces the end of another process's build; a short blocking wait is all there is.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', EXEC_HOST_DIR], { cwd: REPO_ROOT, stdio: 'pipe' });
    built = true;
  } catch (error) {
    const out = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`the exec-host does not build:\n${out.stdout?.toString() ?? ''}${out.stderr?.toString() ?? ''}`);
  } finally {
    rmdirSync(lock);
  }
}

// ───────────────────────────── client

export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body, or undefined when it is not JSON. */
  json: unknown;
}

export interface RawRequest {
  body?: unknown;
  /** A body sent exactly as given (for malformed JSON). */
  rawBody?: string;
  /** null sends no Authorization header; a string replaces the token. */
  token?: string | null;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/**
 * The gateway's own exec-host client (every answer checked against libs/contracts, a refusal thrown
 * as ExecHostCallError), plus what only the battery needs: raw requests, the calls the gateway never
 * makes (the health report, one sandbox, the list, the non-streaming exec), and the streamed exec's
 * output gathered.
 */
export class ExecHostClient extends HttpExecHost {
  constructor(
    readonly baseUrl: string,
    private readonly bearer: string,
  ) {
    super({ url: baseUrl, token: bearer });
  }

  async raw(method: string, route: string, init: RawRequest = {}): Promise<RawResponse> {
    const headers: Record<string, string> = { ...init.headers };
    const token = init.token === undefined ? this.bearer : init.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (init.rawBody !== undefined) {
      body = init.rawBody;
      headers['content-type'] ??= 'application/json';
    } else if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(this.baseUrl + route, { method, headers, body, signal: init.signal });
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  }

  private async call<T extends z.ZodType>(schema: T, method: string, route: string, body?: unknown): Promise<z.output<T>> {
    const res = await this.raw(method, route, { body });
    if (res.status !== 200) throw refusalOf(res.status, res.text);
    const parsed = schema.safeParse(res.json);
    if (!parsed.success) throw new Error(`${method} ${route} answered ${res.status} with a body outside the contract: ${parsed.error.message}\n${res.text.slice(0, 2000)}`);
    return parsed.data;
  }

  /** The whole health document (the gateway only reads whether it is ready). */
  healthReport() {
    return this.call(ExecHostHealth, 'GET', ExecHostRoutes.health());
  }
  get(id: string) {
    return this.call(SandboxInfo, 'GET', ExecHostRoutes.sandbox(id));
  }
  sandboxes() {
    return this.call(SandboxList, 'GET', ExecHostRoutes.sandboxes());
  }
  /** A command through the non-streaming form of exec. */
  run(id: string, req: ExecRequest) {
    return this.call(ExecResult, 'POST', `${ExecHostRoutes.exec(id)}?stream=false`, req);
  }

  /**
   * The streamed exec: `onChunk` sees every line as it arrives (so a test can act while the command
   * still runs); the promise resolves with the exit line and everything that came before it.
   */
  async execStream(id: string, req: ExecRequest, onChunk?: (chunk: ExecStreamChunk) => void): Promise<{ exit: ExecExit; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const exit = await this.exec(id, req, (chunk) => {
      if (chunk.type === 'stdout') stdout += chunk.data;
      else stderr += chunk.data;
      onChunk?.(chunk);
    });
    onChunk?.(exit);
    return { exit, stdout, stderr };
  }
}

/** Awaits a call that must be refused and returns the refusal, failing with what came instead. */
export async function refusal(call: Promise<unknown>): Promise<ExecHostCallError> {
  let value: unknown;
  try {
    value = await call;
  } catch (error) {
    if (error instanceof ExecHostCallError) return error;
    throw error;
  }
  throw new Error(`expected a refusal, the exec-host answered: ${JSON.stringify(value).slice(0, 1500)}`);
}

/** A message a person understands: words, not just the machine code. */
export function expectSentence(message: string, code?: string): void {
  expect(message).toMatch(/^\S+(\s+\S+)+$/);
  expect(message.length).toBeGreaterThanOrEqual(12);
  if (code) expect(message.trim()).not.toBe(code);
}

// ───────────────────────────── the exec-host process

export interface ExecHostProcess {
  client: ExecHostClient;
  baseUrl: string;
  port: number;
  token: string;
  stateDir: string;
  /** A value only the exec-host's environment holds; nothing in a sandbox may ever show it. */
  canary: { name: string; value: string };
  /** The environment the exec-host was started with (the host's own, plus ours). */
  env: NodeJS.ProcessEnv;
  /** Prefix of every session id this harness creates (to find its containers and only its containers). */
  sessionPrefix: string;
  /** The engine label of every container this exec-host makes (`lemniscate.exec-host`), warm ones included. */
  instance: string;
  /** True when its warm pool is on: every sandbox createSandbox returns was taken from the pool. */
  pooled: boolean;
  /** Resolves once the warm pool holds every sandbox it wants (at once when the pool is off). */
  poolFull(): Promise<void>;
  newSessionId(label: string): string;
  /** create, remembering the sandbox for teardown. */
  createSandbox(req: Omit<CreateSandboxRequest, 'sessionId'> & { sessionId?: string }, label?: string): Promise<z.output<typeof SandboxInfo>>;
  /** What the exec-host printed so far (shown when a test fails). */
  output(): string;
  /** SIGKILL, as a crash: nothing is cleaned; the next exec-host on the same state directory must. */
  crash(): Promise<void>;
  exited(): boolean;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Builds and starts the real exec-host on `image`; resolves once /v1/health answers 200. */
export async function startExecHost(image: SandboxImage, extraEnv: Record<string, string> = {}, options: { stateDir?: string } = {}): Promise<ExecHostProcess> {
  buildExecHost();
  if (!existsSync(EXEC_HOST_BIN)) throw new Error(`${EXEC_HOST_BIN} is missing: the exec-host has no command to start`);
  const token = randomBytes(32).toString('hex');
  const port = await freePort();
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'lemniscate-attacks-'));
  const canary = { name: 'LEMNISCATE_CANARY_SECRET', value: `canary-${randomBytes(16).toString('hex')}` };
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LEMNISCATE_EXEC_HOST_TOKEN: token,
    LEMNISCATE_EXEC_HOST_PORT: String(port),
    LEMNISCATE_EXEC_HOST_STATE_DIR: stateDir,
    LEMNISCATE_EXEC_HOST_WARM_POOL: '0',
    [canary.name]: canary.value,
    LEMNISCATE_SANDBOX_IMAGE: image.tag,
    ...extraEnv,
  };
  const child: ChildProcess = spawn(process.execPath, [EXEC_HOST_BIN], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let printed = '';
  const keep = (b: Buffer) => {
    printed += b.toString();
    if (printed.length > 200_000) printed = printed.slice(-100_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exitCode: number | null | undefined;
  let exitReason = '';
  const exitedPromise = new Promise<void>((res) =>
    child.once('exit', (code, signal) => {
      exitCode = code ?? (signal ? -1 : null);
      exitReason = signal ? `signal ${signal}` : `exit code ${code}`;
      res();
    }),
  );

  const baseUrl = `http://127.0.0.1:${port}`;
  const client = new ExecHostClient(baseUrl, token);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exitCode !== undefined) throw new Error(`the exec-host exited (${exitCode}) before answering /v1/health:\n${printed}`);
    try {
      const res = await client.raw('GET', ExecHostRoutes.health());
      if (res.status === 200) break;
      if (Date.now() > deadline) throw new Error(`/v1/health still answers ${res.status} after a minute: ${res.text}\n${printed}`);
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`the exec-host does not answer on ${baseUrl} after a minute (${String(error)}):\n${printed}`);
    }
    // The exec-host announces readiness only by answering; wait for its exit or a short tick.
    await Promise.race([exitedPromise, new Promise((r) => setTimeout(r, 100))]);
  }

  const sessionPrefix = `atk${randomBytes(4).toString('hex')}`;
  const instance = instanceOf(stateDir);
  const pooled = env.LEMNISCATE_EXEC_HOST_WARM_POOL !== '0';
  const poolFull = async () => {
    if (!pooled) return;
    const deadline = Date.now() + 120_000;
    for (;;) {
      const warm = (await client.healthReport()).warmPool;
      if (!warm) throw new Error('the exec-host reports no warm pool in its health document');
      if (warm.ready >= warm.target) return;
      if (Date.now() > deadline) throw new Error(`the warm pool is still not full after two minutes: ${JSON.stringify(warm)}\n${printed.slice(-3000)}`);
      // The pool announces nothing when a sandbox is ready; ask again shortly.
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const sandboxIds = new Set<string>();
  let counter = 0;
  const newSessionId = (label: string) => `${sessionPrefix}-${label.replace(/[^A-Za-z0-9_-]/g, '-')}-${counter++}`.slice(0, 64);

  return {
    client,
    baseUrl,
    port,
    token,
    stateDir,
    canary,
    env,
    sessionPrefix,
    instance,
    pooled,
    poolFull,
    newSessionId,
    async createSandbox(req, label = 'sandbox') {
      const sessionId = req.sessionId ?? newSessionId(label);
      await poolFull();
      let info = await client.create({ ...req, sessionId });
      sandboxIds.add(info.sandboxId);
      if (pooled && !info.pooled) {
        // The first request of a kind the pool does not keep yet (other limits): it keeps it from now
        // on. That cold sandbox goes, and the sandbox under attack is the warm one taken next.
        await client.destroy(info.sandboxId);
        sandboxIds.delete(info.sandboxId);
        await poolFull();
        info = await client.create({ ...req, sessionId });
        sandboxIds.add(info.sandboxId);
        if (!info.pooled)
          throw new Error(`the warm pool had no sandbox of this kind ready even after learning it: ${JSON.stringify(req.limits ?? {})} ${req.runtime ?? 'runc'}\n${printed.slice(-3000)}`);
      }
      return info;
    },
    output: () => printed,
    async crash() {
      child.kill('SIGKILL');
      await exitedPromise;
    },
    exited: () => exitCode !== undefined,
    async stop() {
      const problems: string[] = [];
      if (exitCode !== undefined) problems.push(`the exec-host ended on its own during the tests (${exitReason})`);
      if (exitCode === undefined) {
        // What is checked here is that nothing is left, not how fast: under gVisor, on a loaded machine,
        // the engine may take longer than the gateway's 30 s to end a sandbox that met a fork bomb (the
        // exec-host waits up to 60 s for its end before removing it). The destroys go together and each
        // may take up to TEARDOWN_DESTROY_MS; an answer other than 200 is a problem.
        await Promise.all(
          [...sandboxIds].map(async (id) => {
            try {
              const res = await client.raw('DELETE', ExecHostRoutes.sandbox(id), { signal: AbortSignal.timeout(TEARDOWN_DESTROY_MS) });
              if (res.status !== 200) problems.push(`destroying ${id}: HTTP ${res.status} ${res.text}`);
            } catch (error) {
              problems.push(`destroying ${id}: no answer within ${TEARDOWN_DESTROY_MS / 1000} s (${String(error)})`);
            }
          }),
        );
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
        await exitedPromise;
        clearTimeout(killer);
      }
      const left = await containersOf(sessionPrefix);
      // Warm sandboxes carry no session label: every container of this exec-host is found by its own.
      const instanceLeft = await containersOfInstance(instance);
      const mounts = mountsUnder(stateDir);
      // Leave nothing behind even when the checks below fail.
      for (const c of [...left, ...instanceLeft.map((id) => ({ id }))]) await execFileAsync('docker', ['rm', '-f', '-v', c.id]).catch(() => undefined);
      for (const m of mounts.reverse()) await execFileAsync('umount', ['-l', m]).catch(() => undefined);
      rmSync(stateDir, { recursive: true, force: true });
      if (left.length > 0) problems.push(`containers left after teardown: ${left.map((c) => `${c.id} (${c.session})`).join(', ')}`);
      if (instanceLeft.length > 0) problems.push(`containers of this exec-host (warm ones included) left after teardown: ${instanceLeft.join(', ')}`);
      if (mounts.length > 0) problems.push(`mounts left under the state directory: ${mounts.join(', ')}`);
      if (problems.length > 0) throw new Error(`${problems.join('\n')}\nexec-host output:\n${printed.slice(-5000)}`);
    },
  };
}

/**
 * One exec-host on `image` for the tests of the enclosing describe: started before them, handed to
 * `ready` (which may create sandboxes the tests share), stopped after them with the teardown checks.
 */
export function execHostFor(image: SandboxImage, ready: (host: ExecHostProcess) => void | Promise<void>): void {
  let started: ExecHostProcess | undefined;
  beforeAll(async () => {
    started = await startExecHost(image, pooledRoute(image) ? { LEMNISCATE_EXEC_HOST_WARM_POOL: '2' } : {});
    await ready(started);
  });
  afterAll(async () => {
    await started?.stop();
  }, TEARDOWN_DESTROY_MS + 60_000);
}

/**
 * The exec-host's engine label for a state directory (its `instanceLabel`), written out here because
 * the battery does not import the exec-host's sources: one exec-host per state directory.
 */
export function instanceOf(stateDir: string): string {
  return createHash('sha256').update(resolve(stateDir)).digest('hex').slice(0, 16);
}

/** Ids of every container of one exec-host instance (warm ones have no session label). */
export async function containersOfInstance(instance: string): Promise<string[]> {
  const { stdout } = await execFileAsync('docker', ['ps', '-a', '-q', '--no-trunc', '--filter', `label=lemniscate.exec-host=${instance}`]);
  return stdout.split('\n').filter(Boolean);
}

/** The container of one sandbox, warm or cold (found by its sandbox label), if the engine still has it. */
export async function containersOfSandbox(sandboxId: string): Promise<string[]> {
  const { stdout } = await execFileAsync('docker', ['ps', '-a', '-q', '--no-trunc', '--filter', `label=lemniscate.sandbox=${sandboxId}`]);
  return stdout.split('\n').filter(Boolean);
}

/** Containers of this harness still known to the engine (running or not). */
export async function containersOf(sessionPrefix: string): Promise<{ id: string; session: string }[]> {
  const { stdout } = await execFileAsync('docker', ['ps', '-a', '--filter', 'label=lemniscate.session', '--format', '{{.ID}} {{.Label "lemniscate.session"}}']);
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id = '', session = ''] = line.split(' ');
      return { id, session };
    })
    .filter((c) => c.session.startsWith(sessionPrefix));
}

function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1] ?? '')
    .map((p) => p.replace(/\\040/g, ' '))
    .filter((p) => p === dir || p.startsWith(dir + '/'));
}

// ───────────────────────────── the repository fixture

export interface RepoFixture {
  dir: string;
  /** Secret values committed in files the context exclusions must keep out. */
  secrets: { dotenv: string; token: string; rsa: string; pem: string; npmrc: string };
  /** Paths the default exclusions must leave out. */
  excludedPaths: string[];
  /** Ordinary files that must be present. */
  ordinaryPaths: string[];
  remove(): void;
}

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Fixture',
  GIT_AUTHOR_EMAIL: 'fixture@example.test',
  GIT_COMMITTER_NAME: 'Fixture',
  GIT_COMMITTER_EMAIL: 'fixture@example.test',
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: tmpdir(),
};

export function git(dir: string, ...args: string[]): string {
  return execFileSync('git', ['-C', dir, ...args], { env: { ...process.env, ...GIT_ENV }, encoding: 'utf8' });
}

/**
 * A git repository whose history holds secrets, as real ones often do: committed .env, keys,
 * certificates, credentials. The sandbox may receive the ordinary files only.
 */
export function repoFixture(): RepoFixture {
  const dir = mkdtempSync(join(tmpdir(), 'lemniscate-attack-repo-'));
  const secret = (what: string) => `${what}-${randomBytes(12).toString('hex')}`;
  const secrets = { dotenv: secret('dotenv'), token: secret('token'), rsa: secret('rsa'), pem: secret('pem'), npmrc: secret('npmrc') };
  const files: Record<string, string> = {
    'README.md': '# Fixture project\n\nOrdinary text.\n',
    'package.json': '{ "name": "fixture", "version": "1.0.0", "scripts": { "test": "node test.js" } }\n',
    'src/index.js': 'module.exports = (a, b) => a + b;\n',
    'src/util/strings.js': 'exports.upper = (s) => s.toUpperCase();\n',
    'test.js': "const add = require('./src/index.js');\nif (add(1, 2) !== 3) process.exit(1);\n",
    'notes/inside.txt': 'inside the working copy\n',
    '.env': `DATABASE_PASSWORD=${secrets.dotenv}\n`,
    'secrets/token.txt': `${secrets.token}\n`,
    id_rsa: `-----BEGIN OPENSSH PRIVATE KEY-----\n${secrets.rsa}\n-----END OPENSSH PRIVATE KEY-----\n`,
    'server.pem': `-----BEGIN PRIVATE KEY-----\n${secrets.pem}\n-----END PRIVATE KEY-----\n`,
    '.npmrc': `//registry.npmjs.org/:_authToken=${secrets.npmrc}\n`,
  };
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'fixture with committed secrets');
  return {
    dir,
    secrets,
    excludedPaths: ['.env', 'secrets/token.txt', 'id_rsa', 'server.pem', '.npmrc'],
    ordinaryPaths: ['README.md', 'package.json', 'src/index.js', 'src/util/strings.js', 'test.js', 'notes/inside.txt'],
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

// ───────────────────────────── probes run inside a sandbox

export interface ProbeResult {
  name: string;
  ok: boolean;
  /** Symbolic errno (EPERM, ENETUNREACH, EAI_AGAIN…) when the attempt failed with one. */
  errno?: string | null;
  message?: string;
  value?: unknown;
}

/**
 * Python run inside the sandbox before each probe program: `probe(name, fn)` prints one JSON line
 * with the outcome, `call(fn, *args)` calls libc and raises OSError with errno, `sys_call(nr, …)`
 * makes a raw system call by number.
 */
const PROBE_PRELUDE = String.raw`
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
GAI = {getattr(socket, n): n for n in dir(socket) if n.startswith('EAI_')}
def attempt(name, fn):
    try:
        v = fn()
        return {"name": name, "ok": True, "value": v if isinstance(v, (str, int, float, bool, list, dict, type(None))) else repr(v)}
    except socket.gaierror as e:
        return {"name": name, "ok": False, "errno": GAI.get(e.errno), "message": e.strerror}
    except OSError as e:
        return {"name": name, "ok": False, "errno": errno.errorcode.get(e.errno) if e.errno else None, "message": e.strerror or str(e)}
    except Exception as e:
        return {"name": name, "ok": False, "errno": None, "message": type(e).__name__ + ": " + str(e)}
def probe(name, fn):
    # Each attempt runs in its own child: one that succeeds (a namespace entered, a tracer
    # attached) must not change the conditions of the next.
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            print(json.dumps(attempt(name, fn)), flush=True)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, os.WUNTRACED)
    if os.WIFSTOPPED(status):
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print(json.dumps({"name": name, "ok": True, "value": "the attempt left the process stopped (traced)"}), flush=True)
def call(fname, *args):
    r = getattr(libc, fname)(*args)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
def sys_call(nr, *args):
    r = libc.syscall(nr, *args)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
MACHINE = os.uname().machine
`;

/** Runs a probe program (Python using the prelude) and returns its results by name. */
export async function runProbes(client: ExecHostClient, sandboxId: string, program: string, timeoutMs = 60_000): Promise<Record<string, ProbeResult>> {
  const script = PROBE_PRELUDE + '\n' + program;
  const marker = `PROBE_${randomBytes(6).toString('hex')}`;
  const result = await client.run(sandboxId, { command: `python3 - <<'${marker}'\n${script}\n${marker}\n`, timeoutMs });
  if (result.exitCode !== 0) throw new Error(`the probe program itself failed (exit ${result.exitCode}, class ${result.class}):\n${result.stderr}\n${result.stdout}`);
  const results: Record<string, ProbeResult> = {};
  for (const line of result.stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const parsed = JSON.parse(line) as ProbeResult;
    results[parsed.name] = parsed;
  }
  return results;
}

/** The probe must have failed with exactly this errno; the failure message shows what happened. */
export function expectRefused(results: Record<string, ProbeResult>, name: string, errno: string): void {
  const r = results[name];
  expect({ probe: name, ran: r !== undefined, ok: r?.ok, errno: r?.errno }).toEqual({ probe: name, ran: true, ok: false, errno });
}

// Containers, bombs and races take longer than Jest's five-second default.
jest.setTimeout(120_000);
