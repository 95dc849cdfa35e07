import { configPath, loadConfig, resolveConnection, type CliConfig, type Connection, type ConnectionFlags, type Env } from './config/config';
import type { ProjectView } from '@lemniscate/contracts';
import { CliError } from './errors';
import { GatewayClient } from './gateway/gateway-client';
import type { Prompter } from './interactive/prompter';

/** Everything a command touches outside itself, so commands run the same in tests and for real. */
export interface CliContext {
  env: Env;
  cwd: string;
  stdout(text: string): void;
  stderr(text: string): void;
  /** Whether a person is at the terminal (interactive mode and prompts need one). */
  isTTY: boolean;
  /** Registers what Ctrl-C does; returns a function that unregisters it. */
  onInterrupt(handler: () => void): () => void;
  /** All of standard input, read to its end (a password or token piped in with --password-stdin). */
  readStdin(): Promise<string>;
  /** The interactive prompts, loaded only when needed. */
  prompter(): Promise<Prompter>;
  fetch: typeof fetch;
  /** The terminal's height in lines, when standard output is one. */
  rows?: number;
  /** Runs a pager command (`$PAGER`) with `text` on its input; false when it could not be started. */
  runPager?(command: string, text: string): Promise<boolean>;
}

/**
 * Long output (a diff) through the person's pager: `$PAGER` (default `less -FRX`), only at a terminal
 * and only when the text is taller than it; `LEMNISCATE_PAGER=` (empty) or `--no-pager` turns it off.
 * Anything else — a pipe, CI, a pager that cannot start — gets the text on standard output.
 */
export async function page(ctx: CliContext, text: string, enabled = true): Promise<void> {
  const command = ctx.env.LEMNISCATE_PAGER ?? ctx.env.PAGER ?? 'less -FRX';
  const tall = text.split('\n').length > (ctx.rows ?? 24) - 1;
  if (enabled && ctx.isTTY && tall && command.trim() !== '' && ctx.runPager && (await ctx.runPager(command, text))) return;
  ctx.stdout(text);
}

export function configFile(ctx: CliContext): string {
  return configPath(ctx.env);
}

export function readConfig(ctx: CliContext): CliConfig {
  return loadConfig(configFile(ctx), (line) => ctx.stderr(`${line}\n`));
}

export function connect(ctx: CliContext, flags: ConnectionFlags): { connection: Connection; client: GatewayClient; config: CliConfig } {
  const path = configFile(ctx);
  const config = loadConfig(path, (line) => ctx.stderr(`${line}\n`));
  const connection = resolveConnection(flags, ctx.env, config, path);
  return { connection, client: new GatewayClient(connection.gateway, connection.token, ctx.fetch), config };
}

export function globalFlags(opts: Record<string, unknown>): ConnectionFlags {
  const str = (k: string) => (typeof opts[k] === 'string' ? (opts[k] as string) : undefined);
  return { profile: str('profile'), gateway: str('gateway'), token: str('token'), project: str('project') };
}

/**
 * The gateway client and the project named by --project (the command's own option, or the global one
 * the parser may have filed it under, or the profile's project), resolved by name.
 */
export async function connectToProject(ctx: CliContext, project: string | undefined, flags: Record<string, unknown>): Promise<{ client: GatewayClient; project: ProjectView }> {
  const { client, connection } = connect(ctx, globalFlags({ ...flags, project: project ?? flags.project }));
  const projectName = connection.project;
  if (!projectName) throw new CliError('Name the project with --project NAME.', 'usage');
  return { client, project: await client.projectByName(projectName) };
}
