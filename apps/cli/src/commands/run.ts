import { Command, Option } from 'commander';
import { connect, globalFlags, type CliContext } from '../context';
import { developerContext } from '../session/developer-context';
import { CliError, EXIT_FAILURE } from '../errors';
import { runInteractive } from '../interactive/interactive';
import { terminalSpinner } from '../interactive/terminal-prompter';
import { noSpinner } from '../interactive/prompter';
import { runHeadless, type OutputFormat } from '../session/headless';
import { gatewaySessionApi } from '../session/session-api';
import { reconnectWindowMs } from '../gateway/event-stream';

export interface RunFlags {
  print?: string;
  project?: string;
  agent?: string;
  model?: string;
  outputFormat: OutputFormat;
  apply?: boolean;
  includeUncommitted?: boolean;
  waitForApprovals?: boolean;
  failOnRefusal?: boolean;
  profile?: string;
  gateway?: string;
  token?: string;
}

/** The options of `lemni` itself: a headless run with -p, an interactive one without. */
export function addRunOptions(program: Command): Command {
  return program
    .option('-p, --print <instruction>', 'run one instruction headless (no prompts), print the result and exit 0, 1 or 3')
    .option('--project <name>', "the project to work on (default: the profile's project)")
    .option('--agent <name>', 'the agent to run (a .lemniscate/agents/NAME.md file, or general / explore)')
    .option('--model <ref>', "the model, e.g. scripted:PATH (default: the project's configuration)")
    .addOption(
      new Option('--output-format <format>', 'with -p: text (the summary), json (one object at the end) or stream-json (one event per line, live)')
        .choices(['text', 'json', 'stream-json'])
        .default('text'),
    )
    .option('--apply', "apply the approved patch with `git apply --3way` (default inside a checkout of the project's repository)")
    .option('--no-apply', 'never apply the approved patch; it stays in the session (`lemni apply ID`)')
    .option('--include-uncommitted', 'upload your uncommitted changes (`git diff HEAD --binary` and untracked files) as the starting patch')
    .option('--fail-on-refusal', 'with -p: exit 3 when a proposed change was refused or reverted, even if the session completed')
    .option('--wait-for-approvals', 'with -p: approvals wait for a person (console or `lemni approvals approve ID`) instead of being refused');
}

export async function runRoot(ctx: CliContext, flags: RunFlags): Promise<number> {
  const { connection, client, config } = connect(ctx, globalFlags(flags as unknown as Record<string, unknown>));
  const projectName = connection.project;
  if (!projectName) throw new CliError('Name a project with --project NAME (or add `project:` to your profile); `lemni projects` lists them.', 'usage');
  if (!client.hasToken) throw new CliError(`The gateway at ${connection.gateway} needs an API token: run \`lemni login\`, pass --token, or set LEMNISCATE_TOKEN.`, 'unauthenticated');
  const project = await client.projectByName(projectName);
  const api = gatewaySessionApi(client, (attempt) => ctx.stderr(`Live events interrupted; reconnecting (attempt ${attempt})…\n`), reconnectWindowMs(ctx.env));
  const developer = await developerContext(ctx.env, config, (line) => ctx.stderr(`${line}\n`));
  const common = { project, agent: flags.agent, model: flags.model, apply: flags.apply, includeUncommitted: flags.includeUncommitted === true, cwd: ctx.cwd, developer };
  if (flags.print !== undefined) {
    if (flags.print.trim() === '') throw new CliError('The instruction given to -p is empty.', 'usage');
    return runHeadless(
      api,
      { ...common, instruction: flags.print, outputFormat: flags.outputFormat, waitForApprovals: flags.waitForApprovals === true, failOnRefusal: flags.failOnRefusal === true },
      ctx,
    );
  }
  if (flags.failOnRefusal) {
    throw new CliError('--fail-on-refusal goes with -p; interactive mode asks you directly.', 'usage');
  }
  if (flags.waitForApprovals) {
    throw new CliError('--wait-for-approvals goes with -p; interactive mode asks you directly.', 'usage');
  }
  if (!ctx.isTTY) {
    throw new CliError('Interactive mode needs a terminal; in scripts and CI use `lemni -p "INSTRUCTION"`.', 'usage', EXIT_FAILURE);
  }
  const prompter = await ctx.prompter();
  const spinner = process.stderr.isTTY ? terminalSpinner(process.stderr) : noSpinner;
  return runInteractive(api, prompter, common, { stdout: ctx.stdout, stderr: ctx.stderr, onInterrupt: ctx.onInterrupt, spinner });
}
