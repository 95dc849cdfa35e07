import type { EnvironmentJobView, EnvironmentLog, EnvironmentStatus, ProjectView } from '@lemniscate/contracts';
import { Command } from 'commander';
import { connectToProject, type CliContext } from '../context';
import { CliError, EXIT_OK } from '../errors';
import type { GatewayClient } from '../gateway/gateway-client';

type Done = (code: Promise<number>) => void;

interface EnvOptions {
  project?: string;
  json?: boolean;
}

/** How often `prepare --wait` and `logs --follow` ask the gateway, in milliseconds (LEMNISCATE_ENV_POLL_MS). */
export function pollIntervalMs(env: Record<string, string | undefined>): number {
  const raw = env.LEMNISCATE_ENV_POLL_MS;
  if (raw === undefined || raw === '') return 1_000;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new CliError(`LEMNISCATE_ENV_POLL_MS must be a positive number of milliseconds, not "${raw}".`, 'config');
  return n;
}

/** `sha256:0123456789ab…` → `sha256:0123456789ab`: enough to tell keys apart, short enough to read. */
export function shortKey(key: string): string {
  const [algorithm, hash] = key.includes(':') ? (key.split(':', 2) as [string, string]) : ['', key];
  return `${algorithm ? `${algorithm}:` : ''}${hash.slice(0, 12)}`;
}

/** "3/5 running postCreateCommand" */
function progressOf(job: EnvironmentJobView): string {
  return `${job.progress.done}/${job.progress.total} ${job.progress.label}`;
}

/** The status as a person reads it: state, where it was read, what the devcontainer asks for, the latest job, and the sentence. */
export function renderStatus(project: string, s: EnvironmentStatus): string {
  const lines = [`Project     ${project}`, `State       ${s.state}`, `Ref         ${s.ref}${s.commit ? ` at ${s.commit.slice(0, 12)}` : ''}`];
  if (s.key) lines.push(`Key         ${shortKey(s.key)}`);
  if (s.devcontainer) {
    lines.push(`Image       ${s.devcontainer.image ?? 'built from its Dockerfile'}`, `Config      ${s.devcontainer.path}`);
    lines.push(s.devcontainer.setupCommands.length === 0 ? 'Set-up      none' : `Set-up      ${s.devcontainer.setupCommands.join('\n            ')}`);
    if (s.devcontainer.warnings.length > 0) lines.push(`Warnings    ${s.devcontainer.warnings.join('\n            ')}`);
  } else {
    lines.push('Image       the sandbox image (the repository has no .devcontainer/devcontainer.json)');
  }
  const job = s.job;
  if (job) {
    lines.push(`Job         ${job.jobId}: ${job.state}, ${job.phase}, ${progressOf(job)}`);
    lines.push(`            started ${job.startedAt}${job.finishedAt ? `, finished ${job.finishedAt}` : ''}`);
    if (job.message) lines.push(`            ${job.message}`);
    if (job.warnings.length > 0) lines.push(`            warnings: ${job.warnings.join('; ')}`);
  } else {
    lines.push('Job         none');
  }
  lines.push('', s.message);
  return `${lines.join('\n')}\n`;
}

function sentenceBody(text: string): string {
  return text.trim().replace(/[.\s]+$/, '');
}

/** The failure of a preparation, as the sentence `lemni` exits 1 with. */
function failure(project: ProjectView, status: EnvironmentStatus): CliError {
  const why = status.job?.message ?? status.message;
  return new CliError(
    `The preparation of the environment of project ${project.name} failed: ${sentenceBody(why)}. Read its log with \`lemni env logs --project ${project.name}\`; \`lemni env prepare --project ${project.name} --force\` prepares it again.`,
    'environment_failed',
  );
}

/**
 * Reads a job's log from `offset` to what the gateway holds now, writing each page as it comes;
 * with `follow`, asks again every `pollMs` until the log is complete. Returns the log read.
 */
async function readLog(client: GatewayClient, projectId: string, jobId: string, options: { follow: boolean; pollMs: number; write: (text: string) => void }): Promise<EnvironmentLog> {
  let offset = 0;
  let first: number | null = null;
  let text = '';
  for (;;) {
    const page = await client.environmentLog(projectId, jobId, offset);
    first ??= page.offset;
    if (page.text) {
      options.write(page.text);
      text += page.text;
    }
    const advanced = page.nextOffset > offset;
    offset = Math.max(offset, page.nextOffset);
    if (advanced && page.text) continue; // more may be there already
    if (page.complete || !options.follow) return { jobId, text, offset: first, nextOffset: offset, complete: page.complete };
    await new Promise((resolve) => setTimeout(resolve, options.pollMs));
  }
}

async function status(ctx: CliContext, opts: EnvOptions, flags: Record<string, unknown>): Promise<number> {
  const { client, project } = await connectToProject(ctx, opts.project, flags);
  const s = await client.environmentStatus(project.id);
  ctx.stdout(opts.json ? `${JSON.stringify(s)}\n` : renderStatus(project.name, s));
  return EXIT_OK;
}

