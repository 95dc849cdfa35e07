import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CreateSandboxRequest,
  type CreateSandboxRequestParsed,
  EnvironmentLogQuery,
  EnvironmentRequest,
  PrepareEnvironmentRequest,
  ReadFileRequest,
  RepositoryDirectoryRequest,
  type EnvironmentJobView,
  type EnvironmentLog,
  type EnvironmentRequestParsed,
  type EnvironmentState,
  type EnvironmentStatus,
  type SandboxInfo,
} from '@lemniscate/contracts';

/**
 * A loopback HTTP server speaking the exec-host's control API (libs/contracts/exec-host.ts) with its
 * bearer-token check, for the gateway's medium tests: health; sandboxes (create, destroy, patch) for a
 * session loop whose model does not run commands; and project environments as the exec-host keeps
 * them (S8): a state per project, preparations keyed by the hash of the inputs, joined while they
 * run, never retried after a failure without `force`, a log that grows as they go, and a sandbox
 * creation refused with `environment_not_ready` until the environment is ready. Requests are parsed
 * with the contract's schemas (a request the exec-host would refuse is answered 400 and recorded).
 */
export interface EnvironmentScenario {
  /** false: the repository has no `.devcontainer/devcontainer.json` (state `base`). */
  devcontainer: boolean;
  /** The hash of the current inputs; change it to play a changed lock file. */
  key: string;
  image: string;
  setupCommands: string[];
  warnings: string[];
  /** How a new preparation ends by itself after `durationMs`, or `manual`: when the test calls finishJob. */
  outcome: 'ready' | 'failed' | 'manual';
  durationMs: number;
  failMessage: string;
  /** Extra log text written when a preparation ends (to make a long log). */
  finalLog: string;
  /** A sentence: the devcontainer cannot be used (status and prepare answer 422 environment_invalid). */
  invalid: string | null;
  /** How long a prepare call waits before it answers, the job it began being visible to status reads meanwhile (a slow answer). */
  prepareAnswerDelayMs: number;
}

export interface DoubleJob {
  jobId: string;
  projectId: string;
  key: string;
  state: 'preparing' | 'ready' | 'failed';
  message: string | null;
  warnings: string[];
  startedAt: string;
  finishedAt: string | null;
  total: number;
  done: number;
  log: string;
}

export interface RecordedCall {
  method: string;
  path: string;
  body: unknown;
}

export interface ExecHostDouble {
  url: string;
  token: string;
  destroyed: string[];
  /** Every call, in order. */
  calls: RecordedCall[];
  /** The sandbox creations the double accepted or refused, as parsed. */
  creates: CreateSandboxRequestParsed[];
  /** Requests it answered 400 to (drift between the gateway and the contract). */
  invalid: RecordedCall[];
  jobs: Map<string, DoubleJob>;
  /** Sets (part of) a project's environment; the rest keeps its defaults (a devcontainer, ready by itself after 50 ms). */
  setEnvironment(projectId: string, scenario: Partial<EnvironmentScenario>): EnvironmentScenario;
  /** Ends a preparation now, as the exec-host would. */
  finishJob(jobId: string, outcome: 'ready' | 'failed', message?: string): void;
  /** Files of a repository directory, by `${source}\0${directory}`, for POST /v1/repository/directory. */
  directories: Map<string, { name: string; text: string }[]>;
  /** A sentence to refuse a directory read with (repository_not_found), or null to answer it. */
  directoryRefusal: ((req: RepositoryDirectoryRequest) => string | null) | null;
  /** Working-copy files by `${sandboxId}\0${path}`, read as the exec-host reads them (POST …/files/read). */
  files: Map<string, string>;
  /** Forgets a job (the exec-host's cache clean-up): its log answers job_not_found. */
  forgetJob(jobId: string): void;
  /** The latest job of a project's current key. */
  latestJob(projectId: string): DoubleJob | undefined;
  /** Runs before each sandbox creation is decided (to change a project's inputs under a starting session). */
  beforeCreate: ((request: CreateSandboxRequestParsed) => void) | null;
  close(): Promise<void>;
}

const HEX40 = 'a'.repeat(40);
const FINGERPRINT = `sha256:${'1'.repeat(64)}`;
/** The largest page of log the double answers, so the gateway's reading goes page by page. */
const LOG_PAGE_BYTES = 16 * 1024;

