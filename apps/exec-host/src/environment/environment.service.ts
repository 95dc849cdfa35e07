import {
  DEFAULT_SANDBOX_LIMITS,
  type EnvironmentJobView,
  type EnvironmentLog,
  type EnvironmentPhase,
  type EnvironmentRequestParsed,
  type EnvironmentStatus,
  type PrepareEnvironmentRequestParsed,
  type RepositoryDirectory,
  type RepositoryDirectoryRequestParsed,
  type SandboxLimits,
} from '@lemniscate/contracts';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { ExecHostConfig } from '../config';
import { LABEL_INSTANCE, LABEL_MANAGED, LABEL_SANDBOX, RUNSC_SETUP_RUNTIME, SANDBOX_GID, SANDBOX_UID, WORKSPACE_DIR, type SandboxDriver } from '../driver/sandbox.driver';
import { ExecHostError } from '../errors';
import { loadSeccompProfile } from '../seccomp';
import { createDisk, destroyDisk } from '../workspace/disk';
import { gitText, runGit, type GitRepo } from '../workspace/git';
import { resolveSource, WorkingCopy } from '../workspace/working-copy';
import { describeCommand, type Devcontainer, type SetupCommand } from './devcontainer';
import { FORWARDER_SCRIPT, mirrorsOf, startEgressProxy } from './egress-proxy';
import { environmentKey, fetchDefaultRef, readInputs, readTreeDirectory, remoteCommit, type EnvironmentInputs } from './inputs';

/** The label every environment image carries, with its key. */
export const LABEL_ENVIRONMENT = 'lemniscate.environment';
const PROXY_PORT = 3128;
const RUN_DIR = '/run/lemniscate';
const LOG_CAP_BYTES = 4 * 1024 * 1024;
const TMPFS_BYTES = 256 * 1024 * 1024;
/** Days a preparation's record and log stay on the exec-host. */
export const JOB_RECORD_DAYS = 30;

/** A prepared environment, as kept on disk beside its dependency snapshot. */
interface PreparedMeta {
  key: string;
  projectId: string;
  state: 'ready' | 'failed';
  /** The image sessions start from: an id, never a tag another build could move. */
  imageId: string | null;
  /** The tag the build gave it (removed with the environment); null for `image` or the sandbox image. */
  builtTag: string | null;
  imageName: string;
  containerEnv: Record<string, string>;
  /** Paths of the working copy the set-up created (dependencies); restored into each session, kept out of its diff. */
  snapshotPaths: string[];
  warnings: string[];
  jobId: string;
  message: string;
  preparedAt: string;
  lastUsedAt: string;
}

interface Job {
  view: EnvironmentJobView;
  projectId: string;
  logPath: string;
  logBytes: number;
  /** Appends in order: every write waits for the one before. */
  logChain: Promise<void>;
  done: Promise<void>;
}

/** The length of the longest prefix of `buf` that does not end inside a UTF-8 character. */
export function completeUtf8(buf: Buffer): number {
  let i = buf.length;
  let continuation = 0;
  while (i > 0 && continuation < 3 && (buf[i - 1]! & 0xc0) === 0x80) {
    i--;
    continuation++;
  }
  if (i === 0) return buf.length;
  const lead = buf[i - 1]!;
  const needs = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return needs === continuation + 1 ? buf.length : needs === 1 ? buf.length : i - 1;
}

/** What a session's sandbox starts from. */
export interface SandboxEnvironment {
  key: string | null;
  image: string;
  env: string[];
  /** The dependency snapshot to restore into the working copy, and the paths to keep out of its diff. */
  snapshot: { tarPath: string; paths: string[] } | null;
}

/** The set-up's proxy and CA variables: every common tool reads one of them. */
function egressEnv(caBundle: string | null): string[] {
  const proxy = `http://127.0.0.1:${PROXY_PORT}`;
  const env = [`HTTP_PROXY=${proxy}`, `HTTPS_PROXY=${proxy}`, `http_proxy=${proxy}`, `https_proxy=${proxy}`, 'NO_PROXY=', 'no_proxy=', `npm_config_proxy=${proxy}`, `npm_config_https_proxy=${proxy}`];
  if (caBundle) {
    const ca = `${RUN_DIR}/ca.pem`;
    env.push(`NODE_EXTRA_CA_CERTS=${ca}`, `SSL_CERT_FILE=${ca}`, `PIP_CERT=${ca}`, `REQUESTS_CA_BUNDLE=${ca}`, `npm_config_cafile=${ca}`);
  }
  return env;
}

