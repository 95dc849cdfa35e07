import { discoverAgents, type AgentDirectory, type AgentCatalogue } from '@lemniscate/session';
import { Command } from 'commander';
import { readdir, readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import pc from 'picocolors';
import type { CliContext } from '../context';
import { EXIT_OK } from '../errors';
import { inspectCheckout } from '../git/git';
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

async function listAgents(ctx: CliContext, opts: { json?: boolean }): Promise<number> {
  const catalogue = await discoverLocalAgents(ctx);
  const agents = catalogue.listed();
  if (opts.json) {
    ctx.stdout(
      `${JSON.stringify({
        agents: agents.map((a) => ({ name: a.name, description: a.description, mode: a.mode, tools: a.tools, model: a.model, readOnly: a.readOnly, origin: a.origin, location: a.location })),
        notices: catalogue.notices,
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
  for (const n of catalogue.notices) {
    const label = n.level === 'error' ? pc.red('error') : n.level === 'warning' ? pc.yellow('warning') : pc.dim('note');
    ctx.stderr(`${label}: ${n.message}\n`);
  }
  return EXIT_OK;
}

export function registerAgents(program: Command, ctx: CliContext, done: Done): void {
  program
    .command('agents')
    .description("list the agents found in .lemniscate/agents/ and ~/.lemniscate/agents/ (the repository's win), with warnings")
    .option('--json', 'print {agents, notices} as JSON')
    .addHelpText('after', '\nExamples:\n  $ lemni agents\n  $ lemni --agent reviewer -p "review the last commit"')
    .action((opts: { json?: boolean }) => done(listAgents(ctx, opts)));
}
