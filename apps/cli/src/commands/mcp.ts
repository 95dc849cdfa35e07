import type { ProjectMcpView } from '@lemniscate/contracts';
import { Command } from 'commander';
import pc from 'picocolors';
import { connectToProject, type CliContext } from '../context';
import { EXIT_OK } from '../errors';
import { shorten, table } from '../output/table';

type Done = (code: Promise<number>) => void;

/**
 * A server's words shown at a terminal: its control characters (an escape sequence could repaint the
 * screen or hide a line) are written out as visible codes, and a line break becomes a space.
 */
export function printable(text: string): string {
  return text.replace(/\r?\n/g, ' ').replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

const STATUS_WORDS = { pinned: 'pinned', unpinned: 'not pinned yet', changed: 'CHANGED since pinned' } as const;

/** Each server, its tools as last listed with their status, and the `pinned:` lines to approve what is not pinned. */
export function renderMcp(projectName: string, view: ProjectMcpView, wide: boolean): string {
  if (view.servers.length === 0) {
    return `The policy in force for ${projectName} enables no MCP server: a session is offered no MCP tool.\n`;
  }
  const out: string[] = [];
  for (const s of view.servers) {
    const where = s.kind === 'local' ? `local, in the sandbox: ${(s.command ?? []).join(' ')}` : `remote, reached by the gateway: ${s.url}`;
    out.push(`${pc.bold(s.name)} (${where})`);
    if (s.credential) out.push(`  credential: ${s.credential.name} (${s.credential.held ? 'held by the gateway' : pc.yellow('NOT held by the gateway: the server cannot be reached')})`);
    out.push(
      `  tools: free ${s.tools.free.join(', ') || '(none)'}; forbidden ${s.tools.forbidden.join(', ') || '(none)'}; read-only ${s.tools.readOnly.join(', ') || '(none)'}; any other: ${s.tools.default}`,
    );
    if (s.lastError) out.push(`  ${pc.yellow('last start failed')} ${s.lastError.at}: ${printable(s.lastError.message)}`);
    if (!s.lastListing) {
      out.push('  No session has listed its tools yet: start one in this project, then run this again to see them and their pins.');
      out.push('');
      continue;
    }
    out.push(`  listed ${s.lastListing.at}${s.lastListing.sessionId ? ` by session ${s.lastListing.sessionId}` : ''}:`);
    out.push(
      table(
        ['TOOL', 'STATUS', 'DESCRIPTION'],
        s.lastListing.tools.map((t) => [t.name, STATUS_WORDS[t.status], wide ? printable(t.description) : shorten(printable(t.description), 60)]),
      )
        .trimEnd()
        .split('\n')
        .map((l) => `  ${l}`)
        .join('\n'),
    );
    const toPin = s.lastListing.tools.filter((t) => t.status !== 'pinned');
    if (toPin.length) {
      out.push(`  To approve ${toPin.length === 1 ? 'this description' : 'these descriptions'} as listed, publish the policy with, under mcp.servers.${s.name}:`);
      out.push('    pinned:');
      // The whole map as listed: the pins in force stay, the others are added or replaced.
      for (const t of s.lastListing.tools) out.push(`      ${t.name}: "${t.pin}"`);
    }
    out.push('');
  }
  return `${out.join('\n')}\n`;
}

async function listMcp(ctx: CliContext, project: string | undefined, opts: { json?: boolean; wide?: boolean }, flags: Record<string, unknown>): Promise<number> {
  const connected = await connectToProject(ctx, project, flags);
  const view = await connected.client.projectMcp(connected.project.id);
  if (opts.json) ctx.stdout(`${JSON.stringify(view)}\n`);
  else ctx.stdout(renderMcp(connected.project.name, view, opts.wide === true));
  return EXIT_OK;
}

export function registerMcp(program: Command, ctx: CliContext, done: Done): void {
  const mcp = program.command('mcp').description("the MCP servers a project's policy enables, and their tools");
  mcp
    .command('list')
    .description("list the project's MCP servers, the tools each listed when a session last started it, and whether each tool's description is the one pinned in the policy")
    .option('--project <name>', 'the project (default: the profile’s)')
    .option('--json', 'print the view as JSON')
    .option('--wide', 'do not shorten descriptions')
    .addHelpText('after', '\nExamples:\n  $ lemni mcp list --project demo\n  $ lemni mcp list --project demo --json')
    .action((opts: { project?: string; json?: boolean; wide?: boolean }, cmd: Command) => {
      done(listMcp(ctx, opts.project, opts, cmd.optsWithGlobals()));
    });
}
