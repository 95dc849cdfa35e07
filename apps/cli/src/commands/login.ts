import { Command } from 'commander';
import { hostname } from 'node:os';
import { configFile, readConfig, type CliContext } from '../context';
import { saveConfig, withProfile } from '../config/config';
import { CliError, EXIT_OK } from '../errors';
import { GatewayClient } from '../gateway/gateway-client';
import { ssoSession } from './sso';

interface LoginFlags {
  gateway?: string;
  email?: string;
  token?: string;
  passwordStdin?: boolean;
  profile?: string;
  project?: string;
  default?: boolean;
  sso?: boolean;
  browser?: boolean;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

export async function login(ctx: CliContext, flags: LoginFlags, readPassword: () => Promise<string> = readStdin): Promise<number> {
  const path = configFile(ctx);
  const config = readConfig(ctx);
  const profileName = flags.profile ?? config.defaultProfile ?? 'default';
  const existing = config.profiles[profileName];
  let gateway = flags.gateway ?? ctx.env.LEMNISCATE_GATEWAY ?? undefined;
  if (flags.sso && (flags.token || flags.email || flags.passwordStdin))
    throw new CliError('--sso signs in with the identity provider: it goes without --token, --email and --password-stdin.', 'usage');
  if (!gateway && ctx.isTTY && !flags.token) gateway = await (await ctx.prompter()).text('Gateway URL', { default: existing?.gateway ?? 'http://127.0.0.1:7070' });
  gateway ??= existing?.gateway;
  if (!gateway) throw new CliError('Give the gateway URL with --gateway URL (e.g. http://127.0.0.1:7070).', 'usage');
  gateway = gateway.replace(/\/+$/, '');
  let token = flags.token;
  let who: string;
  if (token) {
    const me = await new GatewayClient(gateway, token, ctx.fetch).me();
    who = `${me.user.email} (${me.user.role})`;
  } else if (flags.sso) {
    const session = await ssoSession(ctx, gateway, { openBrowser: flags.browser !== false });
    const created = await new GatewayClient(gateway, undefined, ctx.fetch).createToken(`lemni on ${hostname()} (single sign-on)`.slice(0, 100), session);
    token = created.token;
    who = `${session.response.user.email} (${session.response.user.role})`;
    ctx.stderr(
      `Created API token ${created.prefix}… (expires ${created.expiresAt.slice(0, 10)}); the identity provider is asked again as it is used, so it stops working when you leave there. Revoke it from the console if this machine is lost.\n`,
    );
  } else {
    let email = flags.email;
    let password: string;
    if (flags.passwordStdin) {
      if (!email) throw new CliError('--password-stdin needs --email.', 'usage');
      password = await readPassword();
    } else {
      if (!ctx.isTTY) throw new CliError('No terminal to ask for a password: pass --token TOKEN, or --email and --password-stdin.', 'usage');
      const prompter = await ctx.prompter();
      email ??= await prompter.text('Email');
      password = await prompter.text('Password', { secret: true });
    }
    const anonymous = new GatewayClient(gateway, undefined, ctx.fetch);
    const session = await anonymous.login(email, password);
    const created = await anonymous.createToken(`lemni on ${hostname()}`.slice(0, 100), session);
    token = created.token;
    who = `${session.response.user.email} (${session.response.user.role})`;
    ctx.stderr(`Created API token ${created.prefix}… (expires ${created.expiresAt.slice(0, 10)}); revoke it from the console if this machine is lost.\n`);
  }
  const project = flags.project ?? existing?.project;
  const next = withProfile(config, profileName, { gateway, token, ...(project ? { project } : {}) }, flags.default === true);
  saveConfig(path, next);
  ctx.stdout(`Logged in to ${gateway} as ${who}; saved as profile "${profileName}" in ${path}${next.defaultProfile === profileName ? ' (the default profile)' : ''}.\n`);
  return EXIT_OK;
}

export function registerLogin(program: Command, ctx: CliContext, done: (code: Promise<number>) => void): void {
  program
    .command('login')
    .description('sign in to a gateway and store a personal API token in ~/.lemniscate/config.yaml (mode 600)')
    .option('--email <email>', 'your email (asked when omitted)')
    .option('--password-stdin', 'read the password from standard input (for scripts)')
    .option('--sso', "sign in with the deployment's identity provider in a browser (the answer comes back to this machine's 127.0.0.1)")
    .option('--no-browser', 'with --sso: print the address to open instead of opening a browser')
    .option('--default', 'make this profile the default one')
    .addHelpText(
      'after',
      '\nExamples:\n  $ lemni login --gateway http://127.0.0.1:7070\n  $ lemni login --gateway https://lemni.example.org --sso\n  $ lemni login --profile ci --gateway https://lemni.example.org --token "$LEMNI_TOKEN" --project demo\n  $ echo "$PASSWORD" | lemni login --gateway http://127.0.0.1:7070 --email dev@example.org --password-stdin',
    )
    .action((opts: LoginFlags, cmd: Command) => done(login(ctx, { ...cmd.optsWithGlobals(), ...opts })));
}
