import { discoverAgents, type AgentDirectory, type AgentCatalogue } from '@lemniscate/session';
import { Command } from 'commander';
import { readdir, readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import pc from 'picocolors';
import { connectToProject, type CliContext } from '../context';
import { EXIT_OK } from '../errors';
import { inspectCheckout } from '../git/git';
import { describeAgentsSource } from '../output/repository';
import { shorten, table } from '../output/table';

type Done = (code: Promise<number>) => void;

function fsAgentDirectory(dir: string, location: string): AgentDirectory {
  return {
    location,
    async list() {
      try {
        const entries = await readdir(dir, { withFileTypes: true });
        return entries.filter((e) => e.isFile()).map((e) => e.name);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
    },
    read: (fileName) => readFile(join(dir, fileName), 'utf8'),
  };
}

/** The project's `.lemniscate/agents/` (at the checkout's root) and the user's `~/.lemniscate/agents/`. */
async function discoverLocalAgents(ctx: Pick<CliContext, 'cwd' | 'env'>): Promise<AgentCatalogue> {
  const checkout = await inspectCheckout(ctx.cwd);
  const root = checkout?.root ?? ctx.cwd;
  const home = ctx.env.HOME && ctx.env.HOME !== '' ? ctx.env.HOME : homedir();
  return discoverAgents({
    project: fsAgentDirectory(join(root, '.lemniscate', 'agents'), '.lemniscate/agents'),
    user: fsAgentDirectory(join(home, '.lemniscate', 'agents'), '~/.lemniscate/agents'),
  });
}

/** One agent as `lemni agents` lists it, wherever it was read. */
interface ListedAgent {
  name: string;
  description: string;
  mode: string;
  tools: readonly string[] | null | undefined;
  model: string | null | undefined;
  readOnly: boolean;
  origin: string;
  location: string;
}

interface ListedNotice {
  level: 'error' | 'warning' | 'note';
  code: string;
  location: string;
  message: string;
}

/** The table (or `{…extra, agents, notices}` as JSON) on stdout, the notices on stderr. */
function printAgents(ctx: CliContext, agents: readonly ListedAgent[], notices: readonly ListedNotice[], opts: { json?: boolean }, extra: Record<string, unknown> = {}): number {
  if (opts.json) {
    ctx.stdout(
      `${JSON.stringify({
        ...extra,
        agents: agents.map((a) => ({ name: a.name, description: a.description, mode: a.mode, tools: a.tools, model: a.model, readOnly: a.readOnly, origin: a.origin, location: a.location })),
        notices,
      })}\n`,
    );
  } else {
    ctx.stdout(
      table(
        ['NAME', 'MODE', 'FROM', 'TOOLS', 'DESCRIPTION'],
        agents.map((a) => [a.name, a.mode, a.origin, a.tools ? a.tools.join(',') : 'inherited', shorten(a.description, 70)]),
      ),
    );
  }
  for (const n of notices) {
    const label = n.level === 'error' ? pc.red('error') : n.level === 'warning' ? pc.yellow('warning') : pc.dim('note');
    ctx.stderr(`${label}: ${n.message}\n`);
  }
  return EXIT_OK;
}

async function listLocalAgents(ctx: CliContext, opts: { json?: boolean }): Promise<number> {
  const catalogue = await discoverLocalAgents(ctx);
  return printAgents(ctx, catalogue.listed(), catalogue.notices, opts);
}

/** `--project NAME`: the agents the gateway reads from the project's repository at its default ref (ADR 0012). */
async function listProjectAgents(ctx: CliContext, project: string, opts: { json?: boolean }, flags: Record<string, unknown>): Promise<number> {
  const connected = await connectToProject(ctx, project, flags);
  const view = await connected.client.projectAgents(connected.project.id);
  // The JSON carries the ref and the commit; the text says them beside the table.
  if (!opts.json) ctx.stderr(`${describeAgentsSource(connected.project.name, view)}\n`);
  return printAgents(ctx, view.agents, view.notices, opts, { ref: view.ref, commit: view.commit });
}

export function registerAgents(program: Command, ctx: CliContext, done: Done): void {
  program
    .command('agents')
    .description(
      "list the agents found in .lemniscate/agents/ and ~/.lemniscate/agents/ (the repository's win), with warnings; with --project, those the gateway reads from the project's repository at its default ref",
    )
    .option('--project <name>', "list the agents of this project's repository at its default ref, as the gateway reads them (instead of the local files)")
    .option('--json', 'print {agents, notices} as JSON (with --project: {ref, commit, agents, notices})')
    .addHelpText('after', '\nExamples:\n  $ lemni agents\n  $ lemni agents --project demo --json\n  $ lemni --agent reviewer -p "review the last commit"')
    .action((opts: { json?: boolean; project?: string }, cmd: Command) => {
      // Only a --project given on the command line reads the gateway: without it, the local files, as always.
      const flags = cmd.optsWithGlobals();
      const project = opts.project ?? (typeof flags.project === 'string' ? flags.project : undefined);
      done(project === undefined ? listLocalAgents(ctx, opts) : listProjectAgents(ctx, project, opts, flags));
    });
}