export async function startExecHostDouble(token = 'exec-host-test-token'): Promise<ExecHostDouble> {
  const destroyed: string[] = [];
  const calls: RecordedCall[] = [];
  const creates: CreateSandboxRequestParsed[] = [];
  const invalid: RecordedCall[] = [];
  const files = new Map<string, string>();
  const scenarios = new Map<string, EnvironmentScenario>();
  const jobs = new Map<string, DoubleJob>();
  const timers = new Set<NodeJS.Timeout>();
  let nextJob = 1;

  const scenarioOf = (projectId: string): EnvironmentScenario => scenarios.get(projectId) ?? { ...defaults(projectId), devcontainer: false };
  const latestJob = (projectId: string): DoubleJob | undefined => {
    const key = scenarioOf(projectId).key;
    return [...jobs.values()].filter((j) => j.key === key).at(-1);
  };

  const view = (job: DoubleJob): EnvironmentJobView => ({
    jobId: job.jobId,
    key: job.key,
    state: job.state,
    phase: job.state === 'preparing' ? 'setup' : 'done',
    progress: { done: job.done, total: job.total, label: job.state === 'preparing' ? `running ${job.done === 1 ? 'onCreateCommand' : 'postCreateCommand'}` : job.state },
    startedAt: job.startedAt,
    finishedAt: job.finishedAt,
    message: job.message,
    warnings: job.warnings,
  });

  function status(request: EnvironmentRequestParsed): EnvironmentStatus {
    const sc = scenarioOf(request.projectId);
    const ref = request.repository.ref ?? 'HEAD';
    if (!sc.devcontainer) {
      return { state: 'base', ref, commit: HEX40, key: null, devcontainer: null, job: null, message: 'The repository has no .devcontainer/devcontainer.json: sessions start from the sandbox image.' };
    }
    const job = latestJob(request.projectId);
    const state: EnvironmentState = job ? job.state : 'not_prepared';
    const message = {
      ready: `The environment is ready (image ${sc.image}): sessions start from it.`,
      preparing: 'The environment is being prepared for these inputs; sessions are refused until it is ready.',
      failed: `The last preparation of these inputs failed: ${job?.message ?? 'unknown'} Sessions are refused until one succeeds.`,
      not_prepared: 'The environment was never prepared for these inputs; sessions are refused until it is.',
      base: '',
    }[state];
    return {
      state,
      ref,
      commit: HEX40,
      key: sc.key,
      devcontainer: { path: '.devcontainer/devcontainer.json', image: sc.image, setupCommands: sc.setupCommands, warnings: sc.warnings },
      job: job ? view(job) : null,
      message,
    };
  }

  function finishJob(jobId: string, outcome: 'ready' | 'failed', message?: string): void {
    const job = jobs.get(jobId);
    if (!job || job.state !== 'preparing') return;
    const sc = scenarioOf(job.projectId);
    job.done = job.total;
    job.state = outcome;
    job.finishedAt = new Date().toISOString();
    job.message = outcome === 'ready' ? `Prepared ${sc.image} with ${sc.setupCommands.length} set-up command(s).` : (message ?? sc.failMessage);
    job.log += `${sc.finalLog}${outcome === 'ready' ? 'Snapshot taken; the environment is ready.\n' : `Failed: ${job.message}\n`}`;
  }

  function prepare(request: EnvironmentRequestParsed & { force: boolean }): EnvironmentStatus {
    const sc = scenarioOf(request.projectId);
    if (!sc.devcontainer) return status(request);
    const latest = latestJob(request.projectId);
    if (latest?.state === 'preparing') return status(request);
    if (latest && !request.force) return status(request);
    const job: DoubleJob = {
      jobId: `job-${nextJob++}`,
      projectId: request.projectId,
      key: sc.key,
      state: 'preparing',
      message: null,
      warnings: sc.warnings,
      startedAt: new Date().toISOString(),
      finishedAt: null,
      total: sc.setupCommands.length + 3,
      done: 1,
      log: `Reading .devcontainer/devcontainer.json at ${request.repository.ref ?? 'HEAD'}\nMirrors: ${request.mirrors.join(', ') || 'none'}\n${sc.setupCommands.map((c) => `$ ${c}\n`).join('')}`,
    };
    jobs.set(job.jobId, job);
    if (sc.outcome !== 'manual') {
      const outcome = sc.outcome;
      const timer = setTimeout(() => {
        timers.delete(timer);
        finishJob(job.jobId, outcome);
      }, sc.durationMs);
      timers.add(timer);
    }
    return status(request);
  }

  function logPage(jobId: string, offset: number): EnvironmentLog | undefined {
    const job = jobs.get(jobId);
    if (!job) return undefined;
    const bytes = Buffer.from(job.log, 'utf8');
    const from = Math.min(offset, bytes.length);
    let to = Math.min(bytes.length, from + LOG_PAGE_BYTES);
    while (to < bytes.length && ((bytes[to] as number) & 0xc0) === 0x80) to--;
    return { jobId, text: bytes.subarray(from, to).toString('utf8'), offset: from, nextOffset: to, complete: job.state !== 'preparing' && to === bytes.length };
  }

  const server: Server = createServer((req, res) => {
    void (async () => {
      const send = (statusCode: number, body: unknown) => {
        res.writeHead(statusCode, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      const body = await readJson(req);
      const url = new URL(req.url ?? '/', 'http://double');
      const call = { method: req.method ?? '', path: `${url.pathname}${url.search}`, body };
      calls.push(call);
      if (req.headers.authorization !== `Bearer ${token}`) return send(401, { code: 'unauthorized', message: 'A valid token is required.' });
      const refuse = (issues: string) => {
        invalid.push(call);
        send(400, { code: 'invalid_request', message: `The request is invalid: ${issues}` });
      };

      if (req.method === 'GET' && url.pathname === '/v1/health') {
        return send(200, {
          status: 'ok',
          engine: { reachable: true, version: '27.0' },
          runtimes: { runc: true, runsc: false },
          image: { name: 'lemniscate/sandbox', present: true },
          seccomp: { path: '/etc/lemniscate/seccomp.json', valid: true },
          apparmor: { state: 'unavailable', profile: 'lemniscate-sandbox' },
          diskCap: { mechanism: 'ext4-loop', available: true },
          cgroups: { layout: 'v2' },
          sandboxes: 0,
        });
      }
      if (req.method === 'POST' && url.pathname === '/v1/environments/status') {
        const parsed = EnvironmentRequest.safeParse(body);
        if (!parsed.success) return refuse(parsed.error.message);
        const unusable = scenarioOf(parsed.data.projectId).invalid;
        if (unusable) return send(422, { code: 'environment_invalid', message: unusable });
        return send(200, status(parsed.data));
      }
      if (req.method === 'POST' && url.pathname === '/v1/environments/prepare') {
        const parsed = PrepareEnvironmentRequest.safeParse(body);
        if (!parsed.success) return refuse(parsed.error.message);
        const unusable = scenarioOf(parsed.data.projectId).invalid;
        if (unusable) return send(422, { code: 'environment_invalid', message: unusable });
        const answer = prepare(parsed.data);
        const delay = scenarioOf(parsed.data.projectId).prepareAnswerDelayMs;
        if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
        return send(202, answer);
      }
      let m = /^\/v1\/environments\/jobs\/([^/]+)\/log$/.exec(url.pathname);
      if (req.method === 'GET' && m?.[1]) {
        const query = EnvironmentLogQuery.safeParse(Object.fromEntries(url.searchParams));
        if (!query.success) return refuse(query.error.message);
        const jobId = decodeURIComponent(m[1]);
        const page = logPage(jobId, query.data.offset);
        return page ? send(200, page) : send(404, { code: 'job_not_found', message: `There is no environment preparation ${jobId} on this exec-host.` });
      }
      if (req.method === 'POST' && url.pathname === '/v1/repository/directory') {
        const parsed = RepositoryDirectoryRequest.safeParse(body);
        if (!parsed.success) return refuse(parsed.error.message);
        const refusal = double.directoryRefusal?.(parsed.data);
        if (refusal) return send(400, { code: 'repository_not_found', message: refusal });
        const files = double.directories.get(`${parsed.data.repository.source}\0${parsed.data.directory}`) ?? [];
        return send(200, { commit: HEX40, files: files.filter((f) => f.name.endsWith(parsed.data.suffix)), skipped: [] });
      }
      if (req.method === 'POST' && url.pathname === '/v1/sandboxes') {
        const parsed = CreateSandboxRequest.safeParse(body);
        if (!parsed.success) return refuse(parsed.error.message);
        creates.push(parsed.data);
        double.beforeCreate?.(parsed.data);
        const environment = parsed.data.environment ? status(EnvironmentRequest.parse(parsed.data.environment)) : null;
        if (environment && environment.state !== 'ready' && environment.state !== 'base') {
          return send(409, { code: 'environment_not_ready', message: environment.message });
        }
        const now = Date.now();
        const info: SandboxInfo = {
          sandboxId: `sbx-${parsed.data.sessionId}`,
          sessionId: parsed.data.sessionId,
          runtime: parsed.data.runtime ?? 'runc',
          state: 'ready',
          baseCommit: HEX40,
          branch: 'main',
          includedUncommitted: false,
          fingerprint: FINGERPRINT,
          excluded: [],
          environment: environment ? { key: environment.key, image: environment.devcontainer?.image ?? 'lemniscate/sandbox' } : undefined,
          limits: { cpus: 1, memoryMb: 512, pids: 64, diskMb: 64, commandTimeoutSeconds: 60, outputCapBytes: 4096, lifetimeMinutes: 60 },
          createdAt: new Date(now).toISOString(),
          expiresAt: new Date(now + 3600_000).toISOString(),
        };
        return send(201, info);
      }
      m = /^\/v1\/sandboxes\/([^/]+)\/files\/read$/.exec(url.pathname);
      if (req.method === 'POST' && m?.[1]) {
        const parsed = ReadFileRequest.safeParse(body);
        if (!parsed.success) {
          invalid.push(call);
          return send(400, { code: 'invalid_request', message: parsed.error.message });
        }
        const text = files.get(`${decodeURIComponent(m[1])}\0${parsed.data.path}`);
        if (text === undefined) return send(404, { code: 'file_not_found', message: `${parsed.data.path} does not exist.` });
        // As the exec-host: every line ends with a newline, whatever the file's last line did.
        const lines = text.split('\n');
        if (lines[lines.length - 1] === '') lines.pop();
        const offset = parsed.data.offset ?? 0;
        const taken = lines.slice(offset, parsed.data.limit === undefined ? undefined : offset + parsed.data.limit);
        return send(200, {
          path: parsed.data.path,
          content: taken.map((l) => `${l}\n`).join(''),
          offset,
          lines: taken.length,
          totalLines: lines.length,
          size: Buffer.byteLength(text),
          truncated: offset + taken.length < lines.length,
        });
      }
      m = /^\/v1\/sandboxes\/([^/]+)\/patch$/.exec(url.pathname);
      if (req.method === 'GET' && m?.[1]) return send(200, { baseCommit: HEX40, patch: '', includedUncommitted: false, sessionPatch: '', fingerprint: FINGERPRINT });
      m = /^\/v1\/sandboxes\/([^/]+)$/.exec(url.pathname);
      if (req.method === 'DELETE' && m?.[1]) {
        const id = decodeURIComponent(m[1]);
        destroyed.push(id);
        return send(200, { sandboxId: id, destroyed: true });
      }
      return send(404, { code: 'internal', message: 'no such route' });
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const double: ExecHostDouble = {
    beforeCreate: null,
    directories: new Map(),
    directoryRefusal: null,
    files,
    url: `http://127.0.0.1:${port}`,
    token,
    destroyed,
    calls,
    creates,
    invalid,
    jobs,
    setEnvironment(projectId, scenario) {
      const next = { ...(scenarios.get(projectId) ?? defaults(projectId)), ...scenario };
      scenarios.set(projectId, next);
      return next;
    },
    finishJob,
    forgetJob: (jobId) => void jobs.delete(jobId),
    latestJob,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())));
    },
  };
  return double;
}

function defaults(projectId: string): EnvironmentScenario {
  return {
    devcontainer: true,
    key: `sha256:${Buffer.from(projectId).toString('hex').padEnd(64, '0').slice(0, 64)}`,
    image: 'mcr.microsoft.com/devcontainers/typescript-node:22',
    setupCommands: ['npm ci'],
    warnings: [],
    outcome: 'ready',
    durationMs: 50,
    failMessage: 'postCreateCommand "npm ci" exited with code 1.',
    finalLog: '',
    invalid: null,
    prepareAnswerDelayMs: 0,
  };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