function now(): string {
  return new Date().toISOString();
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function commandText(c: SetupCommand): string {
  return 'shell' in c ? c.shell : c.argv.map(shellQuote).join(' ');
}

function run(cmd: string, args: string[], opts: { uid?: number; gid?: number; cwd?: string; stdin?: number } = {}): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    // libuv changes directory before it drops to uid/gid: a directory the user could not reach is fine.
    const child = spawn(cmd, args, { cwd: opts.cwd, uid: opts.uid, gid: opts.gid, stdio: [opts.stdin ?? 'ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-4000)));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stderr }));
  });
}

/**
 * Project environments on this exec-host: reading a repository's devcontainer at its default ref,
 * preparing it once per inputs (image, then set-up commands in a hardened container whose only way
 * out is the egress proxy to the project's mirrors, then a snapshot of what the set-up created), and
 * handing sessions what they start from. Prepared environments live under `<state>/environments`.
 */
export class EnvironmentService {
  private readonly jobs = new Map<string, Job>();
  private readonly running = new Map<string, Job>();
  /** Reads of a repository's environment inputs, by source and commit (least recently used first). */
  private readonly reads = new Map<string, EnvironmentInputs>();
  /** Reads of a repository directory, by source, commit and request (oldest first). */
  private readonly directoryReads = new Map<string, RepositoryDirectory>();

  constructor(
    private readonly config: ExecHostConfig,
    private readonly driver: SandboxDriver,
  ) {}

  /** True while preparation `id` runs: its set-up container is not an orphan. */
  owns(id: string): boolean {
    return this.jobs.has(id);
  }

  get dir(): string {
    return path.join(this.config.stateDir, 'environments');
  }

  private keyDir(key: string): string {
    return path.join(this.dir, 'prepared', key);
  }

  async init(): Promise<void> {
    for (const d of ['prepared', 'jobs', 'work', 'reads', 'home']) await fs.mkdir(path.join(this.dir, d), { recursive: true, mode: 0o700 });
    await fs.chmod(this.dir, 0o700);
    // Whatever a previous run of the exec-host left half-done is removed; its jobs are over.
    for (const name of await fs.readdir(path.join(this.dir, 'work')).catch(() => [] as string[])) await this.removeWork(path.join(this.dir, 'work', name));
    await fs.rm(path.join(this.dir, 'reads'), { recursive: true, force: true });
    await fs.mkdir(path.join(this.dir, 'reads'), { mode: 0o700 });
    const jobsDir = path.join(this.dir, 'jobs');
    for (const name of await fs.readdir(jobsDir).catch(() => [] as string[])) {
      const file = path.join(jobsDir, name);
      // A preparation's record and log are kept for JOB_RECORD_DAYS, then removed (the gateway keeps its end and the log's tail).
      const age = Date.now() - (await fs.stat(file)).mtimeMs;
      if (age > JOB_RECORD_DAYS * 24 * 3600 * 1000) {
        await fs.rm(file, { force: true });
        continue;
      }
      if (!name.endsWith('.json')) continue;
      const view = JSON.parse(await fs.readFile(file, 'utf8')) as EnvironmentJobView;
      if (view.state === 'preparing') {
        view.state = 'failed';
        view.finishedAt = now();
        view.message = 'The exec-host stopped during this preparation; prepare again.';
        await fs.writeFile(file, JSON.stringify(view));
      }
    }
  }

  // ───────────────────────────── reading

  /**
   * Reads the devcontainer and inputs at the default ref, in a scratch repository removed afterwards.
   * What a commit holds never changes, so a read is kept by commit and the next session start of the
   * project only asks which commit the ref names now.
   */
  private async inputs(req: EnvironmentRequestParsed): Promise<EnvironmentInputs> {
    const commit = await remoteCommit(path.join(this.dir, 'home'), req.repository.source, req.repository.ref, req.repository.access);
    const cacheKey = commit ? `${req.repository.source}\0${commit}` : null;
    const cached = cacheKey ? this.reads.get(cacheKey) : undefined;
    if (cached) {
      this.reads.delete(cacheKey!);
      this.reads.set(cacheKey!, cached);
      return structuredClone(cached);
    }
    const inputs = await this.readFresh(req);
    if (cacheKey && inputs.commit === commit) {
      this.reads.set(cacheKey, structuredClone(inputs));
      while (this.reads.size > 256) this.reads.delete(this.reads.keys().next().value!);
    }
    return inputs;
  }

  private readFresh(req: EnvironmentRequestParsed): Promise<EnvironmentInputs> {
    return this.inScratchRepository((repo) => readInputs(repo, req.repository.source, req.repository.ref, req.repository.access));
  }

  /** `fn` on an empty repository of its own under `reads/`, removed afterwards whatever happens. */
  private async inScratchRepository<T>(fn: (repo: GitRepo) => Promise<T>): Promise<T> {
    const scratch = path.join(this.dir, 'reads', randomBytes(8).toString('hex'));
    const repo: GitRepo = { gitDir: path.join(scratch, 'git'), workTree: path.join(scratch, 'work'), home: path.join(scratch, 'home') };
    try {
      await fs.mkdir(repo.home, { recursive: true, mode: 0o700 });
      await fs.mkdir(repo.workTree, { mode: 0o700 });
      return await fn(repo);
    } finally {
      await fs.rm(scratch, { recursive: true, force: true });
    }
  }

  /**
   * One directory of the repository at a ref (the project's agents at its default ref), fetched with
   * the project's access into a scratch repository removed afterwards. Kept by source, commit and
   * request, like the environment's inputs: a session start asks only which commit the ref names now.
   */
  async readDirectory(req: RepositoryDirectoryRequestParsed): Promise<RepositoryDirectory> {
    const commit = await remoteCommit(path.join(this.dir, 'home'), req.repository.source, req.repository.ref, req.repository.access);
    const cacheKey = commit ? JSON.stringify([req.repository.source, commit, req.directory, req.suffix, req.maxFiles, req.maxFileBytes]) : null;
    const cached = cacheKey ? this.directoryReads.get(cacheKey) : undefined;
    if (cached) return structuredClone(cached);
    const read = await this.inScratchRepository(async (repo): Promise<RepositoryDirectory> => {
      const fetched = await fetchDefaultRef(repo, req.repository.source, req.repository.ref, req.repository.access, `so its ${req.directory} cannot be read`);
      return { commit: fetched, ...(await readTreeDirectory(repo, fetched, req)) };
    });
    if (cacheKey && read.commit === commit) {
      this.directoryReads.set(cacheKey, structuredClone(read));
      while (this.directoryReads.size > 256) this.directoryReads.delete(this.directoryReads.keys().next().value!);
    }
    return read;
  }

  /** The image an environment starts from, and the id its key is computed with. */
  private async baseImage(dc: Devcontainer | null): Promise<{ name: string; id: string }> {
    const name = dc?.image ?? this.config.image;
    const info = await this.driver.imageInfo(dc?.build ? this.config.image : name);
    if (!info) {
      if (dc?.image)
        throw new ExecHostError(
          'environment_invalid',
          `The devcontainer's image ${dc.image} is not on this exec-host; load it (docker load) or build it from the sandbox image with "build.dockerfile".`,
        );
      throw new ExecHostError('sandbox_setup_failed', `The sandbox image ${this.config.image} is missing; build it with "npm run setup".`);
    }
    return { name, id: info.id };
  }

  private async readMeta(key: string): Promise<PreparedMeta | null> {
    try {
      return JSON.parse(await fs.readFile(path.join(this.keyDir(key), 'meta.json'), 'utf8')) as PreparedMeta;
    } catch {
      return null;
    }
  }

  private async jobView(jobId: string): Promise<EnvironmentJobView | null> {
    const live = this.jobs.get(jobId);
    if (live) return { ...live.view, progress: { ...live.view.progress }, warnings: [...live.view.warnings] };
    try {
      return JSON.parse(await fs.readFile(path.join(this.dir, 'jobs', `${jobId}.json`), 'utf8')) as EnvironmentJobView;
    } catch {
      return null;
    }
  }

  /** The environment's state for its current inputs, with a sentence. */
  async status(req: EnvironmentRequestParsed): Promise<EnvironmentStatus & { meta: PreparedMeta | null }> {
    const ref = req.repository.ref ?? 'HEAD';
    const inputs = await this.inputs(req);
    const dc = inputs.devcontainer;
    const devcontainerView = (extraWarnings: string[] = []) =>
      dc
        ? {
            path: dc.path,
            image: dc.image ?? (dc.build ? `built from ${dc.build.dockerfile}` : this.config.image),
            setupCommands: dc.setup.map((c) => `${c.name}: ${describeCommand(c)}`),
            warnings: [...dc.warnings, ...extraWarnings],
          }
        : null;
    if (inputs.invalid) {
      return {
        state: 'failed',
        ref,
        commit: inputs.commit,
        key: null,
        devcontainer: devcontainerView(),
        job: null,
        message: `The project's devcontainer cannot be used: ${inputs.invalid}`,
        meta: null,
      };
    }
    if (!dc) {
      return {
        state: 'base',
        ref,
        commit: inputs.commit,
        key: null,
        devcontainer: null,
        job: null,
        message: `${ref} has no .devcontainer/devcontainer.json: sessions start from the standard sandbox image.`,
        meta: null,
      };
    }
    let base: { name: string; id: string };
    try {
      base = await this.baseImage(dc);
    } catch (e) {
      if (e instanceof ExecHostError && e.code === 'environment_invalid') {
        return { state: 'failed', ref, commit: inputs.commit, key: null, devcontainer: devcontainerView(), job: null, message: `The project's devcontainer cannot be used: ${e.message}`, meta: null };
      }
      throw e;
    }
    const key = environmentKey(inputs, base.id, req);
    const meta = await this.readMeta(key);
    const live = this.running.get(key);
    const jobId = live?.view.jobId ?? meta?.jobId ?? null;
    const job = jobId ? await this.jobView(jobId) : null;
    const short = key.slice(0, 12);
    if (live) {
      return {
        state: 'preparing',
        ref,
        commit: inputs.commit,
        key,
        devcontainer: devcontainerView(),
        job,
        message: `The environment ${short} is being prepared (${job?.progress.done ?? 0} of ${job?.progress.total ?? 1}: ${job?.progress.label ?? 'starting'}); sessions can start once it is ready.`,
        meta,
      };
    }
    if (meta?.state === 'ready') {
      return { state: 'ready', ref, commit: inputs.commit, key, devcontainer: devcontainerView(), job, message: `The environment ${short} is ready: sessions start from it.`, meta };
    }
    if (meta?.state === 'failed') {
      return { state: 'failed', ref, commit: inputs.commit, key, devcontainer: devcontainerView(), job, message: `The preparation of environment ${short} failed: ${meta.message}`, meta };
    }
    return {
      state: 'not_prepared',
      ref,
      commit: inputs.commit,
      key,
      devcontainer: devcontainerView(),
      job: null,
      message: `The environment ${short} for the current devcontainer and dependency files of ${ref} has not been prepared yet.`,
      meta: null,
    };
  }

  async publicStatus(req: EnvironmentRequestParsed): Promise<EnvironmentStatus> {
    return this.strip(await this.status(req));
  }

  // ───────────────────────────── preparing

  async prepare(req: PrepareEnvironmentRequestParsed): Promise<EnvironmentStatus> {
    const current = await this.status(req);
    if (current.state === 'base' || current.state === 'preparing') return this.strip(current);
    if (current.state === 'failed' && current.key === null) throw new ExecHostError('environment_invalid', current.message);
    // Prepared, or failed for these very inputs: again only when asked to (a change of inputs is a new key).
    if ((current.state === 'ready' || current.state === 'failed') && !req.force) return this.strip(current);
    const key = current.key!;
    const already = this.running.get(key);
    if (!already) this.start(req, key);
    return this.publicStatus(req);
  }

  private strip(s: EnvironmentStatus & { meta: PreparedMeta | null }): EnvironmentStatus {
    const { meta: _meta, ...status } = s;
    return status;
  }

  private start(req: PrepareEnvironmentRequestParsed, key: string): Job {
    const jobId = `env-${randomBytes(8).toString('hex')}`;
    const job: Job = {
      view: {
        jobId,
        key,
        state: 'preparing',
        phase: 'queued',
        progress: { done: 0, total: 3, label: 'queued' },
        startedAt: now(),
        finishedAt: null,
        message: null,
        warnings: [],
      },
      projectId: req.projectId,
      logPath: path.join(this.dir, 'jobs', `${jobId}.log`),
      logBytes: 0,
      logChain: Promise.resolve(),
      done: Promise.resolve(),
    };
    this.jobs.set(jobId, job);
    this.running.set(key, job);
    job.done = this.runJob(req, job)
      .catch(async (e: unknown) => {
        const message = e instanceof ExecHostError ? e.message : `The preparation stopped on an unexpected error: ${(e as Error).message.split('\n')[0]}`;
        await this.finish(job, 'failed', message);
      })
      .finally(() => {
        this.running.delete(key);
        this.jobs.delete(jobId);
      });
    return job;
  }

  /** Waits for every running preparation (tests, shutdown). */
  async settled(): Promise<void> {
    await Promise.all([...this.running.values()].map((j) => j.done));
  }

  private log(job: Job, text: string): Promise<void> {
    if (job.logBytes >= LOG_CAP_BYTES) return job.logChain;
    let chunk = text;
    if (job.logBytes + Buffer.byteLength(chunk) > LOG_CAP_BYTES)
      chunk = `${Buffer.from(chunk)
        .subarray(0, LOG_CAP_BYTES - job.logBytes)
        .toString('utf8')}\n[the log reached its cap of ${LOG_CAP_BYTES} bytes; the rest was dropped]\n`;
    job.logBytes += Buffer.byteLength(chunk);
    job.logChain = job.logChain.then(() => fs.appendFile(job.logPath, chunk, { mode: 0o600 })).catch(() => undefined);
    return job.logChain;
  }

  private async step(job: Job, phase: EnvironmentPhase, label: string, done: number, total: number): Promise<void> {
    job.view.phase = phase;
    job.view.progress = { done, total, label };
    await this.log(job, `\n── ${label}\n`);
    await this.persist(job);
  }

  private async persist(job: Job): Promise<void> {
    await fs.writeFile(path.join(this.dir, 'jobs', `${job.view.jobId}.json`), JSON.stringify(job.view), { mode: 0o600 });
  }

  private async finish(job: Job, state: 'ready' | 'failed', message: string, meta?: Omit<PreparedMeta, 'state' | 'message' | 'jobId' | 'preparedAt' | 'lastUsedAt'>): Promise<void> {
    job.view.state = state;
    job.view.phase = 'done';
    job.view.finishedAt = now();
    job.view.message = message;
    job.view.progress = { done: job.view.progress.total, total: job.view.progress.total, label: state === 'ready' ? 'ready' : 'failed' };
    await this.log(job, `\n${state === 'ready' ? 'Ready' : 'Failed'}: ${message}\n`);
    await job.logChain;
    const dir = this.keyDir(job.view.key);
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    const previous = await this.readMeta(job.view.key);
    const full: PreparedMeta = {
      key: job.view.key,
      projectId: job.projectId,
      imageId: null,
      builtTag: null,
      imageName: '',
      containerEnv: {},
      snapshotPaths: [],
      ...(state === 'failed' && previous?.state === 'ready' ? previous : {}),
      ...(meta ?? {}),
      warnings: job.view.warnings,
      state: state === 'failed' && previous?.state === 'ready' ? 'ready' : state,
      message,
      jobId: job.view.jobId,
      preparedAt: now(),
      lastUsedAt: now(),
    };
    await fs.writeFile(path.join(dir, 'meta.json'), JSON.stringify(full), { mode: 0o600 });
    await this.persist(job);
    await this.collectGarbage(job.projectId).catch(() => undefined);
  }

  private async runJob(req: PrepareEnvironmentRequestParsed, job: Job): Promise<void> {
    await this.step(job, 'reading', `reading ${req.repository.ref ?? 'HEAD'} of ${req.repository.source}`, 0, 3);
    const inputs = await this.inputs(req);
    const dc = inputs.devcontainer;
    if (inputs.invalid || !dc) throw new ExecHostError('environment_invalid', inputs.invalid ?? 'The repository has no devcontainer any more.');
    job.view.warnings = [...dc.warnings];
    for (const w of dc.warnings) await this.log(job, `warning: ${w}\n`);
    const base = await this.baseImage(dc);
    if (environmentKey(inputs, base.id, req) !== job.view.key) throw new ExecHostError('environment_not_ready', 'The default ref moved while the preparation started; prepare again.');
    const total = 3 + dc.setup.length;
    await this.log(job, `commit ${inputs.commit}\nkey ${job.view.key}\n`);

    // The image.
    await this.step(job, 'image', dc.build ? `building ${dc.build.dockerfile}` : `checking image ${base.name}`, 1, total);
    let imageId = base.id;
    let builtTag: string | null = null;
    if (dc.build) {
      builtTag = `lemniscate/env:${job.view.key.slice(0, 24)}`;
      imageId = await this.build(req, job, inputs.commit, dc.build, builtTag);
    }
    await this.assertDerived(dc.image ?? (dc.build ? builtTag! : this.config.image), imageId);

    // The set-up.
    let snapshotPaths: string[] = [];
    const work = path.join(this.dir, 'work', job.view.jobId);
    try {
      if (dc.setup.length > 0) snapshotPaths = await this.setUp(req, job, dc, imageId, inputs.commit, work, total);
      else await this.log(job, 'no set-up commands\n');
    } finally {
      await this.removeWork(work);
    }
    await this.finish(
      job,
      'ready',
      `Prepared from ${inputs.commit.slice(0, 12)} in ${Math.round((Date.now() - Date.parse(job.view.startedAt)) / 1000)} s${snapshotPaths.length > 0 ? `; dependencies kept: ${snapshotPaths.join(', ')}` : ''}.`,
      {
        key: job.view.key,
        projectId: req.projectId,
        imageId,
        builtTag,
        imageName: dc.image ?? builtTag ?? this.config.image,
        containerEnv: dc.containerEnv,
        snapshotPaths,
        warnings: job.view.warnings,
      },
    );
  }

  private async build(req: PrepareEnvironmentRequestParsed, job: Job, commit: string, build: NonNullable<Devcontainer['build']>, tag: string): Promise<string> {
    const dockerfile = path.posix.relative(build.context === '.' ? '' : build.context, build.dockerfile);
    if (dockerfile.startsWith('..')) throw new ExecHostError('environment_invalid', `"build.dockerfile" (${build.dockerfile}) must be inside "build.context" (${build.context}).`);
    const scratch = path.join(this.dir, 'reads', randomBytes(8).toString('hex'));
    const repo: GitRepo = { gitDir: path.join(scratch, 'git'), workTree: path.join(scratch, 'work'), home: path.join(scratch, 'home') };
    try {
      await fs.mkdir(repo.home, { recursive: true, mode: 0o700 });
      await fs.mkdir(repo.workTree, { mode: 0o700 });
      const inputs = await readInputs(repo, req.repository.source, req.repository.ref, req.repository.access);
      if (inputs.commit !== commit) throw new ExecHostError('environment_not_ready', 'The default ref moved during the preparation; prepare again.');
      const tarPath = path.join(scratch, 'context.tar');
      const treeish = build.context === '.' ? commit : `${commit}:${build.context}`;
      await runGit(repo, ['archive', '--format=tar', `--output=${tarPath}`, treeish]);
      const signal = AbortSignal.timeout(req.setupTimeoutSeconds * 1000);
      try {
        return await this.driver.buildImage(createReadStream(tarPath), {
          tag,
          dockerfile,
          buildArgs: { ...build.args, LEMNISCATE_SANDBOX_IMAGE: this.config.image },
          labels: { [LABEL_MANAGED]: '1', [LABEL_ENVIRONMENT]: job.view.key, [LABEL_INSTANCE]: this.config.instance },
          onOutput: (line) => void this.log(job, `${line}\n`),
          signal,
        });
      } catch (e) {
        if (signal.aborted) throw new ExecHostError('environment_invalid', `The image build ran over the set-up time limit (${req.setupTimeoutSeconds} s).`);
        throw new ExecHostError('environment_invalid', `The devcontainer's image did not build: ${(e as Error).message.split('\n')[0]}`);
      }
    } finally {
      await fs.rm(scratch, { recursive: true, force: true });
    }
  }

  /** An environment adds files to the sandbox image; it never replaces it (its init, launcher and user). */
  private async assertDerived(name: string, imageId: string): Promise<void> {
    const [env, sandbox] = await Promise.all([this.driver.imageInfo(imageId), this.driver.imageInfo(this.config.image)]);
    if (!env || !sandbox) throw new ExecHostError('environment_invalid', `The image ${name} is not on this exec-host.`);
    const derived = sandbox.layers.length > 0 && sandbox.layers.every((l, i) => env.layers[i] === l);
    if (!derived) {
      throw new ExecHostError(
        'environment_invalid',
        `The image ${name} does not derive from the sandbox image ${this.config.image}: an environment may add files to the sandbox image (FROM \${LEMNISCATE_SANDBOX_IMAGE} in its Dockerfile), never replace it.`,
      );
    }
  }

  private async setUp(req: PrepareEnvironmentRequestParsed, job: Job, dc: Devcontainer, imageId: string, commit: string, work: string, total: number): Promise<string[]> {
    const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...(req.limits ?? {}) };
    const repo: GitRepo = { gitDir: path.join(work, 'git'), workTree: path.join(work, 'work'), home: path.join(work, 'home') };
    const runDir = path.join(work, 'run');
    await fs.mkdir(repo.home, { recursive: true, mode: 0o700 });
    await fs.mkdir(runDir, { mode: 0o755 });
    await createDisk(path.join(work, 'disk.img'), repo.workTree, limits.diskMb);
    const state = await WorkingCopy.prepare({
      repo,
      source: await resolveSource(req.repository.source, req.repository.access),
      ...(req.repository.ref ? { ref: req.repository.ref } : {}),
      exclusions: [],
    });
    if (state.baseCommit !== commit) throw new ExecHostError('environment_not_ready', 'The default ref moved during the preparation; prepare again.');
    await fs.writeFile(path.join(runDir, 'forwarder.js'), FORWARDER_SCRIPT, { mode: 0o644 });
    const caBundle = this.config.egressCaBundle;
    if (caBundle) await fs.copyFile(caBundle, path.join(runDir, 'ca.pem'));
    if (caBundle) await fs.chmod(path.join(runDir, 'ca.pem'), 0o644);
    const mirrors = mirrorsOf(req.mirrors);
    await this.log(job, mirrors.length > 0 ? `mirrors reachable: ${req.mirrors.join(', ')}\n` : 'no mirrors in the policy (environment.mirrors): the set-up has no network at all\n');
    const proxy = await startEgressProxy(path.join(runDir, 'egress.sock'), mirrors, (line) => void this.log(job, `${line}\n`));
    const seccomp = loadSeccompProfile(this.config.seccompProfilePath, this.config.seccompSchemaPath);
    if (!seccomp.valid) throw new ExecHostError('sandbox_setup_failed', `No set-up runs without a valid seccomp profile: ${seccomp.message}`);
    // The project's runtime. gVisor connects to a host unix socket (the egress proxy) only when told
    // to, so a runsc project's set-up runs under the engine's `runsc-setup` (runsc with --host-uds=open).
    if (req.runtime === 'runsc' && !(await this.driver.info()).runtimes.includes(RUNSC_SETUP_RUNTIME)) {
      throw new ExecHostError(
        'environment_invalid',
        `This project runs under gVisor, and the container engine has no "${RUNSC_SETUP_RUNTIME}" runtime (runsc with --host-uds=open) for its set-up; register it (see the operator guide) or set the project's runtime to runc.`,
      );
    }
    let containerId: string | null = null;
    try {
      // Hardened as a session's sandbox: no network interface, read-only root, no capabilities, seccomp, limits.
      containerId = await this.driver.createAndStart({
        name: `lemniscate-setup-${job.view.jobId}`,
        image: imageId,
        runtime: req.runtime,
        ...(req.runtime === 'runsc' ? { engineRuntime: RUNSC_SETUP_RUNTIME } : {}),
        // Owned by its job while it runs (the reaper asks), removed with it.
        labels: { [LABEL_MANAGED]: '1', [LABEL_SANDBOX]: job.view.jobId, [LABEL_ENVIRONMENT]: job.view.key, [LABEL_INSTANCE]: this.config.instance },
        workspaceHostPath: repo.workTree,
        cpus: limits.cpus,
        memoryBytes: limits.memoryMb * 1024 * 1024,
        pids: limits.pids,
        tmpfsBytes: Math.min(TMPFS_BYTES, Math.floor((limits.memoryMb * 1024 * 1024) / 4)),
        fileSizeBytes: limits.diskMb * 1024 * 1024,
        openFiles: 4096,
        seccompProfile: seccomp.profile,
        apparmorProfile: null,
        env: [...Object.entries(dc.containerEnv).map(([k, v]) => `${k}=${v}`), ...egressEnv(caBundle)],
        extraMounts: [{ source: runDir, target: RUN_DIR, readOnly: false }],
      });
      const deadline = Date.now() + req.setupTimeoutSeconds * 1000;
      const forwarder = await this.exec(
        containerId,
        job,
        `nohup node ${RUN_DIR}/forwarder.js ${RUN_DIR}/egress.sock ${PROXY_PORT} >/dev/null 2>&1 &\nfor i in $(seq 1 50); do (echo > /dev/tcp/127.0.0.1/${PROXY_PORT}) 2>/dev/null && exit 0; sleep 0.1; done; exit 1`,
        deadline,
        false,
      );
      if (forwarder !== 0) throw new ExecHostError('environment_invalid', `The set-up's proxy could not start in the image (it needs node, as the sandbox image has).`);
      let done = 2;
      for (const command of dc.setup) {
        await this.step(job, 'setup', `running ${command.name}`, done, total);
        await this.log(job, `$ ${describeCommand(command)}\n`);
        const code = await this.exec(containerId, job, `cd ${WORKSPACE_DIR} && ${commandText(command)}`, deadline, true);
        if (code === null) throw new ExecHostError('environment_invalid', `${command.name} ran over the set-up time limit (${req.setupTimeoutSeconds} s) and was stopped.`);
        if (code !== 0) throw new ExecHostError('environment_invalid', `${command.name} (${describeCommand(command)}) failed with exit code ${code}; its log says why.`);
        done++;
      }
      await this.step(job, 'snapshot', 'keeping what the set-up created', done, total);
      return await this.snapshot(job, repo);
    } finally {
      if (containerId) await this.driver.remove(containerId).catch(() => undefined);
      await proxy.close();
      if (proxy.refused.length > 0) await this.log(job, `egress: ${proxy.refused.length} connection(s) refused in all\n`);
    }
  }

  /** Runs one command in the set-up container; its output goes to the log. Null when the deadline passed. */
  private async exec(containerId: string, job: Job, command: string, deadline: number, logged: boolean): Promise<number | null> {
    const signal = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
    const write = (b: Buffer) => (logged ? void this.log(job, b.toString('utf8')) : undefined);
    const outcome = await this.driver.exec(containerId, { command, onStdout: write, onStderr: write, signal });
    if (signal.aborted) return null;
    if (outcome.containerDied) throw new ExecHostError('environment_invalid', `The set-up container stopped${outcome.oomEvent ? ' (out of memory)' : ''}.`);
    return outcome.exitCode ?? 1;
  }

  /** Tars every path the set-up created (untracked, ignored or not) into the environment's snapshot. */
  private async snapshot(job: Job, repo: GitRepo): Promise<string[]> {
    const out = await gitText(repo, ['status', '--porcelain=v1', '-z', '--ignored=traditional', '--untracked-files=normal', '--ignore-submodules=all']);
    const created: string[] = [];
    const changed: string[] = [];
    for (const rec of out.split('\0').filter(Boolean)) {
      const code = rec.slice(0, 2);
      const p = rec.slice(3);
      if (code === '??' || code === '!!') created.push(p);
      else changed.push(p);
    }
    if (changed.length > 0) {
      const w = `The set-up changed files of the repository (${changed.slice(0, 10).join(', ')}${changed.length > 10 ? ', …' : ''}); those changes are not kept: commit them if they are wanted.`;
      job.view.warnings.push(w);
      await this.log(job, `warning: ${w}\n`);
    }
    const dir = this.keyDir(job.view.key);
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    const tarPath = path.join(dir, 'snapshot.tar');
    await fs.rm(tarPath, { force: true });
    if (created.length === 0) {
      await this.log(job, 'the set-up created no files\n');
      return [];
    }
    const paths = created.map((p) => p.replace(/\/$/, ''));
    const tar = await run('tar', ['-C', repo.workTree, '--numeric-owner', '-cf', tarPath, '--', ...paths]);
    if (tar.code !== 0) throw new ExecHostError('sandbox_setup_failed', `The set-up's files could not be kept: ${tar.stderr.trim().split('\n').pop() ?? ''}`);
    const size = (await fs.stat(tarPath)).size;
    await this.log(job, `kept ${paths.join(', ')} (${size >= 1024 * 1024 ? `${(size / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(size / 1024)} KiB`})\n`);
    return created;
  }

  private async removeWork(work: string): Promise<void> {
    await destroyDisk(path.join(work, 'disk.img'), path.join(work, 'work')).catch(() => undefined);
    await fs.rm(work, { recursive: true, force: true });
  }

  // ───────────────────────────── logs

  async logOf(jobId: string, offset: number): Promise<EnvironmentLog> {
    const view = await this.jobView(jobId);
    if (!view) throw new ExecHostError('job_not_found', `There is no environment preparation ${jobId} on this exec-host.`);
    const file = path.join(this.dir, 'jobs', `${jobId}.log`);
    let text = '';
    let size = 0;
    let next = offset;
    try {
      const handle = await fs.open(file, 'r');
      try {
        size = (await handle.stat()).size;
        const start = Math.min(offset, size);
        const buf = Buffer.alloc(Math.min(size - start, 256 * 1024));
        await handle.read(buf, 0, buf.length, start);
        const whole = completeUtf8(buf);
        text = buf.subarray(0, whole).toString('utf8');
        next = start + whole;
      } finally {
        await handle.close();
      }
    } catch {
      // no log yet
    }
    return { jobId, text, offset, nextOffset: next, complete: view.state !== 'preparing' && next >= size };
  }

  // ───────────────────────────── sessions

  /** What a session's sandbox starts from; refuses with a sentence when the environment is not ready. */
  async forSandbox(req: EnvironmentRequestParsed | undefined): Promise<SandboxEnvironment> {
    if (!req) return { key: null, image: this.config.image, env: [], snapshot: null };
    const s = await this.status(req);
    if (s.state === 'base') return { key: null, image: this.config.image, env: [], snapshot: null };
    const meta = s.meta;
    const imageId = meta?.imageId;
    if (s.state !== 'ready' || !meta || !imageId) throw new ExecHostError('environment_not_ready', s.message);
    const tarPath = path.join(this.keyDir(meta.key), 'snapshot.tar');
    const hasSnapshot = meta.snapshotPaths.length > 0 && (await fs.stat(tarPath).catch(() => null)) !== null;
    if (meta.snapshotPaths.length > 0 && !hasSnapshot) throw new ExecHostError('environment_not_ready', `The environment ${meta.key.slice(0, 12)} lost its dependency snapshot; prepare it again.`);
    meta.lastUsedAt = now();
    await fs.writeFile(path.join(this.keyDir(meta.key), 'meta.json'), JSON.stringify(meta), { mode: 0o600 }).catch(() => undefined);
    return {
      key: meta.key,
      image: imageId,
      env: Object.entries(meta.containerEnv).map(([k, v]) => `${k}=${v}`),
      snapshot: hasSnapshot ? { tarPath, paths: meta.snapshotPaths } : null,
    };
  }

  /**
   * Restores a snapshot into a session's working copy as the sandbox user (so nothing in it can reach
   * outside the working copy) and keeps its paths out of the session's changes and patch.
   */
  async restore(snapshot: NonNullable<SandboxEnvironment['snapshot']>, repo: GitRepo): Promise<void> {
    // Read by the exec-host, written by the sandbox user from inside the working copy.
    const archive = await fs.open(snapshot.tarPath, 'r');
    let res: { code: number; stderr: string };
    try {
      res = await run('tar', ['--no-same-owner', '--no-same-permissions', '-xf', '-'], { uid: SANDBOX_UID, gid: SANDBOX_GID, cwd: repo.workTree, stdin: archive.fd });
    } finally {
      await archive.close();
    }
    if (res.code !== 0) throw new ExecHostError('sandbox_setup_failed', `The environment's dependencies could not be restored: ${res.stderr.trim().split('\n').pop() ?? ''}`);
    const exclude = path.join(repo.gitDir, 'info', 'exclude');
    await fs.mkdir(path.dirname(exclude), { recursive: true });
    const lines = snapshot.paths.map((p) => `/${p.replace(/([\\*?[\]!#])/g, '\\$1')}`);
    await fs.appendFile(exclude, `\n# the environment's dependencies (never part of a change)\n${lines.join('\n')}\n`);
  }

  /**
   * The projects with an environment ready on this exec-host (its image still on the engine), which
   * the exec-host reports to a pool at every heartbeat so placement prefers it for them.
   */
  async readyProjects(): Promise<string[]> {
    const projects = new Set<string>();
    for (const key of await fs.readdir(path.join(this.dir, 'prepared')).catch(() => [] as string[])) {
      const meta = await this.readMeta(key);
      if (!meta || meta.state !== 'ready' || !meta.imageId || projects.has(meta.projectId)) continue;
      if (await this.driver.imagePresent(meta.imageId).catch(() => false)) projects.add(meta.projectId);
    }
    return [...projects].sort();
  }

  // ───────────────────────────── clean-up

  /** Keeps the two most recently used ready environments of a project and removes its older ones and their images. */
  async collectGarbage(projectId: string, keep = this.config.environmentsKept): Promise<string[]> {
    const root = path.join(this.dir, 'prepared');
    const metas: PreparedMeta[] = [];
    for (const key of await fs.readdir(root).catch(() => [] as string[])) {
      const meta = await this.readMeta(key);
      if (meta && meta.projectId === projectId && !this.running.has(key)) metas.push(meta);
    }
    metas.sort((a, b) => (a.lastUsedAt < b.lastUsedAt ? 1 : -1));
    const ready = metas.filter((m) => m.state === 'ready');
    const failed = metas.filter((m) => m.state === 'failed');
    const removed = [...ready.slice(keep), ...failed.slice(keep)];
    for (const meta of removed) {
      await fs.rm(this.keyDir(meta.key), { recursive: true, force: true });
      if (meta.builtTag) await this.driver.removeImage(meta.builtTag).catch(() => undefined);
    }
    return removed.map((m) => m.key);
  }
}