async function prepare(ctx: CliContext, opts: EnvOptions & { force?: boolean; wait?: boolean }, flags: Record<string, unknown>): Promise<number> {
  const pollMs = pollIntervalMs(ctx.env);
  const { client, project } = await connectToProject(ctx, opts.project, flags);
  let s = await client.prepareEnvironment(project.id, opts.force === true);
  const say = (line: string) => (opts.json ? ctx.stderr(`${line}\n`) : ctx.stdout(`${line}\n`));
  if (s.state === 'preparing' && s.job) {
    say(`Preparing the environment of ${project.name}: job ${s.job.jobId}, ${progressOf(s.job)}.`);
    if (!opts.wait) {
      if (opts.json) ctx.stdout(`${JSON.stringify(s)}\n`);
      else say(`Follow it with \`lemni env logs --project ${project.name} --follow\`; sessions start once it is ready.`);
      return EXIT_OK;
    }
    await readLog(client, project.id, s.job.jobId, { follow: true, pollMs, write: (text) => (opts.json ? undefined : ctx.stdout(text)) });
    s = await client.environmentStatus(project.id);
  }
  if (opts.json) ctx.stdout(`${JSON.stringify(s)}\n`);
  if (s.state === 'failed') throw failure(project, s);
  if (s.state === 'ready') say(`The environment of ${project.name} is ready${s.key ? ` (key ${shortKey(s.key)})` : ''}: sessions start from it.`);
  else if (s.state === 'base') say(`The repository of ${project.name} has no devcontainer: sessions start from the sandbox image, nothing to prepare.`);
  else if (s.state === 'preparing') say(s.message);
  else throw new CliError(s.message, 'environment_failed');
  return EXIT_OK;
}

async function logs(ctx: CliContext, opts: EnvOptions & { follow?: boolean; job?: string }, flags: Record<string, unknown>): Promise<number> {
  const pollMs = pollIntervalMs(ctx.env);
  const { client, project } = await connectToProject(ctx, opts.project, flags);
  let jobId = opts.job;
  if (!jobId) {
    const s = await client.environmentStatus(project.id);
    if (!s.job) {
      throw new CliError(
        s.state === 'base'
          ? `The repository of ${project.name} has no devcontainer: there is no preparation, hence no log.`
          : `No preparation of the environment of ${project.name} for its current inputs yet; \`lemni env prepare --project ${project.name}\` starts one.`,
        'not_found',
      );
    }
    jobId = s.job.jobId;
  }
  const log = await readLog(client, project.id, jobId, { follow: opts.follow === true, pollMs, write: (text) => (opts.json ? undefined : ctx.stdout(text)) });
  if (opts.json) ctx.stdout(`${JSON.stringify(log)}\n`);
  return EXIT_OK;
}

export function registerEnv(program: Command, ctx: CliContext, done: Done): void {
  const env = program.command('env').description("a project's environment: its devcontainer, prepared once (network to the policy's mirrors only) before any session");
  env
    .command('status')
    .description('where the environment stands for the default ref: state, key, image, set-up commands, the latest preparation, what a session started now gets')
    .option('--project <name>', 'the project')
    .option('--json', "print the gateway's answer (EnvironmentStatus) as JSON")
    .addHelpText('after', '\nExamples:\n  $ lemni env status --project demo\n  $ lemni env status --project demo --json')
    .action((opts: EnvOptions, cmd: Command) => done(status(ctx, opts, cmd.optsWithGlobals())));
  env
    .command('prepare')
    .description('prepare the environment for its current inputs (administrators and developers of the project); a running preparation is joined')
    .option('--project <name>', 'the project')
    .option('--force', 'prepare again even when it is ready, or after a failed preparation')
    .option('--wait', 'print the log until the preparation ends; exit 0 when ready, 1 when it failed')
    .option('--json', "print the gateway's answer (EnvironmentStatus) as JSON; with --wait, the status once it ended")
    .addHelpText('after', '\nExamples:\n  $ lemni env prepare --project demo --wait\n  $ lemni env prepare --project demo --force --json')
    .action((opts: EnvOptions & { force?: boolean; wait?: boolean }, cmd: Command) => done(prepare(ctx, opts, cmd.optsWithGlobals())));
  env
    .command('logs')
    .description("print the log of the environment's latest preparation (or of --job ID)")
    .option('--project <name>', 'the project')
    .option('--follow', 'keep printing until the preparation ends')
    .option('--job <id>', 'the preparation (default: the latest for the current inputs)')
    .option('--json', 'print the log read as one JSON object (EnvironmentLog) at the end')
    .addHelpText('after', '\nExamples:\n  $ lemni env logs --project demo --follow\n  $ lemni env logs --project demo --job job-7 --json')
    .action((opts: EnvOptions & { follow?: boolean; job?: string }, cmd: Command) => done(logs(ctx, opts, cmd.optsWithGlobals())));
}
